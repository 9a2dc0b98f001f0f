"""Helpers for the VM tests: compile with the vm pipeline, load, run both ways."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes
from relaxc.backend.vm import format as F
from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import load_npz
from relaxc.ir.nodes import Module
from relaxc.passes.kill_after_last_use import KillAfterLastUse
from relaxc.passes.manifest_alloc import ManifestAlloc
from relaxc.passes.pipeline import Pipeline
from relaxc.passes.plan_memory import PlanMemory

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples"
SAMPLE_STEMS = ("mlp", "cnn", "transformer", "relay_memory")

PIPELINES = {
    "none": [],
    "manifest": [ManifestAlloc],
    "planned": [ManifestAlloc, PlanMemory],
    "vm": [ManifestAlloc, PlanMemory, KillAfterLastUse],
}

# Every opcode: arena and dynamic storages, tensors, invoke of an op and of a primitive
# function, a kernel without destination passing, calls of a primitive and of a helper,
# tuple, projection, alias, view, runtime builtins, named and inline constants, and the
# three kills (vm.kill_object on a tuple whose fields stay in use).
KITCHEN_SINK = """\
fn @prim(%a: Tensor[(n, 4), f32], %b: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32]
    attrs {primitive = true} {
  %s = add(%a, %b)
  %r = relu(%s)
  return %r
}

fn @helper(%a: Tensor[(m, 4), f32]) -> Tensor[(m, 4), f32] {
  %two = const(2.0, f32)
  %h = multiply(%a, %two)
  return %h
}

fn @main(%x: Tensor[(n, 4), f32], %w: Tensor[(4,), f32]) -> Tuple[Tensor[(n, 4), f32], Tensor[(n * 4,), f32]]
    attrs {upper_bounds = {n = 8}} {
  %c: Tensor[(4,), f32] = const("bias")
  %lit = const([[1, 0], [0, 1]], i32)
  %arena = memory.alloc_storage(128, align=64, scope="global", arena=true)
  %dyn = memory.alloc_storage(16 * n, align=16)
  %t0 = memory.alloc_tensor(%arena, 0, (n, 4), f32)
  invoke add(%x, %c) outs (%t0)
  %t1 = memory.alloc_tensor(%dyn, 0, (n, 4), f32)
  invoke @prim(%t0, %x) outs (%t1)
  memory.kill_tensor(%t0)
  memory.kill_storage(%arena)
  %k = exp(%t1)
  memory.kill_tensor(%t1)
  memory.kill_storage(%dyn)
  %p = call @prim(%k, %k)
  %h = call @helper(%p)
  %tup = (%h, %w)
  %first = %tup.0
  vm.kill_object(%tup)
  %al = %first
  %v = reshape(%al, (n * 4,))
  %o: Tensor[(n, 4), f32] = call_packed("vm.builtin.reshape", %v, (n, 4))
  %sum = add(%o, %w)
  %e = expand_dims(%sum, 0)
  %sq = squeeze(%e, 0)
  %last = negative(%sq)
  return (%last, %v)
}
"""  # noqa: E501
KITCHEN_WEIGHTS = {"bias": np.array([0.5, -1.0, 2.0, 0.0], np.float32)}


def parse(text: str, name: str = "test.rx") -> Module:
    return parse_module(text, name)


def compile_text(text: str, passes: str = "vm", name: str = "test.rx") -> Module:
    m = parse(text, name)
    ps = PIPELINES[passes]
    return Pipeline([p() for p in ps]).run(m) if ps else m


def sample(stem: str) -> tuple[Module, dict]:
    path = SAMPLES / f"{stem}.rx"
    weights_path = path.with_suffix(".npz")
    weights = dict(load_npz(weights_path)) if weights_path.exists() else {}
    return parse(path.read_text(), str(path)), weights


def build(module: Module, weights: Mapping[str, np.ndarray] | None = None, name: str = "test.rxb"):
    return load_bytes(compile_module(module, weights), name)


def inputs_for(
    module: Module, dims: Mapping[str, int] | None = None, seed: int = 0, entry: str = "main"
) -> list:
    fn = module.get(entry)
    return random_inputs(fn, resolve_dims(fn, dict(dims or {})), seed)


def interpret(module: Module, weights, args, dims=None, entry: str = "main") -> Any:
    return Interpreter(module, weights).run(entry, args, dims)


def assert_identical(a: Any, b: Any) -> None:
    """Bit-identical outputs (same structure, shapes, dtypes and bytes)."""
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_identical(x, y)
        return
    assert isinstance(b, np.ndarray)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    assert a.tobytes() == b.tobytes(), f"values differ:\n{a}\n{b}"


def rehash(data: bytes | bytearray) -> bytes:
    """``data`` with its header's length and checksum made to match its payload."""
    data = bytearray(data)
    payload = bytes(data[F.HEADER_SIZE :])
    magic, version, flags, _, _ = F.HEADER.unpack_from(data, 0)
    data[: F.HEADER_SIZE] = F.HEADER.pack(
        magic, version, flags, len(payload), hashlib.sha256(payload).digest()
    )
    return bytes(data)


def vm_run(
    exe, args, dims=None, entry: str = "main", poison: bool = True
) -> tuple[Any, VirtualMachine]:
    vm = VirtualMachine(exe, poison=poison)
    return vm.run(entry, args, dims), vm

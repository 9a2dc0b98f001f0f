"""Whole models imported from ONNX give onnxruntime's results through the reference
interpreter, the VM (vm pipeline, with poisoning) and the C backend (compiled with cc)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes
from relaxc.frontend.onnx import import_onnx
from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.passes.assemble import assemble_pipeline
from relaxc.cli.report.analysis import memory_report
from relaxc.passes.pipeline import Pipeline, VerifyInstrument

from tests.backend.c.cbuild import compile_c, emit, needs_cc, run_c

from .models import attention_block, conv_branches, residual_block
from .util import assert_matches, feed_order, flatten, import_and_compare, run_ort

MODELS: dict[str, Callable[..., tuple[Any, dict]]] = {
    "conv_branches": conv_branches,
    "residual_block": residual_block,
    "attention_block": attention_block,
}


def vm_results(result, args, dims=None) -> list[np.ndarray]:
    lowered = Pipeline(assemble_pipeline("vm"), [VerifyInstrument()]).run(result.module)
    exe = load_bytes(compile_module(lowered, result.weights), "model.rxb")
    return flatten(VirtualMachine(exe, poison=True).run("main", list(args), dims))


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("opset", [11, 13, 17])
def test_interpreter_and_vm_match_onnxruntime(name: str, opset: int) -> None:
    if name == "attention_block" and opset < 17:
        pytest.skip("LayerNormalization is an ONNX operator from opset 17")
    model, feeds = MODELS[name](opset=opset)
    dims = {"seq": 5} if name == "attention_block" else None
    result = import_and_compare(model, feeds, dims)
    want = run_ort(model, feeds)
    args = [feeds[n] for n in feed_order(model)]
    assert_matches(vm_results(result, args, dims), want, "vm")


@pytest.mark.parametrize("seq", [1, 3, 9])
@pytest.mark.parametrize("bound", [None, 16])
def test_attention_with_symbolic_sequence_length(seq: int, bound: int | None) -> None:
    model, feeds = attention_block(seq=seq)
    result = import_and_compare(
        model, feeds, {"seq": seq}, upper_bounds={"seq": bound} if bound else None
    )
    fn = result.module.functions[0]
    assert "seq" in print_module(result.module).split("{", 1)[0]  # the parameter's type is symbolic
    want = run_ort(model, feeds)
    assert_matches(vm_results(result, [feeds["x"]], {"seq": seq}), want, f"vm seq={seq}")
    lowered = Pipeline(assemble_pipeline("vm"), [VerifyInstrument()]).run(result.module)
    (report,) = memory_report(lowered)
    if bound:  # everything is planned into the arena at the bound: no run-time allocation
        assert fn.upper_bounds() == {"seq": 16}
        assert report.arena_bytes > 0 and report.dynamic == []
    else:  # tensors whose size depends on seq are allocated at run time
        assert report.dynamic


@needs_cc
@pytest.mark.parametrize("name", sorted(MODELS))
def test_c_backend_matches_onnxruntime(name: str, tmp_path: Path) -> None:
    model, feeds = MODELS[name]()
    bounds = {"seq": 16} if name == "attention_block" else None
    result = import_onnx(model, upper_bounds=bounds)
    # The attention bias is full(shape=(1, 1, seq, seq)): a symbolic dim no tensor argument
    # carries, which the packed calling convention cannot pass (LegalizePackedCalls says so).
    sources = emit(
        result.module, result.weights, tmp_path, prefix=name, unpacked=name == "attention_block"
    )
    built = compile_c(tmp_path, sources)
    args = [feeds[n] for n in feed_order(model)]
    dims = {"seq": feeds["x"].shape[1]} if name == "attention_block" else None
    assert_matches(run_c(built, args, dims), run_ort(model, feeds), "c")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_import_is_deterministic_and_round_trips(name: str) -> None:
    model, _ = MODELS[name]()
    first, second = import_onnx(model), import_onnx(model.SerializeToString())
    text = print_module(first.module)
    assert text == print_module(second.module)
    assert sorted(first.weights) == sorted(second.weights)
    assert all(first.weights[k].tobytes() == second.weights[k].tobytes() for k in first.weights)
    assert parse_module(text, "m.rx") == first.module

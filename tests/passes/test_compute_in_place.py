"""ComputeInPlace: an op writes its output over an input that dies at it, as a memory.view,
only where its record allows and nothing still live shares the bytes; results unchanged on
the interpreter and the VM (poisoned), the plan checked, the arena smaller."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.backend.vm import compile_module
from relaxc.backend.vm.loader import load_bytes
from relaxc.cli.main import cli
from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.ir.nodes import Bind, Module
from relaxc.ir.verifier import verify_module
from relaxc.ir.vocab import ALLOC_STORAGE, MEMORY_VIEW, call_of
from relaxc.passes.assemble import assemble_pipeline
from relaxc.passes.compute_in_place import ComputeInPlace
from relaxc.passes.manifest_alloc import ManifestAlloc
from relaxc.cli.report.analysis import memory_report
from relaxc.passes.pipeline import Pipeline, VerifyInstrument
from relaxc.passes.plan_workspace import PlanWorkspace

from ..backend.vm.util import assert_identical, inputs_for, interpret, vm_run

SHARING = "ElideConcatSplit,ComputeInPlace"


def explicit(text: str) -> Module:
    m = parse_module(text, "t.rx")
    return PlanWorkspace()(ManifestAlloc()(m))


def in_place(text: str) -> Module:
    out = ComputeInPlace()(explicit(text))
    verify_module(out)
    return out


def views(m: Module, fn: str = "main") -> dict[str, str]:
    """name -> the value it is a view of."""
    out = {}
    for s in m.get(fn).body:
        c = call_of(s.value, MEMORY_VIEW) if isinstance(s, Bind) else None
        if c is not None:
            out[s.name] = c.args[0].name
    return out


def storages(m: Module, fn: str = "main") -> list[str]:
    return [
        s.name for s in m.get(fn).body if isinstance(s, Bind) and call_of(s.value, ALLOC_STORAGE)
    ]


def planned(text: str, sharing: bool = True) -> Module:
    disable = [] if sharing else [SHARING]
    passes = assemble_pipeline("vm", disable=disable)
    passes = [p if p.name != "PlanMemory" else type(p)(check=True) for p in passes]
    return Pipeline(passes, [VerifyInstrument()]).run(parse_module(text, "t.rx"))


def arena(m: Module) -> int:
    return sum(r.arena_bytes for r in memory_report(m))


def same_results_on_the_vm(text: str, weights=None, seed: int = 0) -> Module:
    """The vm pipeline's program, run on the VM with poisoned frees, gives the interpreter's
    bits on the source; returns the compiled module."""
    source = parse_module(text, "t.rx")
    compiled = planned(text)
    args = inputs_for(source, seed=seed)
    want = interpret(source, weights or {}, args)
    exe = load_bytes(compile_module(compiled, weights or {}), "t.rxb")
    got, _ = vm_run(exe, args, poison=True)
    assert_identical(want, got)
    assert_identical(want, interpret(compiled, weights or {}, args))
    return compiled


CHAIN = """
fn @main(%x: Tensor[(1, 8, 16, 16), f32], %w: Tensor[(8, 8, 3, 3), f32],
         %g: Tensor[(8,), f32], %b: Tensor[(8,), f32], %m: Tensor[(8,), f32],
         %v: Tensor[(8,), f32]) -> Tensor[(1, 8, 8, 8), f32] {
  %c = conv2d(%x, %w, padding=(1, 1, 1, 1))
  %n = batch_norm(%c, %g, %b, %m, %v)
  %r = relu(%n)
  %p = max_pool2d(%r, pool_size=(2, 2), strides=(2, 2))
  return %p
}
"""


def test_conv_batch_norm_relu_share_one_buffer() -> None:
    m = in_place(CHAIN)
    assert views(m) == {"n": "c", "r": "n"}
    assert storages(m) == ["c_storage", "p_storage"]  # n's and r's storages are gone
    p = planned(CHAIN)
    assert arena(p) == 1 * 8 * 16 * 16 * 4  # conv's output only; the pool writes the output
    assert arena(planned(CHAIN, sharing=False)) == 2 * 8 * 16 * 16 * 4


def test_chain_results_bit_identical_on_the_vm() -> None:
    text = CHAIN.replace("%v: Tensor[(8,), f32]", "%v: Tensor[(8,), f32]")
    src = parse_module(text, "t.rx")
    args = inputs_for(src, seed=3)
    args[5] = np.abs(args[5]) + 0.5  # a variance
    compiled = planned(text)
    want = interpret(src, {}, args)
    got, _ = vm_run(load_bytes(compile_module(compiled, {}), "t.rxb"), args, poison=True)
    assert_identical(want, got)


def test_not_in_place_while_the_input_is_still_used() -> None:
    text = """
fn @main(%x: Tensor[(64,), f32]) -> Tensor[(64,), f32] {
  %a = exp(%x)
  %b = relu(%a)
  %c = add(%a, %b)
  return %c
}
"""
    m = in_place(text)
    # relu(%a): %a is read again by add, so %b keeps its own buffer; add may write over
    # either input, both die there, but the output is the caller's: %b moves into it.
    assert "b" not in views(m) or views(m)["b"] != "a"
    same_results_on_the_vm(text)


def test_never_over_a_parameter_or_a_constant() -> None:
    text = """
fn @main(%x: Tensor[(64,), f32]) -> Tensor[(64,), f32] {
  %k: Tensor[(64,), f32] = const("k")
  %a = add(%x, %k)
  %b = exp(%a)
  return %b
}
"""
    m = in_place(text)
    # Neither %x (a parameter) nor %k (a constant) is written over; exp's output is the
    # caller's, so %a is computed there and exp overwrites it in place.
    assert views(m) == {"a": "b"}


def test_never_over_an_output() -> None:
    text = """
fn @main(%x: Tensor[(64,), f32]) -> Tuple[Tensor[(64,), f32], Tensor[(64,), f32]] {
  %a = exp(%x)
  %b = relu(%a)
  return (%a, %b)
}
"""
    m = in_place(text)
    assert views(m) == {}  # %a is returned: relu must not overwrite it
    same_results_on_the_vm(text)


def test_not_when_another_input_shares_the_bytes() -> None:
    text = """
fn @main(%x: Tensor[(2, 32), f32]) -> Tensor[(32,), f32] {
  %a = exp(%x)
  %lo = memory.view(%a, 0, (32,), f32)
  %hi = memory.view(%a, 128, (32,), f32)
  %s = add(%lo, %hi)
  %t = negative(%s)
  return %t
}
"""
    m = in_place(text)
    assert views(m)["s"] == "t"  # add reads two halves of one buffer: not over either
    same_results_on_the_vm(text)


def test_same_value_twice_at_allowed_positions() -> None:
    text = """
fn @main(%x: Tensor[(64,), f32]) -> Tensor[(64,), f32] {
  %a = exp(%x)
  %b = multiply(%a, %a)
  %c = negative(%b)
  return %c
}
"""
    m = in_place(text)
    assert views(m)["b"] == "a"
    same_results_on_the_vm(text)


def test_broadcast_output_larger_than_the_input_is_not_in_place() -> None:
    text = """
fn @main(%x: Tensor[(1, 64), f32], %y: Tensor[(8, 64), f32]) -> Tensor[(8, 64), f32] {
  %a = exp(%x)
  %b = add(%a, %y)
  %c = negative(%b)
  return %c
}
"""
    m = in_place(text)
    assert views(m) == {"b": "c"}  # (1, 64) cannot hold (8, 64): %a keeps its buffer
    same_results_on_the_vm(text)


def test_an_op_without_an_inplace_record_keeps_its_buffer() -> None:
    text = """
fn @main(%x: Tensor[(1, 4, 8, 8), f32]) -> Tensor[(1, 4, 4, 4), f32] {
  %a = exp(%x)
  %b = max_pool2d(%a, pool_size=(2, 2), strides=(2, 2))
  %c = negative(%b)
  return %c
}
"""
    m = in_place(text)
    assert views(m) == {"b": "c"}  # the pool writes a buffer of its own


def test_the_last_op_writes_over_its_input_moved_into_the_output() -> None:
    text = """
fn @main(%x: Tensor[(64,), f32]) -> Tensor[(64,), f32] {
  %a = exp(%x)
  %b = relu(%a)
  return %b
}
"""
    m = in_place(text)
    # %b is the caller's memory: %a is computed in it and relu overwrites it there.
    assert views(m) == {"a": "b"}
    assert arena(planned(text)) == 0
    same_results_on_the_vm(text)


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_nd_writes_its_updates_over_a_dying_data_input(reduction: str) -> None:
    text = f"""
fn @main(%x: Tensor[(16, 32), f32], %u: Tensor[(3, 32), f32]) -> Tensor[(16, 32), f32] {{
  %i = const([[1], [-2], [1]], i64)
  %a = exp(%x)
  %s = scatter_nd(%a, %i, %u, reduction="{reduction}")
  %r = negative(%s)
  return %r
}}
"""
    m = in_place(text)
    assert views(m)["s"] == "a"  # the scatter's output is its data's buffer
    assert arena(planned(text)) == 0  # all three live in the caller's output
    assert arena(planned(text, sharing=False)) == 2 * 16 * 32 * 4
    same_results_on_the_vm(text)


def test_scatter_nd_keeps_its_own_buffer_while_the_data_is_still_read() -> None:
    text = """
fn @main(%x: Tensor[(16, 32), f32], %u: Tensor[(3, 32), f32]) -> Tensor[(16, 32), f32] {
  %i = const([[1], [-2], [1]], i64)
  %a = exp(%x)
  %s = scatter_nd(%a, %i, %u)
  %r = add(%s, %a)
  return %r
}
"""
    m = in_place(text)
    assert views(m).get("s") != "a"  # %a is read by add after the scatter
    same_results_on_the_vm(text)


def test_running_twice_changes_nothing() -> None:
    once = in_place(CHAIN)
    assert print_module(ComputeInPlace()(once)) == print_module(once)


def test_dump_parses_again_and_gives_the_same_module() -> None:
    m = in_place(CHAIN)
    again = parse_module(print_module(m), "dump.rx")
    verify_module(again)
    assert print_module(again) == print_module(m)


def test_planned_functions_are_left_alone() -> None:
    p = planned(CHAIN, sharing=False)
    assert ComputeInPlace().run(p) == p


# -- a property: random chains of elementwise ops with fan-out --------------------------

UNARY = ["relu", "exp", "negative", "sigmoid", "tanh"]
BINARY = ["add", "multiply", "subtract", "maximum"]


@st.composite
def elementwise_programs(draw) -> str:
    n = draw(st.integers(2, 9))
    names = ["x"]
    lines = []
    for i in range(n):
        v = f"v{i}"
        if len(names) > 1 and draw(st.booleans()):
            a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            lines.append(f"  %{v} = {draw(st.sampled_from(BINARY))}(%{a}, %{b})")
        else:
            a = draw(st.sampled_from(names[-3:]))
            lines.append(f"  %{v} = {draw(st.sampled_from(UNARY))}(%{a})")
        names.append(v)
    outs = draw(st.lists(st.sampled_from(names[1:]), min_size=1, max_size=2, unique=True))
    ret = f"%{outs[0]}" if len(outs) == 1 else "(" + ", ".join(f"%{o}" for o in outs) + ")"
    rtype = "Tensor[(4, 8), f32]"
    rtypes = rtype if len(outs) == 1 else "Tuple[" + ", ".join([rtype] * len(outs)) + "]"
    return (
        f"fn @main(%x: Tensor[(4, 8), f32]) -> {rtypes} {{\n"
        + "\n".join(lines)
        + f"\n  return {ret}\n}}\n"
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(elementwise_programs(), st.integers(0, 3))
def test_property_in_place_never_changes_results_nor_grows_the_arena(text: str, seed: int) -> None:
    compiled = same_results_on_the_vm(text, seed=seed)
    assert arena(compiled) <= arena(planned(text, sharing=False))


# -- the CLI and a real model ------------------------------------------------------------


def test_run_stats_measures_the_planned_memory(tmp_path: Path) -> None:
    src = tmp_path / "chain.rx"
    src.write_text(CHAIN)
    runner = CliRunner()
    r = runner.invoke(cli, ["build", str(src), "-o", str(tmp_path / "chain.rxb"), "-q"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["run", str(tmp_path / "chain.rxb"), "--stats", "--poison"])
    assert r.exit_code == 0, r.output
    assert "the run held exactly the memory the plan promised" in r.output
    r = runner.invoke(cli, ["passes", str(src), "--dump-after", "ComputeInPlace"])
    assert r.exit_code == 0 and "%n = memory.view(%c, 0, (1, 8, 16, 16), f32)" in r.output


onnx = pytest.importorskip("onnx")


def test_squeezenet_arena_is_conv1_and_its_pool() -> None:
    """On SqueezeNet the ReLU after conv1 runs in place, so the peak is conv1's output and the
    max pool's (IREE and TFLite Micro need the same 3,928,576 bytes; relaxc needed 6,308,352)."""
    from relaxc.frontend.onnx import import_onnx

    from ..frontend.onnx.test_model_zoo import LIGHT, with_random_weights, zoo_model

    assert LIGHT.exists()
    result = import_onnx(with_random_weights(zoo_model("squeezenet")))
    compiled = Pipeline(assemble_pipeline("vm"), [VerifyInstrument()]).run(result.module)
    conv1, pool1 = 64 * 111 * 111 * 4, 64 * 55 * 55 * 4
    assert arena(compiled) == conv1 + pool1 == 3_928_576
    args = inputs_for(result.module, seed=1)
    want = interpret(result.module, result.weights, args)
    exe = load_bytes(compile_module(compiled, result.weights), "sq.rxb")
    got, _ = vm_run(exe, args, poison=True)
    assert_identical(want, got)


def test_squeezenet_in_c_agrees_with_the_interpreter(squeezenet_c) -> None:
    """The C target honours the same sharing: squeezenet built with the c pipeline (in
    place, concats joined) computes the interpreter's output within the C tolerance (the
    build is the session's, tests/conftest.py)."""
    from ..backend.c.cbuild import assert_close, run_c

    result, compiled, built = squeezenet_c
    # 3,928,576 bytes of tensors at the peak and 448 of the C kernels' scratch there
    assert arena(compiled) == 3_929_024
    args = inputs_for(result.module, seed=2)
    want = interpret(result.module, result.weights, args)
    assert_close(run_c(built, args, tag="compute_in_place"), want, "squeezenet")


def test_the_report_counts_the_values_written_into_another_s_bytes(tmp_path: Path) -> None:
    (rep,) = memory_report(planned(CHAIN))
    assert rep.written_into_views == 2  # batch norm over conv's output, relu over that
    (rep,) = memory_report(planned(CHAIN, sharing=False))
    assert rep.written_into_views == 0
    src = tmp_path / "chain.rx"
    src.write_text(CHAIN)
    r = CliRunner().invoke(cli, ["report", str(src)])
    assert r.exit_code == 0 and "2 values written into another's bytes" in r.output

"""LegalizePackedCalls: Before/Expected pairs (TVM's test_aot_packed_call and the class-22 rules),
its refusal before PlanMemory, names, and the samples (round trip, memory plan unchanged)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.ir.nodes import Bind, Call, Effect, Module
from relaxc.ir.verifier import verify_module
from relaxc.passes.base import PassError
from relaxc.passes.legalize_packed_calls import LegalizePackedCalls
from relaxc.passes.manifest_alloc import ManifestAlloc
from relaxc.cli.report.analysis import memory_report
from relaxc.passes.pipeline import Pipeline, VerifyInstrument, check_order
from relaxc.passes.plan_memory import PlanMemory
from relaxc.passes.properties import PACKED_CALLS, detect_properties
from tests.strategies import programs

from .util import assert_pass

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "samples").glob("*.rx"))


def struct(name: str, buf: str, ndim: int, shape: str, dtype: str = "f32") -> str:
    """The statements wrapping %buf into DLTensor struct %name (as the pass writes them)."""
    return f"""
  %{name} = tir.stack_alloca("array", 1)
  tir.struct_set(%{name}, 0, "data", %{buf})
  tir.struct_set(%{name}, 0, "device_type", 1)
  tir.struct_set(%{name}, 0, "device_id", 0)
  tir.struct_set(%{name}, 0, "ndim", {ndim})
  tir.struct_set(%{name}, 0, "dtype", {dtype})
  tir.struct_set(%{name}, 0, "shape", {shape})"""


PLANNED = """
fn @fused(%a: Tensor[(4,), f32], %b: Tensor[(4,), f32]) -> Tensor[(4,), f32]
    attrs {primitive = true} {
  %s = add(%a, %b)
  %r = relu(%s)
  return %r
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {planned = true} {
  %arena = memory.alloc_storage(64, align=64, scope="global", arena=true)
  %t = memory.alloc_tensor(%arena, 0, (4,), f32)
  invoke exp(%x) outs (%t)
  %out_storage = memory.alloc_storage(64, align=64, scope="global", external=true)
  %out = memory.alloc_tensor(%out_storage, 0, (4,), f32)
  invoke @fused(%x, %t) outs (%out)
  memory.kill_tensor(%t)
  memory.kill_storage(%arena)
  return %out
}"""


def test_buffers_are_wrapped_and_parameters_pass_through() -> None:
    # TVM test_aot_packed_call (tvm#8096): each non-parameter buffer gets a stack_alloca and
    # struct_sets, and the call takes the structs; the runner's parameter %x stays raw.
    assert_pass(
        LegalizePackedCalls(),
        PLANNED,
        """
fn @exp(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {primitive = true} {
  %out = exp(%x)
  return %out
}

fn @fused(%a: Tensor[(4,), f32], %b: Tensor[(4,), f32]) -> Tensor[(4,), f32]
    attrs {primitive = true} {
  %s = add(%a, %b)
  %r = relu(%s)
  return %r
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {planned = true} {
  %arena = memory.alloc_storage(64, align=64, scope="global", arena=true)
  %t = memory.alloc_tensor(%arena, 0, (4,), f32)"""
        + struct("t_arg", "t", 1, "(4,)")
        + """
  call_cpacked("exp", %x, %t_arg)
  %out_storage = memory.alloc_storage(64, align=64, scope="global", external=true)
  %out = memory.alloc_tensor(%out_storage, 0, (4,), f32)"""
        + struct("t_arg_1", "t", 1, "(4,)")
        + struct("out_arg", "out", 1, "(4,)")
        + """
  call_cpacked("fused", %x, %t_arg_1, %out_arg)
  memory.kill_tensor(%t)
  memory.kill_storage(%arena)
  return %out
}""",
    )


def test_one_struct_per_buffer_even_when_passed_twice() -> None:
    after = assert_pass(
        LegalizePackedCalls(),
        """
fn @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] attrs {planned = true} {
  %arena = memory.alloc_storage(64, align=64, scope="global", arena=true)
  %t = memory.alloc_tensor(%arena, 0, (2, 3), f32)
  invoke exp(%x) outs (%t)
  %o_storage = memory.alloc_storage(64, align=64, scope="global", external=true)
  %o = memory.alloc_tensor(%o_storage, 0, (2, 3), f32)
  invoke add(%t, %t) outs (%o)
  return %o
}""",
        """
fn @exp(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] attrs {primitive = true} {
  %out = exp(%x)
  return %out
}

fn @add(%lhs: Tensor[(2, 3), f32], %rhs: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32]
    attrs {primitive = true} {
  %out = add(%lhs, %rhs)
  return %out
}

fn @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] attrs {planned = true} {
  %arena = memory.alloc_storage(64, align=64, scope="global", arena=true)
  %t = memory.alloc_tensor(%arena, 0, (2, 3), f32)"""
        + struct("t_arg", "t", 2, "(2, 3)")
        + """
  call_cpacked("exp", %x, %t_arg)
  %o_storage = memory.alloc_storage(64, align=64, scope="global", external=true)
  %o = memory.alloc_tensor(%o_storage, 0, (2, 3), f32)"""
        + struct("t_arg_1", "t", 2, "(2, 3)")
        + struct("o_arg", "o", 2, "(2, 3)")
        + """
  call_cpacked("add", %t_arg_1, %t_arg_1, %o_arg)
  return %o
}""",
    )
    allocas = [
        s
        for s in after.get("main").body
        if isinstance(s.value, Call) and s.value.op == "tir.stack_alloca"
    ]
    assert len(allocas) == 3


def test_new_names_never_collide() -> None:
    # A value already named %t_arg and a function already named @exp: the pass picks fresh names.
    after = LegalizePackedCalls()(
        parse_module(
            """
fn @exp(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {primitive = true} {
  %q = tanh(%p)
  return %q
}

fn @main(%x: Tensor[(4,), f32], %t_arg: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {planned = true} {
  %arena = memory.alloc_storage(64, align=64, scope="global", arena=true)
  %t = memory.alloc_tensor(%arena, 0, (4,), f32)
  invoke exp(%x) outs (%t)
  %u = memory.alloc_tensor(%arena, 16, (4,), f32)
  invoke @exp(%t) outs (%u)
  %o_storage = memory.alloc_storage(64, align=64, scope="global", external=true)
  %o = memory.alloc_tensor(%o_storage, 0, (4,), f32)
  invoke add(%u, %t_arg) outs (%o)
  return %o
}""",  # noqa: E501
            "t.rx",
        )
    )
    verify_module(after)
    names = [f.name for f in after.functions]
    assert len(names) == len(set(names)) and "exp_1" in names and "exp" in names
    main = after.get("main")
    bound = [s.name for s in main.body if isinstance(s, Bind)] + [p.name for p in main.params]
    assert len(bound) == len(set(bound))
    calls = [
        s.value for s in main.body if isinstance(s.value, Call) and s.value.op == "call_cpacked"
    ]
    assert [c.args[0] for c in calls] == [
        "exp_1",
        "exp",
        "add",
    ]  # the op got @exp_1; @exp is the user's
    # %t_arg is a parameter: it passes through, and no struct took its name.
    assert calls[2].args[2].name == "t_arg"
    assert {"t_arg_1", "t_arg_2", "u_arg", "u_arg_1", "o_arg"} <= set(bound)


def test_symbolic_dims_are_passed_after_the_buffers() -> None:
    after = LegalizePackedCalls()(
        parse_module(
            """
fn @scale(%s: Tensor[(h, q), f32]) -> Tensor[(h, q), f32] attrs {primitive = true} {
  %r = relu(%s)
  return %r
}

fn @main(%x: Tensor[(n, 10), f32]) -> Tensor[(n * 10,), f32] attrs {upper_bounds = {n = 8}, planned = true} {
  %arena = memory.alloc_storage(320, align=64, scope="global", arena=true)
  %t = memory.alloc_tensor(%arena, 0, (n, 10), f32)
  invoke @scale(%x) outs (%t)
  %f = reshape(%t, (n * 10,))
  %o_storage = memory.alloc_storage(40 * n, align=64, scope="global", external=true)
  %o = memory.alloc_tensor(%o_storage, 0, (n * 10,), f32)
  invoke exp(%f) outs (%o)
  return %o
}""",  # noqa: E501
            "t.rx",
        )
    )
    verify_module(after)
    text = print_module(after)
    assert 'call_cpacked("scale", %x, %t_arg, n, 10)' in text
    # The compound dim n * 10 becomes a dim of the kernel function's own.
    assert "fn @exp(%x: Tensor[(d0,), f32]) -> Tensor[(d0,), f32]" in text
    assert 'call_cpacked("exp", %f_arg, %o_arg, 10 * n)' in text
    assert 'tir.struct_set(%o_arg, 0, "shape", (n * 10,))' in text


def test_identical_kernel_instances_share_one_function() -> None:
    after = Pipeline(
        [ManifestAlloc(), PlanMemory(), LegalizePackedCalls()], [VerifyInstrument()]
    ).run(parse_module(SAMPLES_BY_NAME["cnn"].read_text(), "cnn.rx"))
    names = [f.name for f in after.functions if f.is_primitive]
    # relu runs five times in the CNN on four distinct types: four kernel functions.
    assert sorted(n for n in names if n.startswith("relu")) == [
        "relu",
        "relu_1",
        "relu_2",
        "relu_3",
    ]
    calls = [
        s.value.args[0]
        for s in after.get("main").body
        if isinstance(s.value, Call) and s.value.op == "call_cpacked"
    ]
    assert len(calls) == 16 and set(calls) == set(names)


def test_multi_output_kernels_get_one_struct_per_output() -> None:
    after = Pipeline(
        [ManifestAlloc(), PlanMemory(), LegalizePackedCalls()], [VerifyInstrument()]
    ).run(
        parse_module(
            """
fn @main(%x: Tensor[(2, 4), f32]) -> Tensor[(2, 2), f32] {
  %s = split(%x, 2, axis=1)
  %a = %s.0
  %b = %s.1
  %c = add(%a, %b)
  return %c
}""",
            "t.rx",
        )
    )
    text = print_module(after)
    assert (
        "fn @split(%x: Tensor[(2, 4), f32]) -> Tuple[Tensor[(2, 2), f32], Tensor[(2, 2), f32]]"
        in text
    )
    assert 'call_cpacked("split", %x, %s_0_arg, %s_1_arg)' in text


def test_symbolic_attributes_without_a_tensor_are_refused() -> None:
    with pytest.raises(PassError, match="zeros has symbolic dims in its attributes .n.*--unpacked"):
        Pipeline([ManifestAlloc(), PlanMemory(), LegalizePackedCalls()]).run(
            parse_module(
                """
fn @main(%x: Tensor[(n,), f32]) -> Tensor[(n,), f32] attrs {upper_bounds = {n = 4}} {
  %z = zeros(shape=(n,))
  %y = add(%x, %z)
  return %y
}""",
                "t.rx",
            )
        )


# ---------------------------------------------------------------------------------------
# Preconditions: plan first, legalize after (class 21 of the design notes' memory bug classes).


def manifested() -> Module:
    return ManifestAlloc()(parse_module(SAMPLES_BY_NAME["mlp"].read_text(), "mlp.rx"))


def test_refused_before_plan_memory() -> None:
    with pytest.raises(PassError) as info:
        LegalizePackedCalls()(manifested())
    assert info.value.message.startswith("LegalizePackedCalls needs planned memory")
    assert "run PlanMemory before it" in info.value.message


def test_refused_on_raw_programs() -> None:
    with pytest.raises(
        PassError,
        match="LegalizePackedCalls needs explicit memory.*run ManifestAlloc and PlanMemory",
    ):
        LegalizePackedCalls()(parse_module(SAMPLES_BY_NAME["mlp"].read_text(), "mlp.rx"))


def test_pipeline_refuses_legalize_before_plan_memory() -> None:
    passes = [ManifestAlloc(), LegalizePackedCalls(), PlanMemory()]
    with pytest.raises(PassError) as info:
        check_order(
            passes, detect_properties(parse_module(SAMPLES_BY_NAME["mlp"].read_text(), "mlp.rx"))
        )
    assert "LegalizePackedCalls needs planned memory" in info.value.message
    assert info.value.notes == (
        "in pass 2 of the pipeline (ManifestAlloc -> LegalizePackedCalls -> PlanMemory)",
    )


def test_plan_memory_refuses_legalized_ir() -> None:
    legalized = LegalizePackedCalls()(PlanMemory()(manifested()))
    assert PACKED_CALLS in detect_properties(legalized)
    with pytest.raises(
        PassError, match="PlanMemory cannot run on IR with packed calls.*plan memory before"
    ):
        PlanMemory()(legalized)


# ---------------------------------------------------------------------------------------
# Samples and generated programs.

SAMPLES_BY_NAME = {p.stem: p for p in SAMPLES}


def c_pipeline(m: Module) -> tuple[Module, Module]:
    planned = Pipeline([ManifestAlloc(), PlanMemory()], [VerifyInstrument()]).run(m)
    return planned, Pipeline([LegalizePackedCalls()], [VerifyInstrument()]).run(planned)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_samples_round_trip_and_keep_their_plan(path: Path) -> None:
    planned, legalized = c_pipeline(parse_module(path.read_text(), path.name))
    text = print_module(legalized)
    again = parse_module(text, "again.rx")
    assert again == legalized and print_module(again) == text
    verify_module(again)
    assert LegalizePackedCalls()(legalized) == legalized  # a second run changes nothing
    # The memory plan and the report read off the final IR are exactly those of the planned IR.
    for a, b in zip(memory_report(planned), memory_report(legalized)):
        assert (a.arena_bytes, a.lower_bound, a.naive_bytes) == (
            b.arena_bytes,
            b.lower_bound,
            b.naive_bytes,
        )
        assert [(r.name, r.offset, r.bytes) for r in a.buffers] == [
            (r.name, r.offset, r.bytes) for r in b.buffers
        ]
    # No invoke is left, every struct is filled completely, and parameters are never wrapped.
    main = legalized.get("main")
    params = {p.name for p in main.params}
    fields: dict[str, set[str]] = {}
    for s in main.body:
        v = s.value
        assert not (isinstance(s, Effect) and type(v).__name__ == "Invoke")
        if isinstance(v, Call) and v.op == "tir.struct_set":
            fields.setdefault(v.args[0].name, set()).add(v.args[2])
            if v.args[2] == "data":
                assert v.args[3].name not in params
    assert fields and all(
        f == {"data", "device_type", "device_id", "ndim", "dtype", "shape"} for f in fields.values()
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_verify_and_round_trip(prog) -> None:
    _, legalized = c_pipeline(parse_module(prog.text, "gen.rx"))
    assert parse_module(print_module(legalized), "again.rx") == legalized

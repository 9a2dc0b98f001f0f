"""Lowered primitives (``relaxc.ir.lowered``): which values of a primitive function the IR
gives a place, and the C target's requirement built on it.

An unlowered primitive function may compute only its results; every other value it computes
is an intermediate only PlanWorkspace places. Checked against an independent oracle on
random chains of elementwise ops (no views or aliases, so a value is a result exactly when it
is returned), before and after PlanWorkspace, and through the C target."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.backend.c import emit_c
from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError
from relaxc.ir.lowered import result_places
from relaxc.ir.verifier import verify_module
from relaxc.ir.vocab import lowered_outputs
from relaxc.passes.manifest_alloc import ManifestAlloc
from relaxc.passes.plan_memory import PlanMemory
from relaxc.passes.plan_workspace import PlanWorkspace

UNARY = ("exp", "negative", "abs", "relu")
BINARY = ("add", "subtract", "multiply")
T = "Tensor[(4,), f32]"


@st.composite
def chains(draw) -> tuple[str, set[str]]:
    """A primitive function @f of 1 to 6 elementwise ops returning one or two of its values
    (or a parameter), called from @main; and the names of the values it computes that it
    does not return."""
    names = ["x", "y"]
    lines = []
    for i in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            op, args = draw(st.sampled_from(UNARY)), [draw(st.sampled_from(names))]
        else:
            op = draw(st.sampled_from(BINARY))
            args = [draw(st.sampled_from(names)), draw(st.sampled_from(names))]
        lines.append(f"  %v{i} = {op}({', '.join('%' + a for a in args)})")
        names.append(f"v{i}")
    rets = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2))
    if len(rets) == 1:
        ret_type, ret = T, f"%{rets[0]}"
    else:
        ret_type, ret = f"Tuple[{T}, {T}]", "(" + ", ".join(f"%{r}" for r in rets) + ")"
    text = (
        f"fn @f(%x: {T}, %y: {T}) -> {ret_type} attrs {{primitive = true}} {{\n"
        + "\n".join(lines)
        + f"\n  return {ret}\n}}\n\n"
        f"fn @main(%x: {T}, %y: {T}) -> {ret_type} {{\n"
        "  %r = call @f(%x, %y)\n  return %r\n}\n"
    )
    return text, set(names[2:]) - set(rets)


def _unplaced(module) -> str | None:
    fn = module.get("f")
    if lowered_outputs(fn) is not None:
        return None
    stmt = result_places(fn, module, verify_module(module)["f"]).unplaced
    return None if stmt is None else stmt.name


@settings(max_examples=60, deadline=None)
@given(chains())
def test_an_unlowered_function_places_exactly_its_results(chain):
    text, intermediates = chain
    module = ManifestAlloc().run(parse_module(text, "chain.rx"))
    unplaced = _unplaced(module)
    if intermediates:
        first = min(intermediates, key=lambda n: int(n[1:]))  # the first computed
        assert unplaced == first
    else:
        assert unplaced is None
    # After PlanWorkspace every value has its place: the function is lowered, or computes
    # nothing but its results.
    assert _unplaced(PlanWorkspace().run(module)) is None
    assert (lowered_outputs(PlanWorkspace().run(module).get("f")) is not None) == bool(
        intermediates
    )


@settings(max_examples=30, deadline=None)
@given(chains())
def test_the_c_target_prints_what_the_ir_places_and_refuses_the_rest(chain):
    text, intermediates = chain
    explicit = ManifestAlloc().run(parse_module(text, "chain.rx"))
    with_pass = emit_c(PlanMemory().run(PlanWorkspace().run(explicit)), {}, prefix="m")
    if intermediates:
        with pytest.raises(RxError, match="@f computes %v.*run PlanWorkspace"):
            emit_c(PlanMemory().run(explicit), {}, prefix="m")
    else:  # nothing to lower: the same C with or without the pass
        without = emit_c(PlanMemory().run(explicit), {}, prefix="m")
        assert without.files == with_pass.files


def test_a_multi_output_kernel_whose_tuple_is_the_result_writes_every_output():
    half = "Tensor[(2,), f32]"
    text = f"""
fn @f(%x: {T}) -> Tuple[{half}, {half}] attrs {{primitive = true}} {{
  %t = split(%x, indices_or_sections=2, axis=0)
  return %t
}}
"""
    module = parse_module(text, "split.rx")
    places = result_places(module.get("f"), module, verify_module(module)["f"])
    assert places.whole == "t" and places.unplaced is None and not places.outputs


def test_a_tuple_returned_field_by_field_is_an_intermediate():
    # %t is no output's buffer (each output is one field of it): PlanWorkspace gives it a
    # place; without the pass the C target refuses it, at %t.
    half = "Tensor[(2,), f32]"
    text = f"""
fn @f(%x: {T}) -> Tuple[{half}, {half}] attrs {{primitive = true}} {{
  %t = split(%x, indices_or_sections=2, axis=0)
  %a = %t.0
  %b = %t.1
  return (%a, %b)
}}

fn @main(%x: {T}) -> Tuple[{half}, {half}] {{
  %r = call @f(%x)
  return %r
}}
"""
    explicit = ManifestAlloc().run(parse_module(text, "fields.rx"))
    assert _unplaced(explicit) == "t"
    assert _unplaced(PlanWorkspace().run(explicit)) is None
    with pytest.raises(RxError, match="@f computes %t.*run PlanWorkspace") as e:
        emit_c(PlanMemory().run(explicit), {}, prefix="m")
    assert e.value.loc is not None and e.value.loc.line == 3
    emit_c(PlanMemory().run(PlanWorkspace().run(explicit)), {}, prefix="m")

"""``Function.with_attrs``: setting attributes on an immutable function, locations kept in step."""

from __future__ import annotations

from relaxc.frontend.parser import parse_module
from relaxc.ir.nodes import Function, Param, Var
from relaxc.ir.types import TensorType

SRC = """fn @f(%x: Tensor[(n,), f32]) -> Tensor[(n,), f32]
    attrs {upper_bounds = {n = 64}, planned = false} {
  return %x
}
"""


def _fn() -> Function:
    return parse_module(SRC, "f.rx").functions[0]


def test_new_attributes_come_last_and_earlier_ones_keep_their_locations() -> None:
    fn = _fn()
    assert len(fn.attr_locs) == len(fn.attrs) == 2
    bounds_loc = fn.attr_loc("upper_bounds")
    got = fn.with_attrs({"scratch": 8})
    assert [k for k, _ in got.attrs] == ["upper_bounds", "planned", "scratch"]
    assert got.attr("scratch") == 8 and got.attr_loc("upper_bounds") == bounds_loc
    assert got.attr_loc("scratch") == fn.loc  # a new attribute has no location of its own
    assert fn.attr("scratch") is None  # the original is unchanged


def test_setting_an_existing_attribute_replaces_it_at_the_end() -> None:
    fn = _fn()
    got = fn.with_attrs({"planned": True})
    assert got.attrs[-1] == ("planned", True) and len(got.attrs) == 2
    assert len(got.attr_locs) == 2
    assert got.attr_loc("upper_bounds") == fn.attr_loc("upper_bounds")
    assert got.attr_loc("upper_bounds") != fn.loc


def test_a_function_built_without_locations_gets_none() -> None:
    t = TensorType((2,), "f32")
    fn = Function("g", (Param("x", t),), t, (("a", 1),), (), Var("x"))
    got = fn.with_attrs({"b": 2, "a": 3})
    assert got.attrs == (("b", 2), ("a", 3)) and got.attr_locs == ()

"""``Module``: its lookup by name (an index made when the module is made) and its copies."""

from __future__ import annotations

import copy
import dataclasses
import pickle

from relaxc.frontend.parser import parse_module
from relaxc.ir.nodes import Module

TWO = """fn @a(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  return %x
}
fn @b(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  %y = call @a(%x)
  return %y
}
"""


def test_get_finds_every_function_and_nothing_else() -> None:
    m = parse_module(TWO, "two.rx")
    assert [m.get(f.name) for f in m.functions] == list(m.functions)
    assert m.get("c") is None
    assert list(m.by_name) == ["a", "b"]


def test_a_repeated_name_finds_the_first_as_a_scan_did() -> None:
    # the verifier refuses such a module; until it has, get() answers as before
    m = parse_module(TWO, "two.rx")
    twice = Module(m.functions + (dataclasses.replace(m.functions[0], attrs=m.functions[1].attrs),))
    assert twice.get("a") is m.functions[0]


def test_the_index_follows_replace_and_survives_pickle_and_copy() -> None:
    m = parse_module(TWO, "two.rx")
    only_b = dataclasses.replace(m, functions=m.functions[1:])
    assert only_b.get("a") is None and only_b.get("b") is m.functions[1]
    for other in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m), copy.copy(m)):
        assert other == m and hash(other) == hash(m)
        assert other.get("b") == m.functions[1] and list(other.by_name) == ["a", "b"]


def test_by_name_is_read_only() -> None:
    m = parse_module(TWO, "two.rx")
    try:
        m.by_name["c"] = m.functions[0]  # type: ignore[index]
    except TypeError:
        pass
    else:
        raise AssertionError("by_name accepted a write")
    assert m.get("c") is None

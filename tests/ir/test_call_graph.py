"""ir/call_graph.py: every callee before its callers, each function once, on chains far
deeper than Python's recursion limit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from relaxc.frontend.parser import parse_module
from relaxc.ir.call_graph import called, callees_first

_T = "Tensor[(4,), f32]"


def _module(calls: dict[int, list[int]]):
    """Functions @f0..@fN; @fi calls every @fj in calls[i] (j > i: acyclic), then relu."""
    text = []
    for i in sorted(calls):
        body = [f"  %y{j} = call @f{j}(%x)" for j in calls[i]]
        body.append("  %r = relu(%x)")
        text.append(f"fn @f{i}(%x: {_T}) -> {_T} {{\n" + "\n".join(body) + "\n  return %r\n}")
    return parse_module("\n".join(text) + "\n")


@given(
    st.integers(1, 12).flatmap(
        lambda n: st.fixed_dictionaries(
            {
                i: st.lists(st.integers(i + 1, n), unique=True, max_size=3)
                if i < n
                else st.just([])
                for i in range(n + 1)
            }
        )
    )
)
def test_every_callee_comes_before_its_callers_once(calls):
    module = _module(calls)
    order = [f.name for f in callees_first(module)]
    assert sorted(order) == sorted(f.name for f in module.functions)
    position = {name: i for i, name in enumerate(order)}
    for fn in module.functions:
        for callee in called(fn):
            assert position[callee] < position[fn.name]


def test_roots_and_done_limit_the_walk():
    module = _module({0: [1], 1: [2], 2: [], 3: [2]})
    f0 = module.get("f0")
    assert [f.name for f in callees_first(module, [f0])] == ["f2", "f1", "f0"]
    assert [f.name for f in callees_first(module, [f0], done={"f1"})] == ["f0"]


def test_a_chain_deeper_than_the_recursion_limit():
    n = 3000
    module = _module({i: [i + 1] if i < n else [] for i in range(n + 1)})
    order = [f.name for f in callees_first(module)]
    assert order == [f"f{i}" for i in range(n, -1, -1)]

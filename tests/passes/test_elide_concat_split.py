"""ElideConcatSplit: concat producers write into their slices of the result, split outputs
are views of the input, neither copies; kept where a slice is not contiguous or an input
cannot move; results unchanged on the interpreter and the VM (poisoned)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.ir.nodes import Effect, Invoke, Module
from relaxc.ir.verifier import verify_module
from relaxc.passes.elide_concat_split import ElideConcatSplit

from .test_compute_in_place import arena, explicit, planned, same_results_on_the_vm, views


def elided(text: str, **options) -> Module:
    out = ElideConcatSplit(**options)(explicit(text))
    verify_module(out)
    return out


def invoked(m: Module, fn: str = "main") -> list[str]:
    return [
        s.value.target
        for s in m.get(fn).body
        if isinstance(s, Effect) and isinstance(s.value, Invoke)
    ]


BRANCHES = """
fn @main(%x: Tensor[(1, 4, 8, 8), f32]) -> Tensor[(1, 8, 8, 8), f32] {
  %a = exp(%x)
  %b = relu(%x)
  %c = concat(%a, %b, axis=1)
  %d = negative(%c)
  return %d
}
"""


def test_producers_write_into_their_slices() -> None:
    m = elided(BRANCHES)
    assert views(m) == {"a": "c", "b": "c"}
    assert "concat" not in invoked(m)
    text = print_module(m)
    assert "%a = memory.view(%c, 0, (1, 4, 8, 8), f32)" in text
    assert "%b = memory.view(%c, 1024, (1, 4, 8, 8), f32)" in text
    same_results_on_the_vm(BRANCHES)


def test_the_joined_buffer_is_all_the_arena_holds() -> None:
    # Copying: a, b and c live at once at the concat (4 KiB); joined: c's 2 KiB, and negative
    # writes in place into the output, so c moves there too.
    assert arena(planned(BRANCHES, sharing=False)) == 4096
    assert arena(planned(BRANCHES)) == 0


def test_inner_axis_with_a_batch_above_one_keeps_the_copy() -> None:
    text = BRANCHES.replace("(1, 4, 8, 8)", "(2, 4, 8, 8)").replace("(1, 8, 8, 8)", "(2, 8, 8, 8)")
    m = elided(text)
    assert "concat" in invoked(m) and views(m) == {}
    same_results_on_the_vm(text)


def test_outer_axis_is_contiguous_whatever_the_batch() -> None:
    text = """
fn @main(%x: Tensor[(3, 5), f32]) -> Tensor[(6, 5), f32] {
  %a = exp(%x)
  %b = relu(%x)
  %c = concat(%a, %b, axis=0)
  %d = negative(%c)
  return %d
}
"""
    m = elided(text)
    assert views(m) == {"a": "c", "b": "c"}
    same_results_on_the_vm(text)


def test_a_parameter_input_keeps_the_copy() -> None:
    text = """
fn @main(%x: Tensor[(1, 4), f32]) -> Tensor[(1, 8), f32] {
  %a = exp(%x)
  %c = concat(%a, %x, axis=1)
  %d = negative(%c)
  return %d
}
"""
    m = elided(text)
    assert "concat" in invoked(m)
    same_results_on_the_vm(text)


def test_one_value_twice_keeps_the_copy() -> None:
    text = """
fn @main(%x: Tensor[(1, 4), f32]) -> Tensor[(1, 8), f32] {
  %a = exp(%x)
  %c = concat(%a, %a, axis=1)
  %d = negative(%c)
  return %d
}
"""
    assert "concat" in invoked(elided(text))
    same_results_on_the_vm(text)


def test_an_input_used_after_the_concat_stays_a_valid_slice() -> None:
    text = """
fn @main(%x: Tensor[(1, 4), f32]) -> Tuple[Tensor[(1, 8), f32], Tensor[(1, 4), f32]] {
  %a = exp(%x)
  %b = relu(%x)
  %c = concat(%a, %b, axis=1)
  %d = negative(%c)
  %e = sigmoid(%a)
  return (%d, %e)
}
"""
    m = elided(text)
    assert views(m) == {"a": "c", "b": "c"}
    same_results_on_the_vm(text)


def test_nested_concats_join_into_one_buffer() -> None:
    text = """
fn @main(%x: Tensor[(1, 2, 4), f32]) -> Tensor[(1, 6, 4), f32] {
  %a = exp(%x)
  %b = relu(%x)
  %ab = concat(%a, %b, axis=1)
  %c = negative(%x)
  %abc = concat(%ab, %c, axis=1)
  %d = sigmoid(%abc)
  return %d
}
"""
    m = elided(text)
    assert views(m) == {"a": "ab", "b": "ab", "ab": "abc", "c": "abc"}
    same_results_on_the_vm(text)


SPLIT = """
fn @main(%x: Tensor[(1, 8, 4, 4), f32]) -> Tensor[(1, 4, 4, 4), f32] {
  %e = exp(%x)
  %s = split(%e, indices_or_sections=2, axis=1)
  %a = %s.0
  %b = %s.1
  %c = add(%a, %b)
  return %c
}
"""


def test_split_outputs_are_views_of_the_input() -> None:
    m = elided(SPLIT)
    assert views(m) == {"s_0": "e", "s_1": "e"}
    assert "split" not in invoked(m)
    same_results_on_the_vm(SPLIT)


SPLIT_SPELLINGS = (
    "split(%e, indices_or_sections=2, axis=1)",
    "split(%e, 2, axis=1)",  # positional attributes, allowed by docs/ir.md
    "split(%e, 2, 1)",
    "split(%e, axis=1, indices_or_sections=2)",
)


def test_positional_and_keyword_split_are_elided_alike() -> None:
    """``split(%c, 2, axis=1)`` was never elided (its literal 2 was taken for a second
    input) while ``indices_or_sections=2`` was: every spelling now gives the same module
    and the same plan."""
    texts = [SPLIT.replace("split(%e, indices_or_sections=2, axis=1)", s) for s in SPLIT_SPELLINGS]
    modules = [elided(t) for t in texts]
    assert all(views(m) == {"s_0": "e", "s_1": "e"} for m in modules)
    assert len({print_module(m) for m in modules}) == 1
    plans = [planned(t) for t in texts]
    assert len({print_module(m) for m in plans}) == 1
    assert len({arena(m) for m in plans}) == 1
    same_results_on_the_vm(texts[1])


def test_positional_and_keyword_concat_axis_are_elided_alike() -> None:
    texts = [BRANCHES, BRANCHES.replace("concat(%a, %b, axis=1)", "concat(%a, %b, 1)")]
    modules = [elided(t) for t in texts]
    assert all(views(m) == {"a": "c", "b": "c"} for m in modules)
    assert len({print_module(m) for m in modules}) == 1
    assert len({print_module(planned(t)) for t in texts}) == 1
    # the axis given positionally is read, not its default 0: on axis 2 the copy stays
    inner = BRANCHES.replace("concat(%a, %b, axis=1)", "concat(%a, %b, 2)")
    inner = inner.replace("(1, 8, 8, 8)", "(1, 4, 16, 8)")
    assert "concat" in invoked(elided(inner))


def test_split_of_a_parameter_is_only_read() -> None:
    text = SPLIT.replace("%e = exp(%x)\n  ", "").replace("split(%e", "split(%x")
    m = elided(text)
    assert views(m) == {"s_0": "x", "s_1": "x"}
    same_results_on_the_vm(text)


def test_split_on_an_inner_axis_keeps_the_copy() -> None:
    text = SPLIT.replace("axis=1", "axis=2").replace("(1, 4, 4, 4)", "(1, 8, 2, 4)")
    m = elided(text)
    assert "split" in invoked(m)
    same_results_on_the_vm(text)


def test_options_turn_each_part_off() -> None:
    assert "concat" in invoked(elided(BRANCHES, concat=False))
    assert "split" in invoked(elided(SPLIT, split=False))


def test_running_twice_changes_nothing() -> None:
    once = elided(BRANCHES)
    assert print_module(ElideConcatSplit()(once)) == print_module(once)


def test_dump_parses_again() -> None:
    m = elided(BRANCHES)
    again = parse_module(print_module(m), "dump.rx")
    verify_module(again)
    assert print_module(again) == print_module(m)


@st.composite
def concat_programs(draw) -> str:
    """Branches of elementwise ops joined by concats (axis 1, batch 1), some nested, some
    inputs used again after the concat, then split."""
    k = draw(st.integers(2, 4))
    lines, names = [], []
    for i in range(k):
        lines.append(f"  %b{i} = {draw(st.sampled_from(['exp', 'relu', 'negative']))}(%x)")
        names.append(f"b{i}")
    cut = draw(st.integers(1, k - 1))
    lines.append(f"  %j0 = concat({', '.join('%' + n for n in names[:cut])}, axis=1)")
    lines.append(f"  %j = concat(%j0, {', '.join('%' + n for n in names[cut:])}, axis=1)")
    lines.append(f"  %r = {draw(st.sampled_from(['sigmoid', 'tanh']))}(%j)")
    reuse = draw(st.sampled_from(names))
    lines.append(f"  %u = exp(%{reuse})")
    lines.append(f"  %s = split(%r, indices_or_sections={k}, axis=1)")
    lines.append("  %s0 = %s.0")
    lines.append("  %out = add(%s0, %u)")
    return (
        "fn @main(%x: Tensor[(1, 2, 3), f32]) -> Tensor[(1, 2, 3), f32] {\n"
        + "\n".join(lines)
        + "\n  return %out\n}\n"
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(concat_programs(), st.integers(0, 2))
def test_property_elision_keeps_results_and_never_grows_the_arena(text: str, seed: int) -> None:
    compiled = same_results_on_the_vm(text, seed=seed)
    assert arena(compiled) <= arena(planned(text, sharing=False))

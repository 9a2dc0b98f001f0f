"""The search's second view of an instance: runs of births and of deaths merged."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.passes.planning.greedy import prepare
from relaxc.passes.planning.model import Buffer
from relaxc.passes.planning.search import merged_runs, minimize


def intervals() -> st.SearchStrategy[list[Buffer]]:
    one = st.builds(
        lambda start, length, size, align: Buffer(start, start + length, size * align, align),
        st.integers(0, 30),
        st.integers(1, 12),
        st.integers(1, 9),
        st.sampled_from([1, 4, 64]),
    )
    return st.lists(one, min_size=1, max_size=40)


def conflicts(start: list[int], end: list[int]) -> set[tuple[int, int]]:
    n = len(start)
    return {
        (i, j) for i in range(n) for j in range(i + 1, n) if start[i] < end[j] and start[j] < end[i]
    }


@settings(max_examples=150, deadline=None)
@given(intervals())
def test_merging_runs_keeps_every_conflict_and_no_more(buffers: list[Buffer]) -> None:
    inst = prepare(buffers)
    merged = merged_runs(inst)
    assert conflicts(merged.start, merged.end) == conflicts(inst.start, inst.end)
    assert all(s < e for s, e in zip(merged.start, merged.end))
    assert (merged.size, merged.align, merged.index) == (inst.size, inst.align, inst.index)
    # Merging is a normal form: merging again changes nothing.
    again = merged_runs(merged)
    assert (again.start, again.end) == (merged.start, merged.end)


def test_buffers_born_at_successive_points_and_dying_together_become_twins() -> None:
    # A program's view: three buffers made by three statements, freed after one use.
    buffers = [Buffer(0, 5, 64), Buffer(1, 5, 64), Buffer(2, 5, 64), Buffer(5, 7, 64)]
    merged = merged_runs(prepare(buffers))
    assert merged.start[:3] == [merged.start[0]] * 3
    assert merged.end[:3] == [merged.end[0]] * 3
    assert merged.start[3] >= merged.end[0]  # born as they die: no conflict


@settings(max_examples=60, deadline=None)
@given(intervals())
def test_the_search_with_both_views_finds_valid_plans_and_true_bounds(
    buffers: list[Buffer],
) -> None:
    # Interleave births and deaths program-style so the views differ, then search.
    inst = prepare(
        [Buffer(2 * b.start + k % 2, 2 * b.end, b.size, b.align) for k, b in enumerate(buffers)]
    )
    if not inst.n:
        return
    total = sum(inst.size) + sum(inst.align)
    out = minimize(inst, 0, total, 20_000)
    if out.offsets is not None:
        for i in range(inst.n):
            assert out.offsets[i] % inst.align[i] == 0
            for j in inst.nbrs[i]:
                a, b = out.offsets[i], out.offsets[j]
                assert a + inst.size[i] <= b or b + inst.size[j] <= a
        assert out.bound <= inst.height(out.offsets)

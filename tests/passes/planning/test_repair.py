"""The local search of ``best``: decisions with fixed buffers, and windows re-searched.

A :class:`Decision` given fixed offsets must keep them and stay complete: a plan that
holds them at a capacity is always found (exhaustive search on small instances). ``repair``
lowers a plan window by window and never returns a worse or invalid one.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.greedy import Instance, greedy, prepare, scan
from relaxc.passes.planning.model import Buffer, lower_bound
from relaxc.passes.planning.planners import plan_best
from relaxc.passes.planning.search import Decision, Sections, repair


def buffer_lists(max_size: int) -> st.SearchStrategy[list[Buffer]]:
    one = st.builds(
        lambda start, length, size, align: Buffer(start, start + length, size * align, align),
        st.integers(0, 12),
        st.integers(1, 6),
        st.integers(1, 8),
        st.sampled_from([1, 2, 4]),
    )
    return st.lists(one, min_size=1, max_size=max_size)


def decide(
    inst: Instance, capacity: int, fixed: dict[int, int] | None = None, heuristic: str = "TWA"
) -> list[int] | None:
    """The search's answer at ``capacity`` (None: nothing fits), run to the end."""
    d = Decision(Sections(inst), capacity, heuristic, fixed=fixed)
    run = d.run()
    d.pause = 10**7
    try:
        next(run)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("no answer within the work given")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buffer_lists(9), st.randoms(use_true_random=False), st.sampled_from(["TWA", "TAW", "TCA"]))
def test_a_decision_with_fixed_buffers_is_complete_and_keeps_them(
    buffers: list[Buffer], rnd: random.Random, heuristic: str
) -> None:
    inst = prepare(buffers)
    offsets, _ = greedy(inst, "greedy-size", scan(inst))
    height = inst.height(offsets)
    # Fix a random subset where greedy put them: greedy's plan is then a witness.
    fixed = {i: offsets[i] for i in range(inst.n) if rnd.random() < 0.4}
    result = decide(inst, height, fixed, heuristic)
    assert result is not None
    assert all(result[i] == o for i, o in fixed.items())
    assert inst.height(result) <= height
    full = inst.expand(result, len(buffers))
    assert not check_plan(buffers, full, height)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buffer_lists(9), st.randoms(use_true_random=False))
def test_fixed_buffers_that_cannot_fit_make_it_infeasible(
    buffers: list[Buffer], rnd: random.Random
) -> None:
    inst = prepare(buffers)
    offsets, _ = greedy(inst, "greedy-size", scan(inst))
    height = inst.height(offsets)
    i = rnd.randrange(inst.n)
    # Above the capacity: no plan.
    assert decide(inst, height, {i: height - inst.size[i] + inst.align[i]}) is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buffer_lists(30))
def test_repair_never_returns_a_worse_or_invalid_plan(buffers: list[Buffer]) -> None:
    inst = prepare(buffers)
    offsets, _ = greedy(inst, "greedy-size", scan(inst))
    out = repair(inst, offsets, lower_bound(buffers), 20_000)
    again = repair(inst, offsets, lower_bound(buffers), 20_000)
    assert out == again  # deterministic
    if out.offsets is None:
        return
    assert out.height < inst.height(offsets)
    assert out.height >= lower_bound(buffers)
    full = inst.expand(out.offsets, len(buffers))
    assert not check_plan(buffers, full, out.height)


def test_repair_lowers_a_random_plan() -> None:
    rnd = random.Random(7)
    buffers = [
        Buffer(s, s + rnd.randrange(1, 25), 1024 * rnd.randrange(1, 40))
        for s in (rnd.randrange(150) for _ in range(150))
    ]
    inst = prepare(buffers)
    offsets, _ = greedy(inst, "greedy-size", scan(inst))
    out = repair(inst, offsets, lower_bound(buffers), 30_000)
    assert out.offsets is not None and out.height < inst.height(offsets)
    assert not check_plan(buffers, inst.expand(out.offsets, len(buffers)), out.height)
    p = plan_best(buffers, time_limit=0.3)
    assert not check_plan(buffers, p.offsets, p.size)
    assert p.size <= inst.height(offsets)

"""The greedy planners past the pair budget: the sweep, and first fit where it matters.

Past :data:`greedy.PAIR_BUDGET` conflict pairs, the sweep places everything (each
component from an empty arena), then first fit re-plans windows of time around the buffer
on top of the arena while their pairs fit (a window may grow to a whole component). Small
inputs with a patched budget exercise the same
code paths as a million buffers; the timings themselves belong in benchmarks/planners.py.
"""

from __future__ import annotations

import random
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.passes.planning import greedy as greedy_module
from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.greedy import (
    greedy,
    place,
    prepare,
    replan_windows,
    scan,
    size_order,
    subinstance,
    sweep_place,
)
from relaxc.passes.planning.model import Buffer, lower_bound
from relaxc.passes.planning.planners import (
    WORK_PER_SECOND,
    greedy_work,
    plan_best,
    plan_buffers,
)


def intervals(max_size: int = 60) -> st.SearchStrategy[list[Buffer]]:
    """Random interval sets with alignment, in a few separate runs of time."""
    one = st.builds(
        lambda run, start, length, size, align: Buffer(
            100 * run + start, 100 * run + start + length, size * align, align
        ),
        st.integers(0, 3),
        st.integers(0, 40),
        st.integers(1, 20),
        st.integers(1, 40),
        st.sampled_from([1, 4, 64]),
    )
    return st.lists(one, max_size=max_size)


def height(inst, offsets) -> int:  # noqa: ANN001
    return max((o + z for o, z in zip(offsets, inst.size)), default=0)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(intervals(), st.integers(0, 400))
def test_first_fit_where_it_matters_is_valid_and_never_worse_than_the_sweep(
    buffers: list[Buffer], pair_budget: int
) -> None:
    inst = prepare(buffers)
    sc = scan(inst)
    swept, used0 = greedy(inst, "greedy-size", sc, pair_budget=-1)
    mixed, used = greedy(inst, "greedy-size", sc, pair_budget=pair_budget)
    assert used0 == 0
    assert used <= max(pair_budget, sum(sc.pairs))
    for offsets in (swept, mixed):
        full = inst.expand(offsets, len(buffers))
        assert not check_plan(buffers, full, height(inst, offsets))
        assert all(o % b.align == 0 for o, b in zip(full, buffers))
    if sum(sc.pairs) > pair_budget:
        # Past the budget, first fit only replaces a component's sweep when it is lower
        # (within it, first fit everywhere is the classic plan, and alignment can make it
        # higher than the sweep's).
        assert height(inst, mixed) <= height(inst, swept)
    assert height(inst, mixed) >= sc.max_live


@settings(max_examples=60, deadline=None)
@given(intervals())
def test_each_component_of_the_sweep_starts_from_an_empty_arena(buffers: list[Buffer]) -> None:
    # Sweeping a component alone or after others gives it the same offsets.
    inst = prepare(buffers)
    sc = scan(inst)
    together, _ = greedy(inst, "greedy-size", sc, pair_budget=-1)
    for members in sc.components:
        if len(members) < 2:
            continue
        sub = subinstance(inst, members)
        alone, _ = greedy(sub, "greedy-size", scan(sub), pair_budget=-1)
        assert [together[i] for i in members] == alone


def _dense_then_sparse(seed: int) -> list[Buffer]:
    """Two runs of time: 300 buffers with up to 40 live, then a chain of 100 small ones
    (each overlapping the next, so the second run has pairs too)."""
    rnd = random.Random(seed)
    dense = [Buffer(s, s + rnd.randrange(1, 40), 64 * rnd.randrange(1, 60), 64) for s in range(300)]
    sparse = [Buffer(1000 + 3 * k, 1000 + 3 * k + 4, 64, 64) for k in range(100)]
    return dense + sparse


def test_windows_lower_the_sweep_with_the_pairs_of_the_dense_run_only() -> None:
    # The sweep places the dense run above first fit; with a pair budget of the dense
    # run's pairs (below the total), the windows around its top lower it.
    buffers = _dense_then_sparse(16)
    inst = prepare(buffers)
    sc = scan(inst)
    assert len(sc.components) == 2
    dense_pairs = sc.pairs[0]
    assert sum(sc.pairs) > dense_pairs
    swept, _ = greedy(inst, "greedy-size", sc, pair_budget=-1)
    sub = subinstance(inst, sc.components[0])
    first = place(sub, size_order(sub))
    assert height(sub, first) < height(inst, swept)  # the premise
    mixed, used = greedy(inst, "greedy-size", sc, pair_budget=dense_pairs)
    assert 0 < used <= dense_pairs
    assert sc.max_live <= height(inst, mixed) < height(inst, swept)
    assert not check_plan(buffers, inst.expand(mixed, len(buffers)), height(inst, mixed))


def test_a_window_as_wide_as_a_component_is_first_fit_on_it() -> None:
    # A window wide enough for the whole dense run but short of the sparse one: no buffer
    # crosses it, so it is first fit on the dense run, kept because it is lower than the
    # sweep's plan, and only the dense run's pairs are built.
    buffers = _dense_then_sparse(16)
    inst = prepare(buffers)
    sc = scan(inst)
    dense_pairs = sc.pairs[0]
    swept, _ = greedy(inst, "greedy-size", sc, pair_budget=-1)
    sub = subinstance(inst, sc.components[0])
    first = place(sub, size_order(sub))
    assert height(sub, first) < height(inst, swept)
    median = int(np.median(np.array(inst.end) - np.array(inst.start)))
    with mock.patch.object(greedy_module, "WINDOW_RADII", (500 / median,)):
        mixed, used = greedy(inst, "greedy-size", sc, pair_budget=dense_pairs)
    assert used == dense_pairs
    assert height(inst, mixed) == height(sub, first)
    assert not check_plan(buffers, inst.expand(mixed, len(buffers)), height(inst, mixed))


def test_random_sets_past_the_pair_budget_stay_near_the_bound() -> None:
    # Many short-lived buffers in a long run of time (the benchmark's sparse sets, small).
    rnd = random.Random(4)
    n = 20_000
    buffers = []
    for _ in range(n):
        s = rnd.randrange(n)
        buffers.append(Buffer(s, s + 1 + rnd.randrange(20), 64 * int(2 ** rnd.uniform(0, 10)), 64))
    lb = lower_bound(buffers)
    with mock.patch.object(greedy_module, "PAIR_BUDGET", 50_000):
        plans = {a: plan_buffers(buffers, a) for a in ("greedy-size", "greedy-conflict")}
        best = plan_best(buffers, time_limit=0.2)
    for p in (*plans.values(), best):
        assert not check_plan(buffers, p.offsets, p.size)
        assert p.size <= 1.2 * lb
    # Size order with first fit where the arena is set: within 10% of the bound.
    assert plans["greedy-size"].size <= 1.1 * lb
    assert best.size <= plans["greedy-size"].size


def test_best_tries_the_sweep_backwards_when_the_budget_allows() -> None:
    buffers = dense_run(3000, 100, 6)
    trace: list[str] = []
    with mock.patch.object(greedy_module, "PAIR_BUDGET", 1000):
        p = plan_best(buffers, time_limit=0.5, trace=trace)
        greedy_plan = plan_buffers(buffers, "greedy-size")
    assert not check_plan(buffers, p.offsets, p.size)
    assert p.size <= greedy_plan.size
    assert p.proven_bound == lower_bound(buffers)


def test_past_the_pair_budget_best_tries_the_sweep_backwards_before_greedy_conflict() -> None:
    # A budget that affords greedy-size and one more sweep: the sweep backwards (lower
    # than greedy-conflict's sweep on most random sets) is the one.
    buffers = dense_run(3000, 100, 6)
    one_sweep = greedy_work(3000, 0, True)
    budgets = {}
    with mock.patch.object(greedy_module, "PAIR_BUDGET", 1000):
        for sweeps in (1, 2, 3):
            trace: list[str] = []
            # greedy-size (its windows' pairs at most 1000, 67 units) and sweeps - 1 more
            work = sweeps * one_sweep + 100 * sweeps
            plan_best(buffers, time_limit=work / WORK_PER_SECOND, trace=trace)
            budgets[sweeps] = next(line for line in trace if line.startswith("greedy plans:"))
    assert budgets[1] == "greedy plans: greedy-size"
    assert budgets[2] == "greedy plans: greedy-size, sweep-backwards"
    assert budgets[3] == "greedy plans: greedy-size, sweep-backwards, greedy-conflict"


def dense_run(n: int, live: int, seed: int) -> list[Buffer]:
    """One long component: ``n`` buffers, about ``live`` at a time, aligned to 64."""
    rnd = random.Random(seed)
    return [
        Buffer(s, s + 1 + rnd.randrange(2 * live), 64 * int(2 ** rnd.uniform(0, 10)), 64)
        for s in (rnd.randrange(n) for _ in range(n))
    ]


def swept_plan(buffers: list[Buffer]) -> list[int]:
    inst = prepare(buffers)
    off = [0] * inst.n
    sweep_place(inst, sorted(range(inst.n), key=lambda i: (inst.start[i], -inst.size[i], i)), off)
    return off


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.builds(
            lambda start, length, size, align: Buffer(start, start + length, size, align),
            st.integers(0, 60),
            st.integers(1, 25),
            st.integers(1, 300),
            st.sampled_from([1, 4, 64]),
        ),
        max_size=70,
    )
)
def test_the_sweep_puts_a_buffer_at_0_on_a_live_buffer_or_under_one(buffers: list[Buffer]) -> None:
    # The sweep's rule: in a hole, at its bottom (offset 0 or the end of the live buffer
    # below, aligned up) or its top (the start of the live buffer above, less the size,
    # aligned down); with no hole, on the highest live buffer. Sizes need not be
    # multiples of the alignment, so padding holes appear. The plan is valid and aligned.
    inst = prepare(buffers)
    off = swept_plan(buffers)
    full = inst.expand(off, len(buffers))
    assert not check_plan(buffers, full, height(inst, off))
    assert all(o % b.align == 0 for o, b in zip(full, buffers))
    births = sorted(range(inst.n), key=lambda i: (inst.start[i], -inst.size[i], i))
    for k, i in enumerate(births):
        a, z = inst.align[i], inst.size[i]
        live = [j for j in births[:k] if inst.end[j] > inst.start[i]]
        places = {0}
        places |= {-(-(off[j] + inst.size[j]) // a) * a for j in live}
        places |= {(off[j] - z) // a * a for j in live if off[j] >= z}
        assert off[i] in places


def test_the_sweep_places_sizes_and_times_past_64_bits() -> None:
    # Python integers all the way (no int64 arrays): the same rule, a valid aligned plan,
    # and the same offsets as the same set scaled down (the rule compares sizes and
    # deaths only).
    rnd = random.Random(7)
    small = [
        Buffer(s, s + rnd.randrange(1, 30), 64 * rnd.randrange(1, 50), 64)
        for s in (rnd.randrange(300) for _ in range(300))
    ]
    big = 1 << 70
    huge = [Buffer(big + b.start * big, big + b.end * big, b.size * big, 64) for b in small]
    inst = prepare(huge)
    assert inst.arrays() is None
    off = swept_plan(huge)
    full = inst.expand(off, len(huge))
    assert not check_plan(huge, full, height(inst, off))
    assert all(o % 64 == 0 for o in full)
    assert [o // big for o in off] == swept_plan(small)


def test_the_sweep_places_a_buffer_next_to_the_neighbour_that_dies_with_it() -> None:
    # P, Q, R stay; h1 and h2 leave two holes of 20 bytes at 10 and 40: between P (dies
    # at 100) and Q (at 10), and between Q and R (at 50). Best fit alone would take the
    # lower hole for every buffer; the sweep takes the side whose neighbour dies closest.
    stay = [Buffer(0, 100, 10, 1), Buffer(1, 5, 20, 1), Buffer(2, 10, 10, 1)]
    stay += [Buffer(3, 5, 20, 1), Buffer(4, 50, 10, 1)]
    assert swept_plan(stay) == [0, 10, 30, 40, 60]
    assert swept_plan(stay + [Buffer(6, 50, 20, 1)])[-1] == 40  # a hole under R
    assert swept_plan(stay + [Buffer(6, 50, 15, 1)])[-1] == 45  # its top: on R's side
    assert swept_plan(stay + [Buffer(6, 100, 15, 1)])[-1] == 10  # on P
    assert swept_plan(stay + [Buffer(6, 10, 15, 1)])[-1] == 15  # under Q (in the low hole)


def test_the_sweep_s_top_comes_down_when_the_buffer_on_top_dies() -> None:
    # X (0-40) and Y (140-175) die at 3, A (40-140) stays. The space Y left is above every
    # live buffer, not a hole: C goes in X's hole at 0, though Y's 35 bytes fit it tighter.
    buffers = [Buffer(0, 3, 40, 1), Buffer(1, 20, 100, 1), Buffer(2, 3, 35, 1)]
    assert swept_plan(buffers) == [0, 40, 140]
    assert swept_plan(buffers + [Buffer(4, 10, 30, 1)])[-1] == 0
    # And with no hole that holds it, a buffer goes on top of the highest live one.
    assert swept_plan(buffers + [Buffer(4, 10, 50, 1)])[-1] == 140


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(intervals(), st.integers(0, 3000))
def test_windows_keep_the_plan_valid_never_higher_and_within_their_pairs(
    buffers: list[Buffer], pair_budget: int
) -> None:
    inst = prepare(buffers)
    off = swept_plan(buffers)
    before = height(inst, off)
    used = replan_windows(inst, off, size_order, pair_budget, scan(inst).max_live)
    assert 0 <= used <= pair_budget
    full = inst.expand(off, len(buffers))
    assert not check_plan(buffers, full, height(inst, off))
    assert all(o % b.align == 0 for o, b in zip(full, buffers))
    assert height(inst, off) <= before


def test_windows_lower_a_component_whose_pairs_are_past_the_budget() -> None:
    # One component of 10,000 buffers: first fit on all of it is out of reach, windows
    # around the top are not, and they lower the sweep's arena with an eighth of the pairs.
    buffers = dense_run(10_000, 30, seed=8)
    inst = prepare(buffers)
    sc = scan(inst)
    assert len([m for m in sc.components if len(m) > 1]) == 1
    budget = sum(sc.pairs) // 8
    swept, _ = greedy(inst, "greedy-size", sc, pair_budget=-1)
    mixed, used = greedy(inst, "greedy-size", sc, pair_budget=budget)
    assert 0 < used <= budget
    assert not check_plan(buffers, inst.expand(mixed, len(buffers)), height(inst, mixed))
    assert height(inst, mixed) < height(inst, swept)


def test_best_with_no_time_is_greedy_size_past_the_pair_budget() -> None:
    buffers = dense_run(4000, 40, seed=9)
    with mock.patch.object(greedy_module, "PAIR_BUDGET", 20_000):
        best = plan_best(buffers, time_limit=0.0)
        greedy_plan = plan_buffers(buffers, "greedy-size")
    assert best.offsets == greedy_plan.offsets
    assert best.algorithm == "best(greedy-size)"


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.05, 0.2]), st.sampled_from([-1, 20_000]))
def test_best_counts_all_its_work_against_the_budget(
    seed: int, time_limit: float, pair_budget: int
) -> None:
    # Everything best does is counted (greedy-size's set-up, sweep and pairs included):
    # it stays within its budget, or within what greedy-size alone costs when that is more.
    buffers = dense_run(3000, 30, seed)
    inst = prepare(buffers)
    sc = scan(inst)
    trace: list[str] = []
    budget = pair_budget if pair_budget >= 0 else greedy_module.PAIR_BUDGET
    with mock.patch.object(greedy_module, "PAIR_BUDGET", budget):
        p = plan_best(buffers, time_limit=time_limit, trace=trace)
        _, pairs = greedy(inst, "greedy-size", sc)
        g = plan_buffers(buffers, "greedy-size")
    used = int(trace[-1].split()[1])
    swept = sum(sc.pairs) > budget
    # A component searched may overrun by the last step it started (a search turn).
    slack = 2000
    assert used <= max(int(time_limit * WORK_PER_SECOND), greedy_work(inst.n, pairs, swept)) + slack
    assert p.size <= g.size
    assert not check_plan(buffers, p.offsets, p.size)

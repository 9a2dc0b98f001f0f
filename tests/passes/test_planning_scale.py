"""The greedy planners past the pair budget: the sweep, and first fit where it matters.

Past :data:`greedy.PAIR_BUDGET` conflict pairs, the sweep places everything (each
component from an empty arena), then first fit re-plans the components that set the arena,
highest first, while their pairs fit. Small inputs with a patched budget exercise the same
code paths as a million buffers; the timings themselves belong in benchmarks/planners.py.
"""

from __future__ import annotations

import random
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.passes.planning import greedy as greedy_module
from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.greedy import greedy, place, prepare, scan, size_order, subinstance
from relaxc.passes.planning.model import Buffer, lower_bound
from relaxc.passes.planning.planners import plan_best, plan_buffers


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


def test_first_fit_re_plans_the_component_that_sets_the_arena() -> None:
    # Two runs of time. The sweep places the first, dense one badly; first fit on its
    # conflict lists is better, and only its pairs are built.
    rnd = random.Random(2)
    dense = [Buffer(s, s + rnd.randrange(1, 40), 64 * rnd.randrange(1, 60), 64) for s in range(300)]
    sparse = [Buffer(1000 + 3 * k, 1000 + 3 * k + 2, 64, 64) for k in range(100)]
    buffers = dense + sparse
    inst = prepare(buffers)
    sc = scan(inst)
    assert len(sc.components) == 101
    dense_pairs = sc.pairs[0]
    swept, _ = greedy(inst, "greedy-size", sc, pair_budget=-1)
    mixed, used = greedy(inst, "greedy-size", sc, pair_budget=dense_pairs)
    assert used == dense_pairs
    sub = subinstance(inst, sc.components[0])
    first = place(sub, size_order(sub))
    assert height(inst, mixed) == min(height(inst, swept), height(sub, first))
    assert height(inst, mixed) < height(inst, swept)


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
    rnd = random.Random(6)
    buffers = [
        Buffer(s, s + 1 + rnd.randrange(200), 64 * int(2 ** rnd.uniform(0, 10)), 64)
        for s in (rnd.randrange(3000) for _ in range(3000))
    ]
    trace: list[str] = []
    with mock.patch.object(greedy_module, "PAIR_BUDGET", 1000):
        p = plan_best(buffers, time_limit=0.5, trace=trace)
        greedy_plan = plan_buffers(buffers, "greedy-size")
    assert not check_plan(buffers, p.offsets, p.size)
    assert p.size <= greedy_plan.size
    assert p.proven_bound == lower_bound(buffers)

"""Small buffers as filler (issue 17, item 1): ``best`` plans the large buffers of a
component alone, then first fits the small ones into the gaps (planners._large_first).

Programs mix a reduction's 64-byte result with megabyte tensors; the filler plan has to
be valid, never make ``best`` worse than greedy, count its work, claim optimality only at
the whole instance's lower bound, and be the same plan every time.
"""

from __future__ import annotations

import itertools
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.passes.planning import planners as planners_module
from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.greedy import place, prepare, scan
from relaxc.passes.planning.model import Buffer, lower_bound
from relaxc.passes.planning.planners import plan_best, plan_buffers

FAST = 0.2


def mixed_sets() -> st.SearchStrategy[list[Buffer]]:
    """A few large buffers (256 KiB-1 MiB, 64-aligned) and about four times as many tiny
    ones (1-64 bytes, various alignments), lifetimes in a short run of time."""
    large = st.builds(
        lambda s, n, k: Buffer(s, s + n, 64 * k, 64),
        st.integers(0, 20),
        st.integers(1, 10),
        st.integers(4096, 16384),
    )
    tiny = st.builds(
        lambda s, n, size, a: Buffer(s, s + n, size, a),
        st.integers(0, 28),
        st.integers(1, 4),
        st.integers(1, 64),
        st.sampled_from([1, 8, 64]),
    )
    return st.tuples(st.lists(large, min_size=2, max_size=8), st.lists(tiny, max_size=40)).map(
        lambda lt: lt[0] + lt[1] * 4 if len(lt[1]) * 4 >= len(lt[0]) else lt[0] + lt[1]
    )


def tiled(seed: int, pieces: int = 10, steps: int = 16, height: int = 256) -> list[Buffer]:
    """Large buffers tiling ``steps`` x ``height`` units of 4 KiB exactly (guillotine cuts),
    each giving up 0-2 strips of 64 bytes at its top to 64-byte buffers living one step
    each: every point of time has exactly ``height`` units live, so the lower bound is
    met by the tiling with the small ones in its gaps."""
    rng = random.Random(seed)
    rects = [(0, steps, 0, height)]
    while len(rects) < pieces:
        rects.sort(key=lambda r: -(r[1] - r[0]) * (r[3] - r[2]))
        k = rng.randrange(min(3, len(rects)))
        t0, t1, o0, o1 = rects[k]
        if rng.random() < 0.5 and t1 - t0 > 1:
            c = rng.randrange(t0 + 1, t1)
            rects[k : k + 1] = [(t0, c, o0, o1), (c, t1, o0, o1)]
        elif o1 - o0 > 1:
            c = rng.randrange(o0 + 1, o1)
            rects[k : k + 1] = [(t0, t1, o0, c), (t0, t1, c, o1)]
    out = []
    for t0, t1, o0, o1 in sorted(rects):
        strips = rng.randrange(0, 3)
        out.append(Buffer(t0, t1, (o1 - o0) * 4096 - 64 * strips, 64))
        out += [Buffer(t, t + 1, 64, 64) for _ in range(strips) for t in range(t0, t1)]
    return out


def _budget(seconds: float) -> planners_module._Budget:
    return planners_module._Budget(seconds)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_sets())
def test_filler_plan_is_valid_and_best_never_worse_than_greedy(buffers: list[Buffer]) -> None:
    inst = prepare(buffers)
    goal = scan(inst).max_live
    inst.nbrs  # the caller builds the conflict lists
    budget = _budget(FAST)
    filled = planners_module._large_first(inst, goal, budget, random.Random(0), None)
    if filled is not None:
        offsets, big_bound = filled
        full = inst.expand(offsets, len(buffers))
        assert min(offsets) >= 0  # every buffer placed
        height = max((o + b.size for o, b in zip(full, buffers)), default=0)
        assert check_plan(buffers, full, height) == []
        assert big_bound <= height  # a bound on the large ones is a bound on all
        assert budget.used > 0
    plan = plan_best(buffers, time_limit=FAST)
    assert check_plan(buffers, plan.offsets, plan.size) == []
    assert plan.size <= plan_buffers(buffers, "greedy-size").size
    assert lower_bound(buffers) <= plan.proven_bound <= plan.size
    assert plan.optimal == (plan.size == plan.proven_bound)


def test_small_buffers_need_many_of_them_and_little_live() -> None:
    big = [Buffer(0, 10, 1 << 20, 64), Buffer(5, 15, 1 << 19, 64)]
    inst = prepare(big + [Buffer(t, t + 1, 64, 64) for t in range(10)])
    goal = scan(inst).max_live
    assert planners_module.small_buffers(inst, goal) == list(range(2, 12))
    # A couple of small ones among many large: not worth planning apart.
    few = prepare(big * 10 + [Buffer(0, 1, 64, 64)])
    assert planners_module.small_buffers(few, scan(few).max_live) is None
    # Thousands of tiny ones live at once are not filler: together they are large.
    crowd = prepare(big + [Buffer(0, 10, 64, 64)] * 2000)
    assert planners_module.small_buffers(crowd, scan(crowd).max_live) is None


def test_best_is_optimal_when_large_buffers_tile_the_bound_and_small_ones_fill_gaps() -> None:
    buffers = tiled(7)
    assert sum(b.size > 64 for b in buffers) == 10 and len(buffers) == 66
    # Greedy alone does not find the tiling.
    assert plan_buffers(buffers, "greedy-size").size > lower_bound(buffers) == 1 << 20
    trace: list[str] = []
    plan = plan_best(buffers, time_limit=0.5, trace=trace)
    assert check_plan(buffers, plan.offsets, plan.size) == []
    assert any("large buffers first" in line for line in trace)
    assert plan.algorithm == "best(large-first)"
    assert plan.optimal and plan.size == plan.proven_bound == 1 << 20


def _optimum(buffers: list[Buffer]) -> int:
    """The smallest arena, by first fit over every order (some order is optimal: any
    plan pushed down is the first fit of its buffers listed by offset)."""
    inst = prepare(buffers)
    return min(inst.height(place(inst, order)) for order in itertools.permutations(range(inst.n)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.builds(
            lambda s, n, k: Buffer(s, s + n, 64 * k, 64),
            st.integers(0, 4),
            st.integers(1, 4),
            st.integers(4096, 8192),
        ),
        min_size=2,
        max_size=3,
    ),
    st.lists(
        st.builds(
            lambda s, a: Buffer(s, s + 1, 64, a), st.integers(0, 7), st.sampled_from([1, 64])
        ),
        min_size=3,
        max_size=4,
    ),
)
def test_optimal_only_at_the_optimum(large: list[Buffer], small: list[Buffer]) -> None:
    # The proven bound (the large ones' bound, raised to the whole instance's max-live)
    # never exceeds the true optimum, so "optimal" is only claimed there.
    buffers = large + small
    plan = plan_best(buffers, time_limit=FAST)
    assert check_plan(buffers, plan.offsets, plan.size) == []
    best = _optimum(buffers)
    assert lower_bound(buffers) <= plan.proven_bound <= best <= plan.size
    assert plan.optimal == (plan.size == plan.proven_bound)
    if plan.optimal:
        assert plan.size == best


def test_filler_plan_is_deterministic() -> None:
    for buffers in (tiled(7), tiled(28)):
        first = plan_best(buffers, time_limit=0.5)
        second = plan_best(buffers, time_limit=0.5)
        assert first.offsets == second.offsets and first.algorithm == second.algorithm

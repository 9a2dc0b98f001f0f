"""Memory planning on interval sets: the planners, the exact search and the checker."""

from __future__ import annotations

import itertools
import random
from unittest import mock
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.passes.planning import greedy as greedy_module
from relaxc.passes.planning import planners as planners_module
from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.greedy import conflict_lists, place, prepare
from relaxc.passes.planning.model import Buffer, Plan, lower_bound, naive_total
from relaxc.passes.planning.planners import PLANNERS, plan_best, plan_buffers
from relaxc.passes.planning.search import Probe, Sections, merged_runs

MINIMALLOC = next(
    (
        p / "shared/benchmarks/minimalloc"
        for p in Path(__file__).resolve().parents
        if (p / "shared/benchmarks/minimalloc").is_dir()
    ),
    Path("/work/shared/benchmarks/minimalloc"),
)

# Small limits keep the file fast; a small instance that misses its bound in this time
# still has to be valid and no worse than greedy.
FAST = 0.2


def buffer_lists(max_size: int = 24, aligned: bool = True) -> st.SearchStrategy[list[Buffer]]:
    one = st.builds(
        lambda start, length, size, align: Buffer(start, start + length, size, align),
        st.integers(0, 30),
        st.integers(-2, 12),  # empty or reversed lifetimes are legal
        st.one_of(st.integers(0, 64), st.sampled_from([128, 256, 1000])),
        st.sampled_from([1, 2, 4, 8, 16]) if aligned else st.just(1),
    )
    return st.lists(one, max_size=max_size)


def brute_force_problems(buffers: list[Buffer], offsets: list[int], arena: int) -> bool:
    """Whether the plan is invalid, by comparing every pair (the definition)."""
    for b, o in zip(buffers, offsets):
        if o < 0 or o % b.align or o + b.size > arena:
            return True
    for (a, oa), (b, ob) in itertools.combinations(zip(buffers, offsets), 2):
        if (
            a.size
            and b.size
            and a.start < a.end
            and b.start < b.end
            and a.overlaps_in_time(b)
            and oa < ob + b.size
            and ob < oa + a.size
        ):
            return True
    return False


def plan(buffers: list[Buffer], algorithm: str, **kw) -> Plan:
    kw.setdefault("time_limit", FAST)
    p = plan_buffers(buffers, algorithm, **kw)
    assert len(p.offsets) == len(buffers)
    assert p.size == max((o + b.size for b, o in zip(buffers, p.offsets)), default=0)
    problems = check_plan(buffers, p.offsets, p.size)
    assert not problems, f"{algorithm}: {problems}"
    return p


# -- properties ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buffer_lists())
def test_every_planner_is_valid_and_above_the_lower_bound(buffers: list[Buffer]) -> None:
    lb = lower_bound(buffers)
    for algorithm in PLANNERS:
        p = plan(buffers, algorithm)
        assert p.size >= lb
        for b, o in zip(buffers, p.offsets):
            assert o % b.align == 0
            if algorithm != "none" and (b.size == 0 or b.start >= b.end):
                assert o == 0  # needs no memory


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buffer_lists())
def test_best_is_no_worse_than_greedy_or_no_reuse(buffers: list[Buffer]) -> None:
    best = plan(buffers, "best")
    assert best.size <= plan(buffers, "greedy-size").size
    assert best.size <= plan(buffers, "greedy-conflict").size
    assert best.size <= naive_total(buffers)
    assert best.algorithm.startswith("best(")


@settings(max_examples=60, deadline=None)
@given(buffer_lists(aligned=False))
def test_greedy_is_no_worse_than_no_reuse_without_alignment(buffers: list[Buffer]) -> None:
    assert plan(buffers, "greedy-size").size <= naive_total(buffers)
    assert plan(buffers, "greedy-conflict").size <= naive_total(buffers)


@settings(max_examples=60, deadline=None)
@given(buffer_lists())
def test_none_is_exactly_naive_total(buffers: list[Buffer]) -> None:
    assert plan(buffers, "none").size == naive_total(buffers)


@settings(max_examples=100, deadline=None)
@given(buffer_lists(max_size=10), st.randoms(use_true_random=False))
def test_checker_agrees_with_the_pairwise_definition(
    buffers: list[Buffer], rnd: random.Random
) -> None:
    # Random plans, most of them bad: the sweep must find a problem exactly when the
    # pairwise comparison does.
    offsets = [rnd.choice([0, b.align, 3, 2 * b.align, rnd.randrange(0, 200)]) for b in buffers]
    arena = max((o + b.size for b, o in zip(buffers, offsets)), default=0) - rnd.choice(
        [0, 0, 0, 1]
    )
    assert bool(check_plan(buffers, offsets, arena, limit=1000)) == brute_force_problems(
        buffers, offsets, arena
    )


@settings(max_examples=100, deadline=None)
@given(buffer_lists())
def test_conflicts_from_the_sweep_are_all_intersecting_pairs(buffers: list[Buffer]) -> None:
    inst = prepare(buffers)
    got = {(i, j) for i, js in enumerate(inst.nbrs) for j in js}
    want = {
        (i, j)
        for i in range(inst.n)
        for j in range(inst.n)
        if i != j and inst.start[i] < inst.end[j] and inst.start[j] < inst.end[i]
    }
    assert got == want


def optimum(buffers: list[Buffer]) -> int:
    """The smallest arena, by first fit over every order (some order is optimal)."""
    inst = prepare(buffers)
    return min(
        (inst.height(place(inst, list(order))) for order in itertools.permutations(range(inst.n))),
        default=0,
    )


def with_twins(n: int) -> st.SearchStrategy[list[Buffer]]:
    """Lists drawn from a few distinct buffers: identical ones (twins) are common."""
    return (
        buffer_lists(max_size=3)
        .filter(bool)
        .flatmap(lambda pool: st.lists(st.sampled_from(pool), max_size=n))
    )


@settings(max_examples=60, deadline=None)
@given(st.one_of(buffer_lists(max_size=6), with_twins(6)))
def test_search_decides_the_optimum_exactly(buffers: list[Buffer]) -> None:
    inst = prepare(buffers)
    if not inst.n:
        return
    opt = optimum(buffers)
    # Both views of the instance the search uses: its times, and runs merged.
    secs = [Sections(inst), Sections(merged_runs(inst))]
    # The arena also holds buffers with empty lifetimes (at offset 0).
    floor = max((b.size for b in buffers if b.start >= b.end), default=0)

    def decide(capacity: int) -> str:
        probe = Probe(secs, capacity)
        while not probe.step():
            assert probe.work < 10**6
        return probe.status

    assert decide(opt) == "found"
    assert decide(opt - 1) == "infeasible"  # the search is complete: this is a proof
    assert plan(buffers, "best", time_limit=5.0).size == max(opt, floor)


# -- the sweep (huge inputs), forced on small ones ---------------------------------------


def sweep_everywhere():
    """Every component past the pair budget: the greedy planners use the sweep."""
    return mock.patch.object(greedy_module, "PAIR_BUDGET", -1)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buffer_lists(max_size=40))
def test_the_sweep_is_valid_and_above_the_lower_bound(buffers: list[Buffer]) -> None:
    lb = lower_bound(buffers)
    with sweep_everywhere():
        plans = {a: plan(buffers, a) for a in PLANNERS}
    for algorithm, p in plans.items():
        assert p.size >= lb
        assert p.proven_bound <= p.size
        for b, o in zip(buffers, p.offsets):
            assert o % b.align == 0
    assert plans["best"].size <= plans["greedy-size"].size


@settings(max_examples=80, deadline=None)
@given(buffer_lists(max_size=40, aligned=False))
def test_the_sweep_is_no_worse_than_no_reuse_without_alignment(buffers: list[Buffer]) -> None:
    with sweep_everywhere():
        assert plan(buffers, "greedy-size").size <= naive_total(buffers)
        assert plan(buffers, "greedy-conflict").size <= naive_total(buffers)


@settings(max_examples=60, deadline=None)
@given(buffer_lists(max_size=40))
def test_the_numpy_scan_agrees_with_the_plain_one(buffers: list[Buffer]) -> None:
    inst = prepare(buffers)
    slow = greedy_module._scan_slow(inst)
    if inst.n:
        assert greedy_module._scan_numpy(inst) == slow
    fast = greedy_module.scan(inst)
    assert fast == slow
    assert fast.max_live == lower_bound(buffers) or inst.n == 0
    want = [inst.size[i] + sum(inst.size[j] for j in inst.nbrs[i]) for i in range(inst.n)]
    assert greedy_module.conflict_weights(inst) == want


def test_the_sweep_on_random_interval_sets() -> None:
    # Dense enough that the pair budget sends everything to the sweep.
    rnd = random.Random(3)
    n = 20_000
    buffers = [
        Buffer(s, s + 1 + rnd.randrange(400), 64 * int(2 ** rnd.uniform(0, 10)), 64)
        for s in (rnd.randrange(n) for _ in range(n))
    ]
    lb = lower_bound(buffers)
    for algorithm in ("greedy-size", "greedy-conflict", "best"):
        with mock.patch.object(greedy_module, "PAIR_BUDGET", 10_000):
            p = plan(buffers, algorithm)
        assert lb <= p.size <= 1.25 * lb
        assert p.proven_bound == lb


# -- examples --------------------------------------------------------------------------


def test_minimalloc_example_reaches_its_optimum_of_12() -> None:
    # MiniMalloc's examples/input.12.csv: id,lower,upper,size (half-open lifetimes).
    rows = [("b1", 0, 3, 4), ("b2", 3, 9, 4), ("b3", 0, 9, 4), ("b4", 9, 21, 4), ("b5", 0, 21, 4)]
    buffers = [Buffer(lo, hi, size, 1, name) for name, lo, hi, size in rows]
    assert lower_bound(buffers) == 12
    assert plan(buffers, "best").size == 12


def test_minimalloc_example_file() -> None:
    path = MINIMALLOC / "examples" / "input.12.csv"
    if not path.exists():
        pytest.skip("shared MiniMalloc benchmarks not present")
    lines = path.read_text().split()
    assert lines[0] == "id,lower,upper,size"
    buffers = [
        Buffer(int(lo), int(hi), int(size), 1, name)
        for name, lo, hi, size in (line.split(",") for line in lines[1:])
    ]
    assert len(buffers) == 5
    assert plan(buffers, "best").size == 12


def test_a_challenging_instance_reaches_its_lower_bound() -> None:
    path = MINIMALLOC / "challenging" / "G.1048576.csv"
    if not path.exists():
        pytest.skip("shared MiniMalloc benchmarks not present")
    rows = [line.split(",") for line in path.read_text().split()[1:]]
    buffers = [Buffer(int(lo), int(hi), int(size), 1, name) for name, lo, hi, size in rows]
    trace: list[str] = []
    p = plan_best(buffers, time_limit=10.0, trace=trace)
    assert not check_plan(buffers, p.offsets, p.size)
    assert p.size == lower_bound(buffers) == 1048576, trace
    assert p.algorithm == "best(search)"


def test_disjoint_lifetimes_share_offset_zero() -> None:
    buffers = [Buffer(0, 2, 100), Buffer(2, 5, 50, 8), Buffer(5, 6, 70, 4), Buffer(10, 20, 1)]
    for algorithm in ("greedy-size", "greedy-conflict", "best"):
        p = plan(buffers, algorithm)
        assert p.offsets == (0, 0, 0, 0)
        assert p.size == 100


def test_touching_lifetimes_do_not_conflict() -> None:
    # Half-open: [0, 3) and [3, 6) are never live together.
    buffers = [Buffer(0, 3, 10), Buffer(3, 6, 10)]
    assert lower_bound(buffers) == 10
    assert plan(buffers, "greedy-size").offsets == (0, 0)


def test_fully_overlapping_buffers_stack() -> None:
    buffers = [Buffer(0, 10, s) for s in (30, 10, 20)]
    for algorithm in ("greedy-size", "greedy-conflict", "best"):
        p = plan(buffers, algorithm)
        assert p.size == 60
        spans = sorted((o, o + b.size) for b, o in zip(buffers, p.offsets))
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    # Largest first: 30 at 0, 20 at 30, 10 at 50.
    assert plan(buffers, "greedy-size").offsets == (0, 50, 30)
    assert plan(buffers, "none").offsets == (0, 30, 40)


def test_alignment_padding() -> None:
    # 5 bytes (align 1) and 4 bytes (align 8), live together. Largest first puts the
    # 5 at 0 and must pad the 4 up to 8: arena 12. Putting the 4 first needs only 9.
    buffers = [Buffer(0, 4, 5, 1), Buffer(0, 4, 4, 8)]
    greedy = plan(buffers, "greedy-size")
    assert greedy.offsets == (0, 8)
    assert greedy.size == 12
    best = plan(buffers, "best")
    assert best.offsets == (4, 0)
    assert best.size == 9
    assert plan(buffers, "none").offsets == (0, 8)
    assert naive_total(buffers) == 12


def test_alignment_can_make_first_fit_worse_than_no_reuse() -> None:
    # Why "greedy <= naive_total" only holds without alignment: largest first puts the
    # 6 (align 2) at 0 and pads the 4 (align 4) to 8; in input order they need 10.
    buffers = [Buffer(0, 1, 4, 4), Buffer(0, 1, 6, 2)]
    assert naive_total(buffers) == 10
    assert plan(buffers, "greedy-size").size == 12
    assert plan(buffers, "best").size == 10


def test_zero_size_and_empty_lifetimes_sit_at_zero() -> None:
    buffers = [Buffer(0, 5, 0, 16), Buffer(3, 3, 64, 8), Buffer(4, 2, 8), Buffer(0, 5, 32, 16)]
    for algorithm in ("greedy-size", "greedy-conflict", "best"):
        p = plan(buffers, algorithm)
        assert p.offsets == (0, 0, 0, 0)
        # Plan.from_offsets (and the checker) still fit every buffer in the arena,
        # the 64 bytes never live included.
        assert p.size == 64
    buffers = [Buffer(0, 5, 0, 16), Buffer(0, 5, 32, 16), Buffer(0, 5, 16, 16)]
    assert plan(buffers, "best").offsets in ((0, 0, 32), (0, 16, 0))
    assert plan([], "best").size == 0
    assert plan([], "none").size == 0


def test_best_is_deterministic_for_a_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    # A work budget far below what the time limit allows: the count ends the search.
    monkeypatch.setattr(planners_module, "WORK_PER_SECOND", 5000)
    rnd = random.Random(7)
    buffers = [
        Buffer(s, s + rnd.randrange(1, 12), rnd.randrange(1, 40) * 16, 16)
        for s in (rnd.randrange(0, 40) for _ in range(60))
    ]
    first = plan(buffers, "best", time_limit=1.0, seed=3)
    second = plan(buffers, "best", time_limit=1.0, seed=3)
    assert first == second


def test_time_limit_zero_still_gives_the_greedy_plan() -> None:
    rnd = random.Random(1)
    buffers = [Buffer(s, s + rnd.randrange(1, 9), rnd.randrange(1, 100)) for s in range(50)]
    p = plan(buffers, "best", time_limit=0.0)
    assert p.size <= plan(buffers, "greedy-size").size


def test_unknown_planner_and_negative_time_limit() -> None:
    with pytest.raises(ValueError, match="unknown planner"):
        plan_buffers([Buffer(0, 1, 1)], "fastest")
    with pytest.raises(ValueError):
        plan_buffers([Buffer(0, 1, 1)], "best", time_limit=-1)


def test_greedy_size_plans_a_100k_chain() -> None:
    # Time belongs in benchmarks/planners.py; here only that it works and reuses.
    rnd = random.Random(0)
    buffers = [
        Buffer(i, i + 1 + rnd.randrange(4), 64 * rnd.randrange(1, 64), 64) for i in range(100_000)
    ]
    p = plan_buffers(buffers, "greedy-size")
    assert not check_plan(buffers, p.offsets, p.size)
    assert p.size <= 2 * lower_bound(buffers)


def test_conflict_lists_of_a_chain_are_local() -> None:
    starts = list(range(1000))
    ends = [s + 3 for s in starts]
    nbrs = conflict_lists(starts, ends)
    assert all(
        sorted(js) == [j for j in range(i - 2, i + 3) if j != i and 0 <= j < 1000]
        for i, js in enumerate(nbrs)
    )


# -- the checker on hand-made bad plans ------------------------------------------------


def test_checker_accepts_a_good_plan() -> None:
    buffers = [Buffer(0, 4, 8, 8, "a"), Buffer(2, 6, 8, 8, "b"), Buffer(4, 8, 8, 8, "c")]
    assert check_plan(buffers, [0, 8, 0], 16) == []


def test_checker_catches_an_overlap() -> None:
    buffers = [Buffer(0, 4, 8, 1, "a"), Buffer(2, 6, 8, 1, "b")]
    problems = check_plan(buffers, [0, 4], 12)
    assert len(problems) == 1
    assert "a" in problems[0] and "b" in problems[0] and "overlap" in problems[0]
    # A buffer hidden entirely inside a longer one below it.
    buffers = [
        Buffer(0, 9, 100, 1, "big"),
        Buffer(1, 2, 10, 1, "small"),
        Buffer(1, 2, 10, 1, "other"),
    ]
    assert check_plan(buffers, [0, 50, 100], 110)


def test_checker_allows_sharing_when_lifetimes_do_not_intersect() -> None:
    buffers = [Buffer(0, 4, 8), Buffer(4, 8, 8), Buffer(3, 3, 8), Buffer(0, 8, 0)]
    assert check_plan(buffers, [0, 0, 0, 4], 8) == []


def test_checker_catches_misalignment() -> None:
    buffers = [Buffer(0, 4, 8, 8, "a")]
    problems = check_plan(buffers, [4], 16)
    assert problems and "not aligned to 8" in problems[0]


def test_checker_catches_out_of_arena_and_negative_offsets() -> None:
    buffers = [Buffer(0, 4, 8, 1, "a"), Buffer(4, 8, 8, 1, "b")]
    problems = check_plan(buffers, [0, 4], 10)
    assert any("past the arena" in p for p in problems)
    problems = check_plan(buffers, [-1, 0], 8)
    assert any("negative offset" in p for p in problems)


def test_checker_catches_a_wrong_number_of_offsets() -> None:
    assert check_plan([Buffer(0, 1, 1)], [0, 0], 1)

"""The best planner's output depends on the input and the options only (issue 14, item 11).

Work budgets, not the clock, end its search: the same planning on a machine kept busy by
spinning processes gives the same offsets. A CPU clock stops a search only far past its
budget, and then the plan says so.
"""

from __future__ import annotations

import multiprocessing
import random
from pathlib import Path

from relaxc.passes.planning import planners as planners_module
from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.model import Buffer
from relaxc.passes.planning.planners import plan_buffers

MINIMALLOC = next(
    (
        p / "shared/benchmarks/minimalloc"
        for p in Path(__file__).resolve().parents
        if (p / "shared/benchmarks/minimalloc").is_dir()
    ),
    Path("/work/shared/benchmarks/minimalloc"),
)


def _spin(stop) -> None:  # noqa: ANN001 (a multiprocessing Event)
    while not stop.is_set():
        pass


def _instance() -> list[Buffer]:
    """MiniMalloc's instance D (the one issue 14 saw vary), or a random hard-ish one."""
    path = MINIMALLOC / "challenging" / "D.1048576.csv"
    if path.exists():
        rows = [line.split(",") for line in path.read_text().split()[1:]]
        return [Buffer(int(lo), int(hi), int(size), 1, name) for name, lo, hi, size in rows]
    rnd = random.Random(5)
    return [
        Buffer(s, s + rnd.randrange(1, 30), rnd.randrange(1, 64) * 1024, 64)
        for s in (rnd.randrange(0, 200) for _ in range(200))
    ]


def test_best_gives_the_same_plan_on_a_busy_machine() -> None:
    buffers = _instance()
    quiet = plan_buffers(buffers, "best", time_limit=0.5)
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    spinners = [ctx.Process(target=_spin, args=(stop,), daemon=True) for _ in range(3)]
    for p in spinners:
        p.start()
    try:
        busy = plan_buffers(buffers, "best", time_limit=0.5)
    finally:
        stop.set()
        for p in spinners:
            p.join(10)
    assert not quiet.stopped_by_clock and not busy.stopped_by_clock
    assert busy.offsets == quiet.offsets
    assert busy == quiet
    assert not check_plan(buffers, busy.offsets, busy.size)


def test_the_safety_clock_is_reported(monkeypatch) -> None:  # noqa: ANN001
    buffers = _instance()
    greedy = plan_buffers(buffers, "greedy-size")
    # A clock that has run out before the search starts: the plan is still valid and
    # no worse than greedy, and it says the clock stopped it.
    monkeypatch.setattr(planners_module, "CLOCK_FACTOR", -1.0)
    p = plan_buffers(buffers, "best", time_limit=0.5)
    assert p.stopped_by_clock
    assert p.size <= greedy.size
    assert not check_plan(buffers, p.offsets, p.size)


def test_plans_carry_their_bound() -> None:
    buffers = [Buffer(0, 4, 8), Buffer(2, 6, 8), Buffer(4, 8, 8)]
    for algorithm in planners_module.PLANNERS:
        p = plan_buffers(buffers, algorithm)
        assert p.proven_bound == 16
        assert p.optimal == (p.size == 16)
        assert not p.stopped_by_clock
    assert plan_buffers(buffers, "best").optimal
    assert not plan_buffers(buffers, "none").optimal

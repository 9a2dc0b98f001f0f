"""A second opinion: the planning problem as a CP-SAT model (OR-Tools, an optional extra).

Not the default path of any planner: tests and ``benchmarks/planners.py`` use it to
certify relaxc's optima on small and challenging instances. Install it with
``pip install relaxc[cpsat]`` (``ortools>=9.8``); :func:`available` says whether it is.

The model: an integer offset per buffer (a multiple of its alignment), a height ``H``
with ``offset + size <= H`` for every buffer, and one ``NoOverlap2D`` over the boxes
``[start, end) x [offset, offset + size)`` (CP-SAT intervals are half-open, as lifetimes
are here); minimise ``H``. Buffers that need no memory (zero size, empty lifetime) are
left out and sit at 0; a buffer with an empty lifetime still has to fit under ``H``.

Runs are single-threaded and stopped by CP-SAT's *deterministic* time when asked (its
work measure, not the clock), so they repeat; ``time_limit`` (wall seconds) is a cap on top.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .model import Buffer, lower_bound


def available() -> bool:
    try:
        import ortools.sat.python.cp_model  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class CpsatResult:
    """``status`` is ``OPTIMAL``, ``FEASIBLE``, ``INFEASIBLE`` or ``UNKNOWN``; ``size`` the
    best height found (None if none), ``bound`` the best proven lower bound."""

    status: str
    size: int | None
    bound: int
    offsets: tuple[int, ...] | None
    seconds: float


def solve(
    buffers: Sequence[Buffer],
    *,
    time_limit: float = 10.0,
    deterministic_time: float | None = None,
    upper: int | None = None,
    hint: Sequence[int] | None = None,
    workers: int = 1,
) -> CpsatResult:
    """The smallest arena for ``buffers`` by CP-SAT, within the limits given. ``upper``
    (an arena known to be feasible, e.g. relaxc's) caps ``H``; ``hint`` is a plan to start from."""
    from ortools.sat.python import cp_model

    lb = max([lower_bound(buffers)] + [b.size for b in buffers if b.start >= b.end] + [0])
    live = [i for i, b in enumerate(buffers) if b.size > 0 and b.start < b.end]
    if upper is None:
        upper = 0
        for b in buffers:  # no reuse at all is always feasible
            a = max(1, b.align)
            upper = -(-upper // a) * a + b.size
    if not live:
        return CpsatResult("OPTIMAL", lb, lb, tuple(0 for _ in buffers), 0.0)
    m = cp_model.CpModel()
    height = m.NewIntVar(lb, max(lb, upper), "H")
    xs, ys, offsets = [], [], {}
    for i in live:
        b = buffers[i]
        a = max(1, b.align)
        k = m.NewIntVar(0, max(0, upper - b.size) // a, f"k{i}")
        off = m.NewIntVar(0, max(0, upper - b.size), f"o{i}")
        m.Add(off == a * k)
        m.Add(off + b.size <= height)
        xs.append(m.NewFixedSizeIntervalVar(b.start, b.end - b.start, f"t{i}"))
        ys.append(m.NewFixedSizeIntervalVar(off, b.size, f"m{i}"))
        offsets[i] = off
        if hint is not None:
            m.AddHint(off, hint[i])
    m.AddNoOverlap2D(xs, ys)
    m.Minimize(height)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.max_time_in_seconds = time_limit
    if deterministic_time is not None:
        solver.parameters.max_deterministic_time = deterministic_time
    code = solver.Solve(m)
    status = solver.StatusName(code)
    seconds = solver.WallTime()
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        offs = tuple(solver.Value(offsets[i]) if i in offsets else 0 for i in range(len(buffers)))
        size = max(max(o + b.size for o, b in zip(offs, buffers)), lb)
        bound = size if code == cp_model.OPTIMAL else max(lb, int(solver.BestObjectiveBound()))
        return CpsatResult(status, size, bound, offs, seconds)
    return CpsatResult(status, None, lb, None, seconds)

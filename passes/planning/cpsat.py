"""A second opinion: the planning problem as a CP-SAT model (OR-Tools, an optional extra).

Not the default path of any planner: tests and ``benchmarks/planners.py`` use it to
certify relaxc's optima on small and challenging instances. Install it with
``pip install relaxc[cpsat]`` (``ortools>=9.8``); :func:`available` says whether it is.

The model. Lifetimes are fixed, so only offsets are decided: two buffers conflict iff
their lifetimes intersect, and the buffers live at once form cliques. The maximal ones
(*sections*: the buffers live just before each end time where some buffer begins, as in
the exact search) cover every conflicting pair, so one ``NoOverlap`` of the memory
intervals ``[offset, offset + size)`` per section states the whole problem, and CP-SAT's
disjunctive propagation (edge finding, energy) works on each clique. (``model="2d"``
states it as one ``NoOverlap2D`` over the boxes ``[start, end) x [offset, offset +
size)`` instead, the textbook form; it proves far less within the same time.) A height
``H`` with ``offset + size <= H`` is minimised.

Everything is in *grains*, the gcd of the sizes and alignments: every canonical plan
(each buffer at 0 or on top of a conflicting one, aligned) has its offsets and height on
multiples of it, so nothing is lost and the domains shrink by that factor (1,024 on
MiniMalloc's instances). Buffers identical in lifetime, size and alignment are ordered
by index (symmetry breaking). ``hint`` (a plan, e.g. relaxc's) warm-starts the search.

To certify a plan's height ``U``, ask for ``upper=U - grain`` (:func:`certify`):
INFEASIBLE proves ``U`` optimal. When ``U`` is the lower bound (most bytes live at
once) there is nothing to prove. Buffers that need no memory (zero size, empty lifetime)
are left out and sit at 0; a buffer with an empty lifetime still has to fit under ``H``.

Runs are single-threaded and stopped by CP-SAT's *deterministic* time when asked (its
work measure, not the clock), so they repeat; ``time_limit`` (wall seconds) is a cap on top.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Sequence

from .checker import check_plan
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


def sections(buffers: Sequence[Buffer], live: Sequence[int]) -> list[list[int]]:
    """The maximal sets of buffers (indices from ``live``) live at once: for every end
    time, the buffers live just before it, kept when some buffer begins since the end
    time before (otherwise the set lies inside the previous one)."""
    ends = sorted({buffers[i].end for i in live})
    first = {i: bisect.bisect_right(ends, buffers[i].start) for i in live}
    last = {i: bisect.bisect_right(ends, buffers[i].end) for i in live}
    kept = sorted(set(first.values()))
    out: list[list[int]] = [[] for _ in kept]
    for i in live:
        for k in range(bisect.bisect_left(kept, first[i]), bisect.bisect_left(kept, last[i])):
            out[k].append(i)
    return [s for s in out if len(s) > 1]


def solve(
    buffers: Sequence[Buffer],
    *,
    time_limit: float = 10.0,
    deterministic_time: float | None = None,
    upper: int | None = None,
    hint: Sequence[int] | None = None,
    workers: int = 1,
    model: str = "sections",
) -> CpsatResult:
    """The smallest arena for ``buffers`` by CP-SAT, within the limits given. ``upper``
    caps ``H`` (below a known plan's height, the run decides whether anything lower
    exists); ``hint`` is a plan to start from (used when it fits under ``upper``)."""
    from ortools.sat.python import cp_model

    if model not in ("sections", "2d"):
        raise ValueError(f"unknown model {model!r}")
    lb = max([lower_bound(buffers)] + [b.size for b in buffers if b.start >= b.end] + [0])
    live = [i for i, b in enumerate(buffers) if b.size > 0 and b.start < b.end]
    if upper is None:
        upper = 0
        for b in buffers:  # no reuse at all is always feasible
            a = max(1, b.align)
            upper = -(-upper // a) * a + b.size
    if upper < lb:
        return CpsatResult("INFEASIBLE", None, lb, None, 0.0)
    if not live:
        return CpsatResult("OPTIMAL", lb, lb, tuple(0 for _ in buffers), 0.0)
    g = math.gcd(*(buffers[i].size for i in live), *(max(1, buffers[i].align) for i in live))
    lo_u, hi_u = -(-lb // g), upper // g
    if hi_u < lo_u:
        return CpsatResult("INFEASIBLE", None, lb, None, 0.0)
    m = cp_model.CpModel()
    height = m.new_int_var(lo_u, hi_u, "H")
    offsets: dict[int, cp_model.IntVar] = {}
    ys: dict[int, cp_model.IntervalVar] = {}
    use_hint = hint is not None and all(
        hint[i] % g == 0 and hint[i] + buffers[i].size <= upper for i in live
    )
    for i in live:
        b = buffers[i]
        z = b.size // g
        step = max(1, b.align) // math.gcd(max(1, b.align), g)  # offsets: multiples of this
        if step > 1:
            k = m.new_int_var(0, (hi_u - z) // step, f"k{i}")
            off = m.new_int_var(0, hi_u - z, f"o{i}")
            m.add(off == step * k)
        else:
            off = m.new_int_var(0, hi_u - z, f"o{i}")
        m.add(off + z <= height)
        ys[i] = m.new_fixed_size_interval_var(off, z, f"m{i}")
        offsets[i] = off
        if use_hint and hint is not None:
            m.add_hint(off, hint[i] // g)
    if use_hint and hint is not None:
        m.add_hint(height, max(-(-(hint[i] + buffers[i].size) // g) for i in live))
    if model == "sections":
        for sec in sections(buffers, live):
            m.add_no_overlap([ys[i] for i in sec])
    else:
        xs = [
            m.new_fixed_size_interval_var(buffers[i].start, buffers[i].end - buffers[i].start, "")
            for i in live
        ]
        m.add_no_overlap_2d(xs, [ys[i] for i in live])
    # Identical buffers (lifetime, size, alignment) in index order: any plan can swap them.
    seen: dict[tuple[int, int, int, int], int] = {}
    for i in live:
        b = buffers[i]
        key = (b.start, b.end, b.size, max(1, b.align))
        if key in seen:
            m.add(offsets[seen[key]] + b.size // g <= offsets[i])
        seen[key] = i
    m.minimize(height)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.max_time_in_seconds = time_limit
    if deterministic_time is not None:
        solver.parameters.max_deterministic_time = deterministic_time
    code = solver.Solve(m)
    status = solver.StatusName(code)
    seconds = solver.WallTime()
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        offs = tuple(
            solver.Value(offsets[i]) * g if i in offsets else 0 for i in range(len(buffers))
        )
        size = max(max(o + b.size for o, b in zip(offs, buffers)), lb)
        bound = size if code == cp_model.OPTIMAL else max(lb, int(solver.BestObjectiveBound()) * g)
        return CpsatResult(status, size, bound, offs, seconds)
    if code == cp_model.INFEASIBLE:
        return CpsatResult(status, None, max(lb, (hi_u + 1) * g), None, seconds)
    bound = max(lb, int(solver.BestObjectiveBound()) * g)
    if use_hint and hint is not None and not check_plan(buffers, hint, upper):
        # CP-SAT did not complete the hint in time: the hint itself is the best known.
        size = max([lb] + [hint[i] + buffers[i].size for i in live])
        return CpsatResult("FEASIBLE", size, bound, tuple(hint), seconds)
    return CpsatResult(status, None, bound, None, seconds)


def certify(
    buffers: Sequence[Buffer],
    offsets: Sequence[int],
    size: int,
    *,
    time_limit: float = 10.0,
    deterministic_time: float | None = None,
    workers: int = 1,
) -> CpsatResult:
    """Whether the plan ``offsets`` of height ``size`` is optimal: OPTIMAL (with the plan
    itself, when ``size`` is the lower bound or no lower height exists), FEASIBLE or
    OPTIMAL with a lower plan (it was not optimal), or UNKNOWN within the limits. The
    plan is first checked to lie on the grains (else the question is the plain minimum,
    warm-started from it)."""
    live = [i for i, b in enumerate(buffers) if b.size > 0 and b.start < b.end]
    lb = max([lower_bound(buffers)] + [b.size for b in buffers if b.start >= b.end] + [0])
    if size <= lb:
        return CpsatResult("OPTIMAL", size, size, tuple(offsets), 0.0)
    g = math.gcd(*(buffers[i].size for i in live), *(max(1, buffers[i].align) for i in live))
    below = solve(
        buffers,
        time_limit=time_limit,
        deterministic_time=deterministic_time,
        upper=-(-size // g) * g - g,
        workers=workers,
    )
    if below.status == "INFEASIBLE":
        return CpsatResult("OPTIMAL", size, size, tuple(offsets), below.seconds)
    if below.size is not None:
        return below  # a lower plan: the one given was not optimal
    return CpsatResult("UNKNOWN", size, below.bound, tuple(offsets), below.seconds)

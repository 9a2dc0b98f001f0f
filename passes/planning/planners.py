"""The entry point of memory planning: ``plan_buffers(buffers, algorithm)``.

Planners (each returns a :class:`Plan` whose offsets follow the input order):

* ``none`` -- no reuse: every buffer its own block, one after another, aligned.
* ``greedy-size`` -- largest first (ties: earlier start, then input order), first fit by
  address among the placed buffers whose lifetimes intersect.
* ``greedy-conflict`` -- the same first fit, most conflicting bytes first.
* ``best`` -- both greedy plans; then, for the component of the conflict graph that sets
  the arena size, first fit and best fit over more orders and a MiniMalloc-style exact
  search (:mod:`.search`) within ``time_limit``. Never worse than ``greedy-size``; stops
  early when the arena equals the lower bound (the most bytes live at once).

Buffers with zero size or an empty lifetime need no memory and sit at offset 0 (except
under ``none``, which lays out every buffer).

``best`` is deterministic for a given ``seed`` as long as the time limit is not what stops
it: its work is bounded by counts (orders tried, search work) proportional to
``time_limit``; the clock is only a safety net for slow or loaded machines.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Sequence

from .greedy import Instance, components, conflict_order, max_live, place, prepare, size_order, subinstance
from .model import Buffer, Plan
from .search import minimize

PLANNERS = ("none", "greedy-size", "greedy-conflict", "best")

# Search work (nodes plus candidates examined) per second of time limit: a little less
# than this machine does in a second, so the count, not the clock, usually ends it.
WORK_PER_SECOND = 30_000
# Orders tried by the first-fit/best-fit stage of ``best`` (each both ways), and the
# share of the time limit it may take at most.
HEURISTIC_ORDERS = 16
HEURISTIC_SHARE = 0.1
# Components larger than this are not searched (a search node costs O(n log n), and
# the search nests a generator per placed buffer).
SEARCH_MAX_BUFFERS = 2000


def plan_buffers(buffers: Sequence[Buffer], algorithm: str = "best", *, time_limit: float = 2.0,
                 seed: int = 0) -> Plan:
    """Offsets for ``buffers`` in one arena, by ``algorithm`` (one of :data:`PLANNERS`)."""
    if algorithm not in PLANNERS:
        raise ValueError(f"unknown planner {algorithm!r}; expected one of {', '.join(PLANNERS)}")
    if time_limit < 0:
        raise ValueError("time_limit must not be negative")
    if algorithm == "none":
        return _no_reuse(buffers)
    if algorithm == "best":
        return plan_best(buffers, time_limit=time_limit, seed=seed)
    inst = prepare(buffers)
    order = size_order(inst) if algorithm == "greedy-size" else conflict_order(inst)
    return Plan.from_offsets(buffers, inst.expand(place(inst, order), len(buffers)), algorithm)


def _no_reuse(buffers: Sequence[Buffer]) -> Plan:
    offsets = []
    top = 0
    for b in buffers:
        a = max(1, b.align)
        top = -(-top // a) * a
        offsets.append(top)
        top += b.size
    return Plan.from_offsets(buffers, offsets, "none")


def _stacked(inst: Instance, members: Sequence[int]) -> list[int]:
    """Offsets of ``members`` one after another in input order (aligned)."""
    offsets = [0] * len(members)
    top = 0
    for k in sorted(range(len(members)), key=members.__getitem__):
        a = inst.align[members[k]]
        top = -(-top // a) * a
        offsets[k] = top
        top += inst.size[members[k]]
    return offsets


@dataclass
class _Part:
    """A component of the conflict graph and the best placement known for it."""

    members: list[int]  # indices into the instance
    height: int
    method: str
    offsets: list[int]  # same order as members
    tried: bool = False


def plan_best(buffers: Sequence[Buffer], *, time_limit: float = 2.0, seed: int = 0,
              trace: list[str] | None = None) -> Plan:
    """The ``best`` planner; ``trace``, if given, collects a line per step taken."""
    start = time.perf_counter()
    # Leave a little time for assembling the plan.
    deadline = start + max(0.0, time_limit * 0.98 - 0.01)
    rng = random.Random(seed)
    inst = prepare(buffers)
    # No plan beats the most bytes live at once, and no component need go below that.
    # (A buffer with an empty lifetime sits at 0 but still has to fit in the arena.)
    goal = max([max_live(inst)] + [b.size for b in buffers if b.start >= b.end])
    by_method = [("greedy-size", place(inst, size_order(inst)))]
    if inst.height(by_method[0][1]) <= goal:  # optimal already (the common case)
        _log(trace, f"{inst.n} buffers; greedy-size meets the lower bound {goal}")
        return Plan.from_offsets(buffers, inst.expand(by_method[0][1], len(buffers)), "best(greedy-size)")
    by_method.append(("greedy-conflict", place(inst, conflict_order(inst))))
    parts: list[_Part] = []
    for members in components(inst):
        # The greedy plans, and no reuse at all (so best <= naive_total even when
        # alignment makes first fit pad more than the input order does).
        candidates = [(method, [offsets[i] for i in members]) for method, offsets in by_method]
        candidates.append(("none", _stacked(inst, members)))
        best: _Part | None = None
        for method, sub in candidates:
            h = max(o + inst.size[i] for o, i in zip(sub, members))
            if best is None or h < best.height:
                best = _Part(members, h, method, sub)
        assert best is not None
        parts.append(best)
    budget = int(time_limit * WORK_PER_SECOND)
    _log(trace, f"{inst.n} buffers in {len(parts)} components; lower bound {goal}; "
                f"greedy {max((p.height for p in parts), default=0)}")
    while parts:
        part = max(parts, key=lambda p: p.height)  # the one that sets the arena
        if part.height <= goal or part.tried or time.perf_counter() > deadline:
            break
        part.tried = True
        budget -= _improve(part, subinstance(inst, part.members), goal, start, deadline,
                           time_limit, rng, budget, trace)
    offsets = [0] * inst.n
    for p in parts:
        for i, o in zip(p.members, p.offsets):
            offsets[i] = o
    winner = max(parts, key=lambda p: p.height).method if parts else "greedy-size"
    return Plan.from_offsets(buffers, inst.expand(offsets, len(buffers)), f"best({winner})")


def _improve(part: _Part, sub: Instance, goal: int, start: float, deadline: float, time_limit: float,
             rng: random.Random, budget: int, trace: list[str] | None) -> int:
    """Try to lower ``part.height``: more greedy orders, then the exact search. Returns
    the search work used."""
    def consider(method: str, offsets: list[int]) -> None:
        h = sub.height(offsets)
        if h < part.height:
            _log(trace, f"  {method}: {part.height} -> {h}")
            part.height, part.method, part.offsets = h, method, offsets

    _log(trace, f"component of {sub.n} buffers at {part.height} ({part.method})")
    size, first, last = sub.size, sub.start, sub.end
    length = [e - s for s, e in zip(first, last)]
    weight = [size[i] + sum(size[j] for j in sub.nbrs[i]) for i in range(sub.n)]
    keys = [
        lambda i: (-size[i], first[i], i),               # size (greedy-size, for best fit)
        lambda i: (-size[i] * length[i], i),             # breadth: size x lifetime
        lambda i: (-size[i], -length[i], i),             # size, then lifetime
        lambda i: (-length[i], -size[i], i),             # lifetime
        lambda i: (first[i], -size[i], i),               # start time
        lambda i: (-weight[i], -size[i], i),             # conflicting bytes
    ]
    stage_end = min(deadline, start + HEURISTIC_SHARE * time_limit)
    for k in range(HEURISTIC_ORDERS):
        if part.height <= goal or time.perf_counter() > stage_end:
            break
        if k < len(keys):
            order = sorted(range(sub.n), key=keys[k])
        else:  # sizes or breadths with multiplicative noise
            base = size if k % 2 else [s * n for s, n in zip(size, length)]
            noisy = [b * rng.uniform(0.7, 1.3) for b in base]
            order = sorted(range(sub.n), key=lambda i: (-noisy[i], i))
        consider("first-fit", place(sub, order))
        consider("best-fit", place(sub, order, best_fit=True))
    if part.height <= goal or sub.n > SEARCH_MAX_BUFFERS or budget <= 0:
        return 0
    steps: list[str] | None = [] if trace is not None else None
    found, _, used = minimize(sub, goal, part.height, budget, deadline, steps)
    for line in steps or ():
        _log(trace, "  " + line)
    if found is not None:
        consider("search", found)
    return used


def _log(trace: list[str] | None, line: str) -> None:
    if trace is not None:
        trace.append(line)

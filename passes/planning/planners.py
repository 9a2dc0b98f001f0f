"""The entry point of memory planning: ``plan_buffers(buffers, algorithm)``.

Planners (each returns a :class:`Plan` whose offsets follow the input order):

* ``none`` -- no reuse: every buffer its own block, one after another, aligned.
* ``greedy-size`` -- largest first (ties: earlier start, then input order), first fit by
  address among the placed buffers whose lifetimes intersect. On huge inputs (conflict
  lists past a pair budget), a sweep over time places everything (the tightest holes,
  next to the neighbour dying closest; O(n log n), each component from an empty arena),
  then first fit re-plans windows of time around the buffer on top of the arena while
  their pairs fit (see :mod:`.greedy`).
* ``greedy-conflict`` -- the same, most conflicting bytes first.
* ``best`` -- ``greedy-size``, then within a work budget derived from ``time_limit``:
  ``greedy-conflict`` (past the pair budget: the sweep backwards in time, then
  ``greedy-conflict``'s sweep); for the
  component of the time axis that sets the arena size, first fit and best fit over more
  orders, a MiniMalloc-style exact search (on the times given and on runs of births and
  deaths merged, see :func:`.search.merged_runs`), and with the last of the work a local search
  that re-searches windows of time around the buffers that stick out, the rest fixed
  (:func:`.search.repair`). Never worse than ``greedy-size``; stops early when the arena
  equals the best proven lower bound.

Buffers with zero size or an empty lifetime need no memory and sit at offset 0 (except
under ``none``, which lays out every buffer).

*Determinism.* Every planner's output depends on the input and the options only. ``best``
counts its work (search nodes and candidates, conflict pairs built and visited) against
``time_limit * WORK_PER_SECOND``; a CPU clock stops it only ``CLOCK_FACTOR`` times past
the time limit, and then ``Plan.stopped_by_clock`` says so. Everything counts against
the budget, the greedy pass it starts from included: a greedy pass costs
``n / SETUP_PER_WORK``, a sweep ``n / SWEEP_PER_WORK`` more, every conflict pair
``1 / PAIRS_PER_WORK``. So ``best`` takes about ``time_limit`` or, when greedy-size alone
costs more (a million buffers), what greedy-size costs, and then it is greedy-size.

*Bounds.* Every plan carries ``proven_bound`` (the most bytes live at once, or more when
the search proved lower capacities infeasible for the component that sets the arena) and
``optimal`` (the arena equals it).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import greedy as _greedy
from .greedy import (
    Instance,
    Scan,
    conflict_weights,
    greedy,
    place,
    prepare,
    scan,
    subinstance,
)
from .model import Buffer, Plan
from .search import minimize, repair

PLANNERS = ("none", "greedy-size", "greedy-conflict", "best")

# Search work (search.py's cost model: about 16 us a unit on the machine it was fitted on)
# per second of time limit: a little less than that machine does in a CPU second, so the
# count, not the clock, ends it. A fixed count keeps plans the same on every machine; on a
# faster one `best` ends early (4.5 us a unit measured on one: D's 2 s take 0.65 s).
WORK_PER_SECOND = 60_000
# Conflict pairs built or visited by first fit per unit of work (about a microsecond each).
PAIRS_PER_WORK = 15
# Buffers the sweep places per unit of work (4-8 us each: more where more holes compete).
SWEEP_PER_WORK = 2
# Buffers per unit of work of a greedy pass's set-up (arrays, scans, sorts, the plan).
SETUP_PER_WORK = 10
# The safety clock: CPU seconds past which a search stops whatever its budget says.
CLOCK_FACTOR = 10.0
# Orders tried by the first-fit/best-fit stage of ``best`` (each both ways), and the
# share of the budget it may take at most.
HEURISTIC_ORDERS = 16
HEURISTIC_SHARE = 0.05
# Components larger than this are not searched (a search node costs O(n log n), and
# the search nests a generator per placed buffer).
SEARCH_MAX_BUFFERS = 2000
# A buffer is small when this many of it fit in the lower bound; when a component holds
# both kinds, the large ones are planned first with BIG_FIRST_SHARE of the work left and
# the small ones fill the gaps (see _large_first). Only when small buffers are at least a
# quarter of the component (as in programs, where every reduction leaves one: a few small
# ones in an instance change little) and the small ones live at once stay within
# 1/SMALL_LIVE_FACTOR of the lower bound (filler, not a second problem).
SMALL_FACTOR = 4096
SMALL_SHARE = 4
SMALL_LIVE_FACTOR = 64
BIG_FIRST_SHARE = 0.8
# Conflict-list entries per unit of work: the filler's first fit visits the small ones'
# lists (0.44-0.50 us an entry, timed on I.rx, J.rx, K.rx), the large ones' sub-instance
# filters theirs (0.08-0.12 us an entry).
FILL_PER_WORK = 30
FILTER_PER_WORK = 150
# The share of the work left that the exact search (minimize) may take; the rest goes to
# the local search that lowers its best plan window by window (repair).
SEARCH_SHARE = 0.85


def plan_buffers(
    buffers: Sequence[Buffer],
    algorithm: str = "best",
    *,
    time_limit: float = 2.0,
    seed: int = 0,
    capacity: int = 0,
) -> Plan:
    """Offsets for ``buffers`` in one arena, by ``algorithm`` (one of :data:`PLANNERS`).
    ``capacity`` (0: none): bytes the arena should fit, which ``best`` asks for (the
    greedy planners ignore it)."""
    if algorithm not in PLANNERS:
        raise ValueError(f"unknown planner {algorithm!r}; expected one of {', '.join(PLANNERS)}")
    if time_limit < 0:
        raise ValueError("time_limit must not be negative")
    if capacity < 0:
        raise ValueError("capacity must not be negative")
    if algorithm == "best":
        return plan_best(buffers, time_limit=time_limit, seed=seed, capacity=capacity)
    inst = prepare(buffers)
    sc = scan(inst)
    bound = _floor(buffers, sc)
    if algorithm == "none":
        return _no_reuse(buffers, bound)
    offsets, _ = greedy(inst, algorithm, sc)
    return Plan.from_offsets(
        buffers, inst.expand(offsets, len(buffers)), algorithm, proven_bound=bound
    )


def greedy_work(n: int, pairs: int, swept: bool) -> int:
    """The work a greedy pass over ``n`` buffers costs: its set-up (scans, orders, the plan
    written out), the sweep when it runs, and the conflict pairs first fit builds and
    visits."""
    return n // SETUP_PER_WORK + (n // SWEEP_PER_WORK if swept else 0) + pairs // PAIRS_PER_WORK


def _floor(buffers: Sequence[Buffer], sc: Scan) -> int:
    """No plan beats the most bytes live at once; a buffer with an empty lifetime sits
    at 0 but still has to fit in the arena."""
    return max([sc.max_live] + [b.size for b in buffers if b.start >= b.end])


def _no_reuse(buffers: Sequence[Buffer], bound: int) -> Plan:
    offsets = []
    top = 0
    for b in buffers:
        a = max(1, b.align)
        top = -(-top // a) * a
        offsets.append(top)
        top += b.size
    return Plan.from_offsets(buffers, offsets, "none", proven_bound=bound)


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


def _stacked_height(inst: Instance, members: Sequence[int]) -> int:
    """The height of :func:`_stacked` without building it (no sort when in order)."""
    order = members if all(a < b for a, b in zip(members, members[1:])) else sorted(members)
    top = 0
    align, size = inst.align, inst.size
    for i in order:
        a = align[i]
        top = (-(-top // a) * a if a > 1 else top) + size[i]
    return top


def _heights(inst: Instance, sc: Scan, offsets: Sequence[int] | None) -> list[int]:
    """The height of each component of ``sc`` under ``offsets``; without offsets, the sum
    of its sizes."""
    comps = sc.components
    size = inst.size
    if inst.n < 4096 or sum(size) >= 1 << 61 or (offsets is not None and max(offsets) >= 1 << 61):
        if offsets is None:
            return [sum(size[i] for i in m) for m in comps]
        return [max(offsets[i] + size[i] for i in m) for m in comps]
    order = np.array(sc.by_start, dtype=np.int64)
    firsts = np.cumsum([0] + [len(m) for m in comps[:-1]])
    sz = np.array(size, dtype=np.int64)[order]
    if offsets is None:
        return np.add.reduceat(sz, firsts).tolist()
    tops = np.array(offsets, dtype=np.int64)[order] + sz
    return np.maximum.reduceat(tops, firsts).tolist()


@dataclass
class _Part:
    """A component of the time axis and the best placement known for it."""

    members: list[int]  # indices into the instance
    pairs: int  # conflicting pairs among them
    height: int
    method: str
    offsets: list[int]  # same order as members
    tried: bool = False


class _Budget:
    """Work left, and the safety clock."""

    def __init__(self, time_limit: float) -> None:
        self.left = int(time_limit * WORK_PER_SECOND)
        self.used = 0
        self.deadline = time.process_time() + CLOCK_FACTOR * time_limit
        self.clock = False

    def spend(self, work: int) -> None:
        self.left -= work
        self.used += work

    def share(self, fraction: float) -> "_Budget":
        """A budget of ``fraction`` of the work left, on the same clock."""
        child = _Budget(0.0)
        child.left = int(self.left * fraction)
        child.deadline = self.deadline
        return child

    def can(self, work: int) -> bool:
        """Whether ``work`` more fits (and the safety clock has not run out)."""
        if time.process_time() > self.deadline:
            self.clock = True
            return False
        return work <= self.left


def plan_best(
    buffers: Sequence[Buffer],
    *,
    time_limit: float = 2.0,
    seed: int = 0,
    trace: list[str] | None = None,
    capacity: int = 0,
) -> Plan:
    """The ``best`` planner; ``trace``, if given, collects a line per step taken;
    ``capacity`` (0: none), bytes the arena should fit: the search asks for it beside the
    lower bound (:func:`.search.minimize`'s ``target``), then goes on below what it finds."""
    budget = _Budget(time_limit)
    inst = prepare(buffers)
    sc = scan(inst)
    offsets, bound, method = _best(
        inst, sc, _floor(buffers, sc), budget, random.Random(seed), trace, capacity
    )
    _log(trace, f"work {budget.used} of {int(time_limit * WORK_PER_SECOND)}")
    return Plan.from_offsets(
        buffers,
        inst.expand(offsets, len(buffers)),
        f"best({method})",
        proven_bound=bound,
        stopped_by_clock=budget.clock,
    )


def _best(
    inst: Instance,
    sc: Scan,
    goal: int,
    budget: _Budget,
    rng: random.Random,
    trace: list[str] | None,
    capacity: int = 0,
) -> tuple[list[int], int, str]:
    """Offsets, the proven lower bound and the winning method for ``inst``; ``goal`` is a
    lower bound already known; ``capacity`` as in :func:`plan_best`."""
    base, pairs = greedy(inst, "greedy-size", sc)
    swept = sum(sc.pairs) > _greedy.PAIR_BUDGET
    # Everything counts, greedy-size too: best takes no longer than its budget, or than
    # greedy-size when that alone costs more (then it is greedy-size).
    budget.spend(greedy_work(inst.n, pairs, swept))
    if inst.height(base) <= goal:  # optimal already (the common case)
        _log(trace, f"{inst.n} buffers; greedy-size meets the lower bound {goal}")
        return base, goal, "greedy-size"
    if budget.left <= 0:  # greedy-size took it all (a million buffers): nothing more
        _log(trace, f"{inst.n} buffers; greedy-size used the budget")
        return base, goal, "greedy-size"
    by_method = [("greedy-size", base)]
    # greedy-conflict: first fit on the conflict lists built already. Past the pair budget,
    # the sweep again backwards in time, then greedy-conflict's sweep, each with windows
    # re-planned with the pairs the budget still affords: backwards first, because it was
    # the lower of the two on 7 of 9 random sets (10k d2500, 100k d100 and d2500, three
    # seeds each) and at 100k d2500 the budget affords only one of them.
    fixed = greedy_work(inst.n, 0, swept)
    if not swept and budget.can(greedy_work(inst.n, sum(sc.pairs), False)):
        other, pairs = greedy(inst, "greedy-conflict", sc)
        budget.spend(greedy_work(inst.n, pairs, False))
        by_method.append(("greedy-conflict", other))
    if swept and budget.can(fixed):
        # An online placement depends on the direction, and either is valid (lifetimes
        # overlap the same way mirrored).
        mirror = Instance(
            inst.index, [-e for e in inst.end], [-s for s in inst.start], inst.size, inst.align
        )
        allowed = min(_greedy.PAIR_BUDGET, (budget.left - fixed) * PAIRS_PER_WORK)
        back, pairs = greedy(mirror, "greedy-size", scan(mirror), pair_budget=allowed)
        budget.spend(fixed + pairs // PAIRS_PER_WORK)
        by_method.append(("sweep-backwards", back))
    if swept and budget.can(fixed):
        allowed = min(_greedy.PAIR_BUDGET, (budget.left - fixed) * PAIRS_PER_WORK)
        other, pairs = greedy(inst, "greedy-conflict", sc, pair_budget=allowed)
        budget.spend(fixed + pairs // PAIRS_PER_WORK)
        by_method.append(("greedy-conflict", other))
    _log(trace, "greedy plans: " + ", ".join(name for name, _ in by_method))
    heights = [_heights(inst, sc, offsets) for _, offsets in by_method]
    totals = _heights(inst, sc, None)
    parts: list[_Part] = []
    for k, (members, count) in enumerate(zip(sc.components, sc.pairs)):
        # The greedy plans, and no reuse at all (so best <= naive_total even when
        # alignment makes first fit pad more than the input order does).
        m = min(range(len(by_method)), key=lambda j: (heights[j][k], j))
        h = heights[m][k]
        method, offsets = by_method[m]
        best = _Part(members, count, h, method, [offsets[i] for i in members])
        # Stacking is at least the sum of the sizes: only worth trying when below.
        if totals[k] < h and _stacked_height(inst, members) < h:
            stacked = _stacked(inst, members)
            h = max(o + inst.size[i] for o, i in zip(stacked, members))
            best = _Part(members, count, h, "none", stacked)
        parts.append(best)
    _log(
        trace,
        f"{inst.n} buffers in {len(parts)} components; lower bound {goal}; "
        f"greedy {max((p.height for p in parts), default=0)}; budget {budget.left}",
    )
    bound = goal
    while parts:
        part = max(parts, key=lambda p: p.height)  # the one that sets the arena
        if part.height <= bound or part.tried:
            break
        part.tried = True
        # Building its conflict lists is the least the improvement costs.
        if not budget.can(part.pairs // PAIRS_PER_WORK):
            _log(
                trace,
                f"component of {len(part.members)} buffers ({part.pairs} conflicting pairs): "
                f"past the budget",
            )
            break
        budget.spend(part.pairs // PAIRS_PER_WORK)
        bound = max(
            bound,
            _improve(part, subinstance(inst, part.members), bound, budget, rng, trace, capacity),
        )
    offsets = [0] * inst.n
    for p in parts:
        for i, o in zip(p.members, p.offsets):
            offsets[i] = o
    winner = max(parts, key=lambda p: p.height).method if parts else "greedy-size"
    return offsets, bound, winner


def _improve(
    part: _Part,
    sub: Instance,
    goal: int,
    budget: _Budget,
    rng: random.Random,
    trace: list[str] | None,
    capacity: int = 0,
) -> int:
    """Try to lower ``part.height``: more greedy orders, then the exact search (asking for
    ``capacity`` first, if any). Returns the best lower bound proven for the part (at least
    ``goal``)."""

    def consider(method: str, offsets: list[int]) -> None:
        h = sub.height(offsets)
        if h < part.height:
            _log(trace, f"  {method}: {part.height} -> {h}")
            part.height, part.method, part.offsets = h, method, offsets

    _log(trace, f"component of {sub.n} buffers at {part.height} ({part.method})")
    size, first, last = sub.size, sub.start, sub.end
    length = [e - s for s, e in zip(first, last)]
    # Each first-fit pass visits every conflict twice and sorts a buffer's ranges.
    per_order = 2 * max(1, (2 * part.pairs + sub.n) // PAIRS_PER_WORK)
    stage = int(HEURISTIC_SHARE * budget.left)
    weight = conflict_weights(sub) if per_order <= stage else []
    keys = [
        lambda i: (-size[i], first[i], i),  # size (greedy-size, for best fit)
        lambda i: (-size[i] * length[i], i),  # breadth: size x lifetime
        lambda i: (-size[i], -length[i], i),  # size, then lifetime
        lambda i: (-length[i], -size[i], i),  # lifetime
        lambda i: (first[i], -size[i], i),  # start time
        lambda i: (-weight[i], -size[i], i),  # conflicting bytes
    ]
    for k in range(HEURISTIC_ORDERS):
        if part.height <= goal or per_order > stage or not budget.can(per_order):
            break
        stage -= per_order
        budget.spend(per_order)
        if k < len(keys):
            order = sorted(range(sub.n), key=keys[k])
        else:  # sizes or breadths with multiplicative noise
            base = size if k % 2 else [s * n for s, n in zip(size, length)]
            noisy = [b * rng.uniform(0.7, 1.3) for b in base]
            order = sorted(range(sub.n), key=lambda i: (-noisy[i], i))
        consider("first-fit", place(sub, order))
        consider("best-fit", place(sub, order, best_fit=True))
    bound = goal
    if part.height > goal:
        filled = _large_first(sub, goal, budget, rng, trace, capacity)
        if filled is not None:
            offsets, big_bound = filled
            # A lower bound for the large ones holds for the whole: they are a subset.
            bound = max(bound, big_bound)
            consider("large-first", offsets)
    if part.height <= bound or sub.n > SEARCH_MAX_BUFFERS or not budget.can(1):
        return bound
    steps: list[str] | None = [] if trace is not None else None
    out = minimize(
        sub, bound, part.height, int(budget.left * SEARCH_SHARE), budget.deadline, steps, capacity
    )
    budget.spend(out.work)
    budget.clock = budget.clock or out.stopped_by_clock
    for line in steps or ():
        _log(trace, "  " + line)
    if out.offsets is not None:
        consider("search", out.offsets)
    bound = max(bound, out.bound)
    if part.height > bound and budget.can(1):
        # What is left: lower the best plan window by window (see search.repair).
        steps = [] if trace is not None else None
        rep = repair(sub, part.offsets, bound, budget.left, budget.deadline, steps)
        budget.spend(rep.work)
        budget.clock = budget.clock or rep.stopped_by_clock
        for line in steps or ():
            _log(trace, "  " + line)
        if rep.offsets is not None:
            consider("repair", rep.offsets)
    return bound


def small_buffers(sub: Instance, goal: int, budget: _Budget | None = None) -> list[int] | None:
    """The buffers of ``sub`` small enough to be filler for the lower bound ``goal``, or
    None when they are not worth planning apart: none or all of them small, fewer than
    1/SMALL_SHARE of the buffers, or more than 1/SMALL_LIVE_FACTOR of ``goal`` live at
    once. The scan that finds the last is counted on ``budget``."""
    small = [k for k in range(sub.n) if sub.size[k] * SMALL_FACTOR <= goal]
    if not small or len(small) == sub.n or len(small) * SMALL_SHARE < sub.n:
        return None
    if budget is not None:
        budget.spend(len(small) // SETUP_PER_WORK)
    if scan(subinstance(sub, small)).max_live * SMALL_LIVE_FACTOR > goal:
        return None
    return small


def _large_first(
    sub: Instance,
    goal: int,
    budget: _Budget,
    rng: random.Random,
    trace: list[str] | None,
    capacity: int = 0,
) -> tuple[list[int], int] | None:
    """Small buffers as filler: plan the large ones of ``sub`` alone with the whole machinery
    (:func:`_best` with BIG_FIRST_SHARE of the work left), then first fit the small ones,
    largest first, into the gaps (the lowest aligned offset clear of every placed
    neighbour; above them only where no gap holds one). Returns the offsets and the large
    ones' proven lower bound (a bound for ``sub`` too), or None when ``sub`` has no
    filler (:func:`small_buffers`) or the budget cannot afford the set-up. Counted: the
    large ones' conflict lists filtered, the filler's first fit, the scans."""
    small = small_buffers(sub, goal, budget)
    if small is None:
        return None
    nbrs = sub.nbrs  # built (and counted) by the caller
    small_set = set(small)
    large = [k for k in range(sub.n) if k not in small_set]
    set_up = (
        1
        + sub.n // SETUP_PER_WORK
        + sum(len(nbrs[k]) for k in large) // FILTER_PER_WORK
        + sum(len(nbrs[k]) for k in small) // FILL_PER_WORK
    )
    if not budget.can(set_up):
        return None
    budget.spend(set_up)
    big = subinstance(sub, large)
    child = budget.share(BIG_FIRST_SHARE)
    _log(trace, f"  large buffers first: {len(large)} of {sub.n}")
    big_scan = scan(big)
    # Their own lower bound: asking the search for more slack than needed makes it
    # harder, not easier (less pruning).
    big_off, big_bound, _ = _best(big, big_scan, big_scan.max_live, child, rng, trace, capacity)
    budget.spend(child.used)
    budget.clock = budget.clock or child.clock
    offsets = [-1] * sub.n
    for k, o in zip(large, big_off):
        offsets[k] = o
    small.sort(key=lambda k: (-sub.size[k], sub.start[k], k))
    return place(sub, small, initial=offsets), big_bound


def _log(trace: list[str] | None, line: str) -> None:
    if trace is not None:
        trace.append(line)

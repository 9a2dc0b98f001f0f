"""Exact search for an arena of a given capacity, after MiniMalloc.

The decision procedure follows the ideas of M. D. Moffitt, "MiniMalloc: A Lightweight
Memory Allocator for Hardware-Accelerated Machine Learning" (ASPLOS 2023); this is an
independent Python implementation, not a port of its code.

*Sections.* Time is cut at every distinct end time; the buffers live just before an end
time form a clique. Only maximal ones are kept (those where some buffer begins), so two
buffers conflict iff they share a section, and every buffer spans a contiguous run of
sections. Each section has a *total*: the bytes of its unplaced buffers.

*Canonical solutions.* Any plan can be pushed down until every buffer sits at 0 or on a
conflicting buffer. Listed by offset, such a plan puts every buffer at the top of its
already placed neighbours (rounded up to its alignment): its *minimum offset*. So the
search only decides which buffer comes next, at its minimum offset, in non-decreasing
(offset, preorder rank) order.

*Pruning.* (1) Every unplaced buffer goes at or above the current offset, so offset +
total <= capacity in every section. (2) In every section the unplaced buffers stack above
the lowest of their minimum offsets, so some unplaced buffer there needs a minimum offset
<= capacity - total. (3) Dominance: nothing is placed at or above the top of an unplaced
buffer sitting at its minimum offset, which could drop into the gap below. (4) Twins
(same lifetime, size and alignment) are placed in index order. (5) When no unplaced
buffer spans a boundary between sections, both sides are solved independently. (6)
Hatless: when every neighbour of the buffer just placed is placed too, its offset (their
top) and so its place in the canonical order are forced; if what follows fails, every
later candidate would leave it below, so the node fails (MiniMalloc's hatless pruning).
(7) Settled buffers: an unplaced buffer none of whose unplaced neighbours has a minimum
offset below its top keeps its minimum offset to the end, so every plan below the node
places it at that key; candidates after it are dropped (it is forced when it comes first).

Checks of (2) are incremental: each section remembers a *witness*, an unplaced buffer
that showed it feasible, and only sections next to the placed buffer are looked at.

*Fixed buffers.* A decision may be given buffers that must sit at given offsets: their
minimum offset starts there and a placement that pushes one higher fails. A plan listed by
offset is still canonical (each free buffer rests on 0 or on a buffer below it, fixed or
not), so the search stays complete. :func:`repair` uses this to re-search windows of time
around the buffers that stick out of a plan, the buffers crossing the window fixed.

*Target.* :func:`minimize` may be given a capacity to ask for (a device's memory): the
decision MiniMalloc answers, a probe of its own beside the minimization (see there).

*Portfolio.* A probe runs several static preorders (by section total, lifetime width,
area, conflicts; MiniMalloc uses "TWA", "TAW" and "WAT") side by side, in slices of
work, as generators: the first to finish answers. Work is counted, not timed, so results
do not depend on the speed of the machine: a cost model in ticks (nodes, the buffers each
node still has to place and the candidates it sorts, candidates, the sections and members
the checks of (2) look at, the neighbours (7) looks at, the keys of every partition's
preorder, and building the sections), fitted to timed decisions so that a unit is about
the same CPU time whatever the instance and the heuristic.
"""

from __future__ import annotations

import bisect
import math
import sys
import time
from dataclasses import dataclass
from operator import add
from typing import Generator, Sequence

from .greedy import Instance, subinstance

# Static preorders: letters name keys, all descending (ties: input order).
#   T: largest section total over the buffer's sections, W: lifetime width,
#   A: area (size x width), Z: size, C: sections spanned, O: conflicts,
#   S: start (earlier first), E: end.
# The search time of each is heavy-tailed and they fail on different instances, so a
# probe runs several, each with a share of the work. The main probe (at the lower
# bound) and side probes (with slack) use different mixes.
# Entries are (view, heuristic, share): view 0 is the times given, 1 the merged runs
# (:func:`merged_runs`; when it equals the given times, its entries join view 0's).
# Measured at 1,048,576 on MiniMalloc's instances (in the units of the cost model
# below), the work the first decision to succeed needs: A 29k (TWA, given times), I 16k
# and K 11k (TWA, given times), G 5k (TWO), B, C, E, F, H 1.5k-2k (TAW, TWO or TWA on one
# view): TWA on the given times has half the main probe's shares. D and J fit 1,048,576
# and below (D 1,042,432 with TWA in 10k; J 1,036,288 with TWA in 16k), above their
# lower bounds, which only side probes ask for, and which capacities succeed is erratic
# (heavy tails per capacity and preorder). I.rx's large buffers (program points: their
# time widths are lost) fit 1,259,520 only with TAW (3k, either view) and 1,139,712 only
# with TAW on merged runs (3.4k): its side entry. Time reversal (start and end swapped,
# negated) changes only ties: on D and J reversed, every decision succeeds or fails as
# forwards within 1% of the work, but WAT on D's given times (19.9k forwards, not in 20k
# backwards), so reversed views are not in the portfolio.
MAIN_HEURISTICS = (
    (0, "TWA", 5),
    (0, "TAW", 1),
    (0, "TWO", 1),
    (1, "TWA", 1),
    (1, "TAW", 1),
    (1, "TWO", 1),
)
SIDE_HEURISTICS = ((0, "TWA", 1), (0, "WAT", 1), (1, "TAW", 1))
# A capacity asked for (a device's memory: ``target`` of :func:`minimize`) is a decision
# of its own, like MiniMalloc's question, and like a side probe's: a capacity above the
# lower bound, so the side probes' preorders.
TARGET_HEURISTICS = SIDE_HEURISTICS
SLICE = 500  # work per turn and share of one decision in the portfolio
MAIN_TURNS = 2  # turns of the main probe (at the goal) per turn of a side probe
SIDE_WORK = 16000  # first work limit of a side probe (x1.5 per pass, x2 when it found nothing)
SIDE_DIVES = 1.5  # at least this many dives (see minimize) per decision of a side probe
DIVE_TICKS = 330  # a dive's ticks per node, besides one per buffer left (measured)
SIDE_PART = 1.0  # work of the side probe per unit of the main probe's
MAIN_FIRST = 0.35  # the main probe has MAIN_TURNS per side turn until it used this share
LATE_PART = 3.0  # then the side probe's work per unit of the main probe's
# The cost model of a decision, in ticks (a unit of work is TICKS_PER_WORK ticks, about
# 16 us on the machine of the fit, so a tick is about a quarter of a microsecond): fitted to timed
# decisions on MiniMalloc's instances and the large buffers of their program encodings
# (240 decisions, least squares on relative error; see docs/planning.md). A node costs
# NODE_TICKS plus REST_TICKS per unplaced buffer and ORDER_TICKS per candidate sorted; a
# candidate CANDIDATE_TICKS; a neighbour looked at by (7) LOOK_TICKS; a preorder
# PREORDER_TICKS per key and per section a buffer spans; the checks of (2) a tick per
# SCAN_STEPS sections and members. Since the fit, a node's set-up reads the canonical
# keys and tops kept with the minimum offsets instead of computing them from the buffers
# left (timed alone: 106 -> 47 us a node with 200 left): a tick less per buffer left,
# ten more per node (the undo keeps them too).
TICKS_PER_WORK = 64
NODE_TICKS = 130
REST_TICKS = 1
ORDER_TICKS = 3
CANDIDATE_TICKS = 9
LOOK_TICKS = 2
PREORDER_TICKS = 1.5
SCAN_STEPS = 3
SETTLED_LOOK = 2  # candidates (7) looks at, first first: the cost is their neighbours

Search = Generator[None, None, bool]


class Sections:
    """Maximal cross sections of an instance and what the search derives from them."""

    def __init__(self, inst: Instance) -> None:
        n = inst.n
        self.inst = inst
        ends = sorted(set(inst.end))
        first = [bisect.bisect_right(ends, s) for s in inst.start]
        last = [bisect.bisect_right(ends, e) for e in inst.end]
        kept = sorted(set(first))  # a section where nothing begins lies inside the one before
        self.lo = lo = [bisect.bisect_left(kept, f) for f in first]
        self.hi = hi = [bisect.bisect_left(kept, h) for h in last]
        m = self.count = len(kept)
        self.members: list[list[int]] = [[] for _ in range(m)]
        for i in range(n):
            for s in range(lo[i], hi[i]):
                self.members[s].append(i)
        self.total = [sum(inst.size[i] for i in mem) for mem in self.members]
        # cuts[k]: buffers spanning the boundary between sections k and k+1.
        diff = [0] * (m + 1)
        for i in range(n):
            if hi[i] - lo[i] > 1:
                diff[lo[i]] += 1
                diff[hi[i] - 1] -= 1
        self.cuts = []
        run = 0
        for k in range(max(m - 1, 0)):
            run += diff[k]
            self.cuts.append(run)
        # The run of sections covered by a buffer and all its neighbours.
        self.hull_lo = [min([lo[i]] + [lo[j] for j in inst.nbrs[i]]) for i in range(n)]
        self.hull_hi = [max([hi[i]] + [hi[j] for j in inst.nbrs[i]]) for i in range(n)]
        # twin[i]: the previous buffer identical to i (lifetime, size, alignment), or -1.
        self.twin = [-1] * n
        seen: dict[tuple[int, int, int, int], int] = {}
        for i in range(n):
            key = (inst.start[i], inst.end[i], inst.size[i], inst.align[i])
            self.twin[i] = seen.get(key, -1)
            seen[key] = i


class Decision:
    """Is there a plan within ``capacity``? ``run()`` is a generator that yields whenever
    ``pause`` units of work have been done and returns offsets, or None if there is none.
    """

    def __init__(
        self,
        sec: Sections,
        capacity: int,
        heuristic: str,
        deadline: float = math.inf,
        fixed: dict[int, int] | None = None,
    ) -> None:
        inst = sec.inst
        n = inst.n
        self.inst = inst
        self.sec = sec
        self.capacity = capacity
        self.heuristic = heuristic
        self.deadline = deadline  # also yield when the safety clock (CPU seconds) passes this
        self.ticks = 0  # work done, in TICKS_PER_WORK-ths of a unit (see the module notes)
        self.pause = 0  # yield when work reaches this
        self.nodes = 0
        self.off = [-1] * n
        self.solution = [0] * n
        self.min_off = [0] * n
        self.total = list(sec.total)
        self.cuts = list(sec.cuts)
        self.maxalign = max(inst.align, default=1)
        # For each section, an unplaced buffer low enough to prove it can still be
        # filled; only a hint (checked before use), so backtracking need not restore it.
        self.witness = [mem[0] if mem else 0 for mem in sec.members]
        self.rank = [0] * n  # position in the preorder of the buffer's partition
        # Buffers that must sit at a given offset (obstacles of a local search): their
        # minimum offset starts there, and a placement that pushes one higher fails. Listed
        # by offset, a plan with them is still canonical (see the module notes).
        self.fixed = fixed or {}
        self.twin = sec.twin
        if self.fixed:
            self.twin = [
                -1 if i in self.fixed or t in self.fixed else t for i, t in enumerate(sec.twin)
            ]
            for i, o in self.fixed.items():
                self.min_off[i] = o
        # Kept with min_off, so that a node's set-up reads them instead of computing them:
        # key[i] = min_off[i] * mult + rank[i] (the canonical order, any partition's ranks
        # being below mult) and top[i] = min_off[i] + size[i].
        self.mult = mult = max(n, 1)
        self.key = [m * mult for m in self.min_off]
        self.top = list(map(add, self.min_off, inst.size))

    @property
    def work(self) -> int:
        """Units of work done (see :data:`TICKS_PER_WORK`)."""
        return self.ticks // TICKS_PER_WORK

    def run(self) -> Generator[None, None, list[int] | None]:
        inst, sec = self.inst, self.sec
        if any(sz > self.capacity for sz in inst.size) or any(
            t > self.capacity for t in self.total
        ):
            return None
        if any(o + inst.size[i] > self.capacity for i, o in self.fixed.items()):
            return None
        # Initial partitions: runs of sections with no buffer spanning their borders.
        start = 0
        for k in range(sec.count):
            if k == sec.count - 1 or self.cuts[k] == 0:
                bufs = sorted({i for s in range(start, k + 1) for i in sec.members[s]})
                if bufs and not (yield from self._subsolve(bufs, start, k + 1)):
                    return None
                start = k + 1
        return list(self.solution)

    def _preorder(self, bufs: list[int]) -> list[int]:
        """``bufs`` in the order of the heuristic's keys. Counted: a tick per key and per
        section a buffer spans, so a decision that splits into many partitions pays for
        sorting each of them."""
        inst, sec = self.inst, self.sec
        total, lo, hi = self.total, sec.lo, sec.hi
        size, start, end, nbrs = inst.size, inst.start, inst.end, inst.nbrs
        getters = {
            "T": lambda i: max(total[lo[i] : hi[i]]),
            "W": lambda i: end[i] - start[i],
            "A": lambda i: size[i] * (end[i] - start[i]),
            "Z": size.__getitem__,
            "C": lambda i: hi[i] - lo[i],
            "O": lambda i: len(nbrs[i]),
            "S": lambda i: -start[i],
            "E": end.__getitem__,
        }
        fs = [getters[c] for c in self.heuristic]
        keys = sorted((tuple(-f(i) for f in fs), i) for i in bufs)
        steps = len(bufs) * len(fs) + sum(hi[i] - lo[i] for i in bufs)
        self.ticks += int(PREORDER_TICKS * steps)
        return [i for _, i in keys]

    def _subsolve(self, bufs: list[int], slo: int, shi: int) -> Search:
        porder = self._preorder(bufs)
        rank = self.rank
        saved = [rank[b] for b in porder]
        mo, key, mult = self.min_off, self.key, self.mult
        for r, b in enumerate(porder):
            rank[b] = r
            key[b] = mo[b] * mult + r
        found = yield from self._search(porder, porder, -1, -1, slo, shi)
        for b, r in zip(porder, saved):
            rank[b] = r
            key[b] = mo[b] * mult + r
        return found

    def _search(
        self, porder: list[int], rest: list[int], last_off: int, last_r: int, slo: int, shi: int
    ) -> Search:
        """Place ``rest``, the unplaced buffers of the partition ``porder`` (both in preorder)
        over sections ``[slo, shi)``, after a placement at ``last_off`` of rank ``last_r``."""
        if not rest:
            return True
        self.nodes += 1
        if self.ticks >= self.pause * TICKS_PER_WORK or (
            not self.nodes & 63 and time.process_time() > self.deadline
        ):
            yield
        off, mo, rank = self.off, self.min_off, self.rank
        inst, sec = self.inst, self.sec
        size, align, nbrs = inst.size, inst.align, inst.nbrs
        slos, shis, members, twin = sec.lo, sec.hi, sec.members, self.twin
        fixed = self.fixed
        hull_lo, hull_hi = sec.hull_lo, sec.hull_hi
        total, cuts, witness = self.total, self.cuts, self.witness
        cap, maxalign = self.capacity, self.maxalign

        n = self.mult
        kof, tops = self.key, self.top
        # (3) and (1): candidates lie below the top of every unplaced buffer and below
        # cap - (largest section total) + 1.
        limit = min(min(map(tops.__getitem__, rest)), cap - max(total[slo:shi]) + 1)
        # Canonical order: placements go in non-decreasing (offset, rank).
        window = range(last_off * n + last_r + 1 if last_off >= 0 else 0, limit * n)
        order = sorted(filter(window.__contains__, map(kof.__getitem__, rest)))
        # The node's own cost (its set-up, and the O(rest) bookkeeping), in ticks.
        ticks = NODE_TICKS + REST_TICKS * len(rest) + ORDER_TICKS * len(order)
        # (7) Settled buffers: when no unplaced neighbour of b may go below b's top, b's
        # minimum offset never changes again, so every plan below places b at (mo[b],
        # rank): a candidate after that key would pass it by. The first settled
        # candidate ends the list (it is the only child when it comes first). Only the
        # first SETTLED_LOOK candidates are looked at: the neighbours they visit are
        # the cost, and the first ones are where the list is cut most.
        looked = 0
        for k, key in enumerate(order):
            if k >= SETTLED_LOOK:
                break
            b = porder[key % n]
            top = mo[b] + size[b]
            for c in nbrs[b]:
                looked += 1
                if off[c] < 0 and mo[c] < top:
                    break
            else:
                del order[k + 1 :]
                break
        ticks += LOOK_TICKS * looked
        # Sections and members the checks of (2) look at (an upper bound: a loop may stop
        # early): a candidate next to long-lived buffers costs more.
        scanned = 0
        # Sections found infeasible for a candidate, with its first (last) section: they
        # stay infeasible for candidates starting no later (ending no earlier) as high up.
        failed_left: dict[int, int] = {}
        failed_right: dict[int, int] = {}
        for key in order:
            o, r = divmod(key, n)
            b = porder[r]
            t = twin[b]
            if t >= 0 and off[t] < 0:
                continue  # (4) its twin goes first
            ticks += CANDIDATE_TICKS
            sz = size[b]
            h = o + sz
            hq = h if maxalign == 1 else -(-h // maxalign) * maxalign
            blo, bhi = slos[b], shis[b]
            # (2) after placing b, checked before changing anything. It held for every
            # section before; only sections holding b or its neighbours change.
            ok = True
            for s, v in failed_left.items():
                if blo <= v and s < blo and h + total[s] > cap:
                    ok = False
                    break
            if ok:
                for s, v in failed_right.items():
                    if bhi >= v and s >= bhi and h + total[s] > cap:
                        ok = False
                        break
            # Sections before b's: a neighbour of b rises to h (aligned). If that keeps
            # the old witness low enough, fine; else, when h itself is too high, only a
            # buffer ending before b can serve.
            if ok:
                lo, hi = hull_lo[b], blo
                if lo < hi and hq + max(total[lo:hi]) > cap:
                    scanned += hi - lo
                    for s in range(hi - 1, lo - 1, -1):
                        t = total[s]
                        if not t or hq + t <= cap:
                            continue  # nothing unplaced, or the old witness still works
                        thr = cap - t
                        strict = h > thr
                        w = witness[s]
                        if off[w] < 0:
                            m = mo[w]
                            if shis[w] > blo and m < h:
                                a = align[w]
                                m = h if a == 1 else -(-h // a) * a
                            if m <= thr:
                                continue
                        scanned += len(members[s])
                        for c in members[s]:
                            if off[c] < 0:
                                m = mo[c]
                                if shis[c] > blo and m < h:
                                    a = align[c]
                                    m = h if a == 1 else -(-h // a) * a
                                if m <= thr:
                                    witness[s] = c
                                    break
                        else:
                            if strict:
                                failed_left[s] = blo
                            ok = False
                            break
            # Sections after b's: the mirror image.
            if ok:
                lo, hi = bhi, hull_hi[b]
                if lo < hi and hq + max(total[lo:hi]) > cap:
                    scanned += hi - lo
                    for s in range(lo, hi):
                        t = total[s]
                        if not t or hq + t <= cap:
                            continue  # nothing unplaced, or the old witness still works
                        thr = cap - t
                        strict = h > thr
                        w = witness[s]
                        if off[w] < 0:
                            m = mo[w]
                            if slos[w] < bhi and m < h:
                                a = align[w]
                                m = h if a == 1 else -(-h // a) * a
                            if m <= thr:
                                continue
                        scanned += len(members[s])
                        for c in members[s]:
                            if off[c] < 0:
                                m = mo[c]
                                if slos[c] < bhi and m < h:
                                    a = align[c]
                                    m = h if a == 1 else -(-h // a) * a
                                if m <= thr:
                                    witness[s] = c
                                    break
                        else:
                            if strict:
                                failed_right[s] = bhi
                            ok = False
                            break
            # b's own sections: every other buffer there conflicts with b.
            if ok:
                scanned += bhi - blo
                for s in range(blo, bhi):
                    t = total[s] - sz
                    if not t:
                        continue
                    thr = cap - t
                    w = witness[s]
                    if w != b and off[w] < 0:
                        m = mo[w]
                        if m < h:
                            a = align[w]
                            m = h if a == 1 else -(-h // a) * a
                        if m <= thr:
                            continue
                    scanned += len(members[s])
                    for c in members[s]:
                        if c != b and off[c] < 0:
                            m = mo[c]
                            if m < h:
                                a = align[c]
                                m = h if a == 1 else -(-h // a) * a
                            if m <= thr:
                                witness[s] = c
                                break
                    else:
                        ok = False
                        break
            if not ok:
                continue
            self.ticks += ticks + scanned // SCAN_STEPS
            ticks = scanned = 0
            # Place b.
            off[b] = o
            self.solution[b] = o
            for s in range(blo, bhi):
                total[s] -= sz
            mo_changes = []
            pushed = False  # a fixed buffer pushed above its offset
            hat = False  # some unplaced buffer conflicts with b
            for c in nbrs[b]:
                if off[c] >= 0:
                    continue
                hat = True
                if mo[c] < h:
                    mo_changes.append((c, mo[c]))
                    a = align[c]
                    m = mo[c] = h if a == 1 else -(-h // a) * a
                    kof[c] = m * n + rank[c]
                    tops[c] = m + size[c]
                    if fixed and c in fixed and m > fixed[c]:
                        pushed = True
            if pushed:
                for s in range(blo, bhi):
                    total[s] += sz
                for c, m in reversed(mo_changes):
                    mo[c] = m
                    kof[c] = m * n + rank[c]
                    tops[c] = m + size[c]
                off[b] = -1
                continue
            # (5) a boundary no unplaced buffer spans any more splits the partition.
            cutpoints = []
            for k in range(blo, bhi - 1):
                cuts[k] -= 1
                if not cuts[k]:
                    cutpoints.append(k + 1)
            if not cutpoints:
                child = rest.copy()
                child.remove(b)
                found = yield from self._search(porder, child, o, r, slo, shi)
            else:
                found = True
                bounds = [slo] + cutpoints + [shi]
                for a, z in zip(bounds, bounds[1:]):
                    sub = [c for c in rest if off[c] < 0 and slos[c] < z and shis[c] > a]
                    if sub and not (yield from self._subsolve(sub, a, z)):
                        found = False
                        break
            # Undo, also on success: a sibling partition may still fail.
            for k in range(blo, bhi - 1):
                cuts[k] += 1
            for s in range(blo, bhi):
                total[s] += sz
            for c, m in reversed(mo_changes):
                mo[c] = m
                kof[c] = m * n + rank[c]
                tops[c] = m + size[c]
            off[b] = -1
            if found:
                return True
            if not hat:
                break  # (6) hatless: see the module notes
        self.ticks += ticks + scanned // SCAN_STEPS
        return False


class Probe:
    """A portfolio of decisions for one capacity, run in turns: each gets ``SLICE`` work
    per share per turn, and the first to finish answers for all. Each entry of
    ``heuristics`` (view, heuristic, share) runs on a view of the instance in ``secs`` (the
    same buffers and conflicts, times given differently: the preorders see lifetimes, the
    search only conflicts); a view past the last is the last, and entries that end up
    alike share one decision, their shares summed."""

    def __init__(
        self,
        secs: Sequence[Sections],
        capacity: int,
        heuristics: Sequence[tuple[int, str, int]] = MAIN_HEURISTICS,
        deadline: float = math.inf,
    ) -> None:
        self.capacity = capacity
        shares: dict[tuple[int, str], int] = {}
        for view, h, share in heuristics:
            key = (min(view, len(secs) - 1), h)
            shares[key] = shares.get(key, 0) + share
        self.keys = list(shares)
        self.runs = [Decision(secs[v], capacity, h, deadline) for v, h in shares]
        self.winner: tuple[int, str] | None = None  # the (view, heuristic) that answered
        self.shares = list(shares.values())
        self.gens = [d.run() for d in self.runs]
        self.status = ""  # "found", "infeasible" or "" while undecided
        self.result: list[int] | None = None

    @property
    def work(self) -> int:
        return sum(d.work for d in self.runs)

    def step(self, turns: float = 1) -> str:
        """Give every decision ``turns`` turns (a fraction of one at the end of a budget);
        the status afterwards."""
        for k, d, g, share in zip(self.keys, self.runs, self.gens, self.shares):
            d.pause = d.work + max(1, int(turns * share * SLICE))
            try:
                next(g)
            except StopIteration as stop:
                self.winner = k
                self.result = stop.value
                self.status = "found" if stop.value is not None else "infeasible"
                break
        if self.status:
            self.close()
        return self.status

    def close(self) -> None:
        """End the decisions' suspended searches (the probe is answered or no longer needed)."""
        for g in self.gens:
            g.close()


@dataclass
class Outcome:
    """What :func:`minimize` found: a better plan (or None), its height, the work used, the
    lowest capacity not proven infeasible, and whether the safety clock stopped it."""

    offsets: list[int] | None
    height: int
    work: int
    bound: int
    stopped_by_clock: bool = False


def minimize(
    inst: Instance,
    goal: int,
    best: int,
    budget: int,
    deadline: float = math.inf,
    trace: list[str] | None = None,
    target: int = 0,
) -> Outcome:
    """Look for a plan of ``inst`` lower than ``best``; none lower than ``goal`` is needed.

    ``target`` (0: none) is a capacity the plan should fit, such as a device's memory: when
    it lies between ``goal`` and ``best``, a probe asks for it (:data:`TARGET_HEURISTICS`)
    in the side probes' turns, taking turns with them, half of their work each, until it
    answers (the main probe keeps its turns); found, the search goes on below the plan it
    found; proven infeasible, the bound rises above it.

    The main probe asks for ``goal`` (a lower bound, often the optimum) and gets three
    quarters of the work. Side probes bisect between the lowest capacity not yet given up
    on and the best height found, each with a small work limit: a probe that runs out
    counts as a failure. When the range is used up, bisection starts again from the
    lowest capacity not proven infeasible, with twice the limit if the pass found
    nothing. Search time is heavy-tailed and depends on the capacity asked for, so many
    short probes do better than a few long ones.

    The main probe runs its heuristics on two views of the instance: its own times, and
    the times with runs of births and of deaths merged (:func:`merged_runs`), which give
    program points what raw times give; each (view, heuristic) pair has its share
    (:data:`MAIN_HEURISTICS`, :data:`SIDE_HEURISTICS`), and the side probe gets
    :data:`SIDE_PART` of the main probe's work whatever the number of pairs in each.

    Work (see the module notes), not time, ends the search: the result depends on the
    input and ``budget`` only. ``deadline`` (``time.process_time()``) is a safety net far
    past the budget; when it ends the search, the outcome says so.
    """
    if best <= goal or not inst.n:
        return Outcome(None, best, 0, goal)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 6 * inst.n + 1000))
    try:
        secs = [Sections(inst)]
        merged = merged_runs(inst)
        if merged.start != inst.start or merged.end != inst.end:
            secs.append(Sections(merged))
        # Canonical offsets and heights are multiples of this: probe only those.
        grain = grain_of(inst)
        setup = sum(map(sections_work, secs))
        found: list[int] | None = None
        main: Probe | None = Probe(secs, goal, MAIN_HEURISTICS, deadline)
        side: Probe | None = None
        aim_at = target // grain * grain  # capacities that are not multiples give nothing more
        aim = Probe(secs, aim_at, TARGET_HEURISTICS, deadline) if goal < aim_at < best else None
        side_work = 0  # the side probes' work, all of them: the target gets as much
        # A side probe's first limit: SIDE_WORK, or SIDE_DIVES dives to the bottom for
        # each decision when the instance is large (a dive costs a node per buffer, each
        # O(buffers left): about n * (DIVE_TICKS + n) ticks; J 5k units, D 2k).
        dive = inst.n * (DIVE_TICKS + inst.n) // TICKS_PER_WORK
        side_limit = max(SIDE_WORK, int(SIDE_DIVES * dive * len(SIDE_HEURISTICS)))
        improved = False
        proven = goal - 1  # every capacity up to this one is infeasible
        lo = goal // grain + 1  # in grains: the lowest capacity not yet given up on
        used = setup
        clock = False

        def bound() -> int:
            return max(goal, -(-(proven + 1) // grain) * grain)

        while True:
            if used >= budget:
                break
            if time.process_time() > deadline:
                clock = True
                break
            # The main probe has most of the work until it has used MAIN_FIRST of the budget.
            early = main is not None and main.work < budget * MAIN_FIRST
            turns = 0 if main is None else MAIN_TURNS if early else 1
            for _ in range(turns):
                assert main is not None  # no turns without a main probe
                before = main.work
                # No more than the budget left: a turn of the main probe is SLICE work
                # for each of its shares.
                status = main.step(min(1.0, (budget - used) / (SLICE * sum(main.shares))))
                used += main.work - before
                if status == "found":
                    _note(trace, main, inst)
                    assert main.result is not None  # "found": the probe holds a plan
                    return Outcome(main.result, inst.height(main.result), used, goal)
                if status == "infeasible":
                    _note(trace, main, inst)
                    proven = goal
                    main = None
                    break
                if used >= budget or time.process_time() > deadline:
                    break
            else:
                if used >= budget or time.process_time() > deadline:
                    continue  # the checks at the top end it
            # The side's turn: the target while it is open, in turn with the side probes
            # bisecting between the lowest capacity not given up on and the best height, each
            # with half of the side's work (the main probe keeps its turns, so a goal that
            # fits is found as without a target, and a target out of reach still leaves a
            # plan about as low as without it).
            take_aim = aim is not None and aim.work <= side_work
            if not take_aim and side is None:
                if lo >= best // grain:  # a pass over the range is done: again, with more work
                    lo = proven // grain + 1
                    if lo >= best // grain:
                        break  # best is optimal
                    side_limit = side_limit * 2 if not improved else side_limit * 3 // 2
                    improved = False
                side = Probe(secs, (lo + best // grain - 1) // 2 * grain, SIDE_HEURISTICS, deadline)
            probe = aim if take_aim else side
            assert probe is not None
            before = probe.work
            # The side probe gets SIDE_PART of what the main probe gets per round (all of
            # it once the main probe is done), whatever the number of decisions in each.
            side_turns: float = (
                1
                if main is None
                else max(
                    1,
                    round(
                        (SIDE_PART if early else LATE_PART)
                        * turns
                        * sum(main.shares)
                        / sum(probe.shares)
                    ),
                )
            )
            # No more than the side probe's limit (the target has none) or the budget left
            # (in whole turns).
            most = budget if probe is aim else side_limit
            room = min(most - probe.work, budget - used)
            side_turns = min(side_turns, room / (SLICE * sum(probe.shares)))
            status = probe.step(side_turns)
            used += probe.work - before
            if probe is side:
                side_work += probe.work - before
            if status == "found":
                _note(trace, probe, inst)
                assert probe.result is not None  # "found": the probe holds a plan
                found, best = probe.result, inst.height(probe.result)
                improved = True
            elif status == "infeasible" or probe.work >= most:
                _note(trace, probe, inst)
                if status == "infeasible":
                    proven = max(proven, probe.capacity)
                lo = max(lo, probe.capacity // grain + 1)
            if status or probe.work >= most:
                # Answered, or given up: it ends, and so does the other one where the answer
                # settles its question too (a plan within its capacity, or none).
                if probe is aim:
                    aim = None
                else:
                    side = None
                if aim is not None and not proven < aim.capacity < best:
                    aim.close()
                    aim = None
                if side is not None and not proven < side.capacity < best:
                    side.close()
                    side = None
                if status == "found" and best <= bound():
                    break
                if proven >= goal and main is not None:
                    main = None  # no plan within a capacity above the goal: none within it
        if aim is not None:
            _note(trace, aim, inst)  # the target still open: "gave up"
        return Outcome(found, best, used, bound(), clock)
    finally:
        sys.setrecursionlimit(limit)


def sections_work(sec: Sections) -> int:
    """The work building ``sec`` took (timed: about a third of a microsecond per member
    of a section and per conflict-list entry, 7 per buffer), in units of work."""
    inst = sec.inst
    return (20 * inst.n + sum(map(len, sec.members)) + sum(map(len, inst.nbrs))) // 100


def grain_of(inst: Instance) -> int:
    """What canonical offsets and heights are multiples of: the gcd of the sizes when every
    alignment divides it (rounding a multiple of it up changes nothing: 64-byte alignment
    and sizes in KiB step by the KiB), else the gcd of sizes and alignments."""
    g = math.gcd(*inst.size)
    if all(g % a == 0 for a in inst.align if a > 1):
        return max(g, 1)
    return math.gcd(g, *(a for a in inst.align if a > 1))


def merged_runs(inst: Instance) -> Instance:
    """``inst`` with time compressed: each maximal run of births with no death among them
    becomes one time, and so does each run of deaths. Every conflict stays (a birth and a
    death keep their order), and buffers born at successive program points in one run
    become twins of the same lifetime when they die together: a program's view of an
    instance gives the preorders what its raw times would."""
    events = sorted(
        [(e, 0, i) for i, e in enumerate(inst.end)] + [(s, 1, i) for i, s in enumerate(inst.start)]
    )
    start, end = [0] * inst.n, [0] * inst.n
    t, last = 0, -1
    for _, kind, i in events:  # at equal times deaths first: lifetimes are half-open
        if kind != last:
            t, last = t + 1, kind
        if kind:
            start[i] = t
        else:
            end[i] = t
    merged = Instance(list(inst.index), start, end, list(inst.size), list(inst.align))
    merged._nbrs = inst._nbrs
    return merged


def _note(trace: list[str] | None, probe: Probe, inst: Instance) -> None:
    if trace is not None:
        h = f" height {inst.height(probe.result)}" if probe.result is not None else ""
        by = f" ({probe.winner[1]} on view {probe.winner[0]})" if probe.winner else ""
        trace.append(
            f"capacity {probe.capacity}: {probe.status or 'gave up'}{h} after {probe.work} work{by}"
        )


# Local search: heuristics of the windows' decisions, in turn, and their work limit.
REPAIR_HEURISTICS = ("TWA", "TCA", "TAW", "WAT", "TWO")
REPAIR_WORK = 3000
REPAIR_RADII = (2, 5, 12, 30)  # sections each side of the buffers that stick out
REPAIR_PAIRS = 80  # conflict-list entries of a window per unit of work
REPAIR_SCAN = 160  # buffers and neighbours looked at per unit of work, finding a window


def repair(
    inst: Instance,
    offsets: list[int],
    goal: int,
    budget: int,
    deadline: float = math.inf,
    trace: list[str] | None = None,
) -> Outcome:
    """Lower a plan of ``inst`` step by step by searching windows of time exactly.

    For a capacity a step below the plan's height (the step doubles after a success and
    halves after a failure, down to one grain), the buffers that stick out above
    it and the ones around them (sections within a radius) are taken out; the buffers
    crossing the window's borders stay where they are, as fixed obstacles of a
    :class:`Decision` at that capacity, so a window is a small, tight problem. Found: the
    plan is lower, and the next step starts from it. Not found within ``REPAIR_WORK``: a
    wider window, then the next heuristic; when every one fails, the search stops.
    Deterministic: the work counted, not the clock, ends it.
    """
    if not inst.n:
        return Outcome(None, 0, 0, goal)
    sec = Sections(inst)
    size, nbrs = inst.size, inst.nbrs
    grain = grain_of(inst)
    off = list(offsets)
    best = inst.height(off)
    start_height = best
    used = sections_work(sec)
    clock = False
    turn = 0
    failures = 0
    step = max(grain, (best - goal) // 16 // grain * grain)
    starved = False  # the budget left cannot build a window and search it
    while best > goal and used < budget and failures < len(REPAIR_HEURISTICS) and not starved:
        if time.process_time() > deadline:
            clock = True
            break
        cap = max(goal, best - step)
        hot = [i for i in range(inst.n) if off[i] + size[i] > cap]
        used += inst.n // REPAIR_SCAN
        lo = min(sec.lo[i] for i in hot)
        hi = max(sec.hi[i] for i in hot)
        heuristic = REPAIR_HEURISTICS[turn % len(REPAIR_HEURISTICS)]
        turn += 1
        found = False
        for radius in REPAIR_RADII:
            a, z = max(0, lo - radius), min(sec.count, hi + radius)
            free = [i for i in range(inst.n) if sec.lo[i] >= a and sec.hi[i] <= z]
            free_set = set(free)
            obstacles = sorted({j for i in free for j in nbrs[i] if j not in free_set})
            # Finding them: a look at every buffer and at the free ones' neighbours.
            used += (inst.n + sum(len(nbrs[i]) for i in free)) // REPAIR_SCAN
            if any(off[j] + size[j] > cap for j in obstacles):
                continue  # a buffer that sticks out would stay: widen the window
            members = free + obstacles
            # Within the budget or not at all: the window's build (its members' conflict
            # entries bound the pairs carried over) and at least a slice of search.
            build = len(members) * 5 // 8 + sum(len(nbrs[j]) for j in members) // REPAIR_PAIRS
            if used + build + SLICE > budget:
                starved = True
                break
            local = _local(inst, members)
            fixed = {k: off[j] for k, j in enumerate(members) if k >= len(free)}
            d = Decision(Sections(local), cap, heuristic, deadline, fixed)
            # Building the window: its conflict pairs and sections (timed: about 10 us a
            # member and 0.2 us a pair entry carried over).
            used += len(members) * 5 // 8 + sum(map(len, local.nbrs)) // REPAIR_PAIRS
            run = d.run()
            d.pause = max(0, min(REPAIR_WORK, budget - used))
            try:
                next(run)
                result = None
            except StopIteration as stop:
                result = stop.value
            run.close()
            used += d.work
            if result is not None:
                for k, j in enumerate(free):
                    off[j] = result[k]
                best = inst.height(off)
                found = True
                break
            if used >= budget:
                break
            if z - a >= sec.count:
                break  # the window is everything already
        if starved:
            break
        if found:
            failures = 0
            step *= 2
        elif step > grain:
            step = max(grain, step // 2 // grain * grain)
        else:
            failures += 1
    if trace is not None:
        trace.append(f"repair: {start_height} -> {best} after {used} work")
    if best < start_height:
        return Outcome(off, best, used, goal, clock)
    return Outcome(None, best, used, goal, clock)


def _local(inst: Instance, members: Sequence[int]) -> Instance:
    """``members`` of ``inst`` as an instance of their own, conflicts included
    (:func:`subinstance` carries them over once ``inst`` has built them)."""
    inst.nbrs  # noqa: B018 - built on first use, then shared with the part
    return subinstance(inst, members)

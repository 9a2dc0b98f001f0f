"""Greedy placement on an interval conflict graph: first fit and best fit.

Everything here works on an :class:`Instance`: the buffers that actually need memory
(non-zero size, non-empty lifetime), renumbered ``0..n-1``, with their conflict lists.
Conflicts are found by a sweep over time, so a chain-like program with a handful of
live buffers at each point costs O(n log n), not O(n^2). Placing a buffer sorts only the
address ranges of its already-placed neighbours, so first fit costs O(sum of d log d)
for degrees d.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .model import Buffer


@dataclass
class Instance:
    """The buffers that need memory, renumbered, with their conflicts."""

    index: list[int]  # position of each buffer in the caller's list
    start: list[int]
    end: list[int]
    size: list[int]
    align: list[int]
    nbrs: list[list[int]]  # buffers whose lifetimes intersect, in no particular order

    @property
    def n(self) -> int:
        return len(self.index)

    def height(self, offsets: Sequence[int]) -> int:
        return max((o + s for o, s in zip(offsets, self.size)), default=0)

    def expand(self, offsets: Sequence[int], total: int) -> list[int]:
        """Offsets for the caller's full list (buffers that need no memory sit at 0)."""
        full = [0] * total
        for i, o in zip(self.index, offsets):
            full[i] = o
        return full


def prepare(buffers: Sequence[Buffer]) -> Instance:
    index = [i for i, b in enumerate(buffers) if b.size > 0 and b.start < b.end]
    start = [buffers[i].start for i in index]
    end = [buffers[i].end for i in index]
    size = [buffers[i].size for i in index]
    align = [max(1, buffers[i].align) for i in index]
    return Instance(index, start, end, size, align, conflict_lists(start, end))


def conflict_lists(start: Sequence[int], end: Sequence[int]) -> list[list[int]]:
    """For each interval, the others it intersects (half-open), by a sweep over time."""
    n = len(start)
    nbrs: list[list[int]] = [[] for _ in range(n)]
    by_start = sorted(range(n), key=start.__getitem__)
    by_end = sorted(range(n), key=end.__getitem__)
    active: dict[int, None] = {}
    e = 0
    for i in by_start:
        s = start[i]
        # Everything ending at or before s started before s, so it is in `active`; and
        # i itself ends after s, so the loop stops before running off the list.
        while end[by_end[e]] <= s:
            del active[by_end[e]]
            e += 1
        if active:
            mine = nbrs[i]
            for j in active:
                mine.append(j)
                nbrs[j].append(i)
        active[i] = None
    return nbrs


def _align_up(x: int, a: int) -> int:
    return x if a == 1 else -(-x // a) * a


def place(inst: Instance, order: Sequence[int], best_fit: bool = False) -> list[int]:
    """Place buffers in ``order``: first fit (lowest offset) or best fit (tightest gap).

    First fit puts each buffer at the lowest aligned offset where it overlaps no placed
    neighbour. Best fit picks, among the gaps between placed neighbours that can hold
    it, the one leaving the least slack (ties: the lowest), and otherwise goes on top.
    """
    size, align, nbrs = inst.size, inst.align, inst.nbrs
    off = [-1] * inst.n
    for i in order:
        ranges = [(off[j], off[j] + size[j]) for j in nbrs[i] if off[j] >= 0]
        if not ranges:
            off[i] = 0
            continue
        ranges.sort()
        sz, a = size[i], align[i]
        if not best_fit:
            cand = 0
            for lo, hi in ranges:
                if cand + sz <= lo:
                    break
                if hi > cand:
                    cand = hi if a == 1 else -(-hi // a) * a
            off[i] = cand
            continue
        reach = 0
        best = -1
        best_slack = -1
        for lo, hi in ranges:
            cand = reach if a == 1 else -(-reach // a) * a
            if cand + sz <= lo:
                slack = lo - cand - sz
                if best < 0 or slack < best_slack:
                    best, best_slack = cand, slack
                    if slack == 0:
                        break
            if hi > reach:
                reach = hi
        off[i] = best if best >= 0 else _align_up(reach, a)
    return off


def size_order(inst: Instance) -> list[int]:
    """Largest first; ties: earlier start, then input order."""
    size, start = inst.size, inst.start
    return sorted(range(inst.n), key=lambda i: (-size[i], start[i], i))


def conflict_order(inst: Instance) -> list[int]:
    """Most conflicting bytes first (own size included); ties: larger, earlier, input order."""
    size, start, nbrs = inst.size, inst.start, inst.nbrs
    weight = [size[i] + sum(size[j] for j in nbrs[i]) for i in range(inst.n)]
    return sorted(range(inst.n), key=lambda i: (-weight[i], -size[i], start[i], i))


def components(inst: Instance) -> list[list[int]]:
    """Groups of buffers joined by chains of lifetime overlaps, in time order."""
    groups: list[list[int]] = []
    reach = None
    for i in sorted(range(inst.n), key=lambda i: (inst.start[i], i)):
        if reach is None or inst.start[i] >= reach:
            groups.append([])
            reach = inst.end[i]
        groups[-1].append(i)
        reach = max(reach, inst.end[i])
    return groups


def subinstance(inst: Instance, members: Sequence[int]) -> Instance:
    """The buffers ``members`` of ``inst`` as an instance of their own (``index`` maps back)."""
    pos = {j: k for k, j in enumerate(members)}
    return Instance(
        list(members),
        [inst.start[i] for i in members],
        [inst.end[i] for i in members],
        [inst.size[i] for i in members],
        [inst.align[i] for i in members],
        [[pos[j] for j in inst.nbrs[i]] for i in members],
    )


def max_live(inst: Instance) -> int:
    """Most bytes live at once (the lower bound for this instance)."""
    events = sorted([(s, z) for s, z in zip(inst.start, inst.size)] + [(e, -z) for e, z in zip(inst.end, inst.size)])
    live = best = 0
    for _, d in events:
        live += d
        if live > best:
            best = live
    return best

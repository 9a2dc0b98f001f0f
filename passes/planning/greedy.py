"""Greedy placement: first fit on conflict lists, and a sweep over time for huge inputs.

Everything here works on an :class:`Instance`: the buffers that actually need memory
(non-zero size, non-empty lifetime), renumbered ``0..n-1``. Conflict lists are built only
when asked for (:attr:`Instance.nbrs`), by a sweep over time.

Two ways to place:

* :func:`place` -- first fit (or best fit) in a given order among the placed buffers whose
  lifetimes intersect. Costs O(sum of d log d) for degrees d: excellent plans, but the
  conflict lists alone are O(n x live) (a million sparse buffers with a hundred live at a
  time, or 100,000 with 2,500 live, mean 10^8 pairs).
* :func:`sweep_place` -- a sweep over time that allocates each buffer when it is born and
  frees it when it dies, in one of the tightest holes below the highest live buffer, next
  to the neighbour that dies closest to it (boundary tags, a sorted list of holes by
  size): O(n log n), never looks at a pair.

:func:`greedy` uses first fit on conflict lists everywhere while their total stays within a
pair budget (small programs get exactly the classic plan). Past it, the sweep places
everything (each component of the time axis from an empty arena), then
:func:`replan_windows` re-plans windows of time around the buffer on top of the arena by
first fit, the buffers crossing a window's borders fixed, while the windows' pairs fit in
the budget: only the highest point sets the arena, so only pairs near it are worth
building (a million buffers with about 100 live at a time: the sweep 1.124 of max-live,
with windows 1.032; 100,000 with about 2,500 live, where no window fits the budget: the
sweep 1.048; a million with about 10 live: 1.000).
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass, field
from operator import add
from typing import Any, Callable, Sequence

import numpy as np

from .model import Buffer

# Conflict pairs that first fit on conflict lists may cost in all (about a million a
# second here). Components past it are placed by the sweep.
PAIR_BUDGET = 3_000_000


@dataclass
class Instance:
    """The buffers that need memory, renumbered; conflicts on demand."""

    index: list[int]  # position of each buffer in the caller's list
    start: list[int]
    end: list[int]
    size: list[int]
    align: list[int]
    _nbrs: list[list[int]] | None = field(default=None, repr=False)
    _arrays: tuple[np.ndarray, ...] | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return len(self.index)

    @property
    def nbrs(self) -> list[list[int]]:
        """Buffers whose lifetimes intersect, in no particular order (built on first use)."""
        if self._nbrs is None:
            self._nbrs = conflict_lists(self.start, self.end)
        return self._nbrs

    def arrays(self) -> tuple[np.ndarray, ...] | None:
        """``start``, ``end``, ``size`` and ``align`` as int64 arrays (built on first use),
        or None when offsets or times might not fit in 64 bits."""
        if self._arrays is None:
            if not self.n or _big(self.start) or _big(self.end) or sum(self.size) >= 1 << 62:
                return None
            self._arrays = tuple(
                np.array(xs, dtype=np.int64) for xs in (self.start, self.end, self.size, self.align)
            )
        return self._arrays

    def height(self, offsets: Sequence[int]) -> int:
        return max(map(add, offsets, self.size), default=0)

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
    align = [a if (a := buffers[i].align) > 1 else 1 for i in index]
    return Instance(index, start, end, size, align)


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
            nbrs[i].extend(active)
            for j in active:
                nbrs[j].append(i)
        active[i] = None
    return nbrs


@dataclass
class Scan:
    """One pass over time: components, their conflict pairs, the most bytes live."""

    by_start: list[int]  # buffers by (start, index)
    components: list[list[int]]  # runs of by_start joined by overlapping lifetimes
    pairs: list[int]  # conflicting pairs inside each component
    max_live: int


def scan(inst: Instance) -> Scan:
    """Components, their pairs and the most bytes live, vectorised (numpy) when the sums fit
    in 64 bits."""
    n = inst.n
    if not n:
        return Scan([], [], [], 0)
    if n < 64 or inst.arrays() is None:
        return _scan_slow(inst)
    return _scan_numpy(inst)


def _scan_numpy(inst: Instance) -> Scan:
    n = inst.n
    arrays = inst.arrays()
    assert arrays is not None  # _scan calls this only when the instance has them
    st, en, sz, _ = arrays
    order = np.argsort(st, kind="stable")
    s_sorted = st[order]
    reach = np.maximum.accumulate(en[order])
    by_end = np.argsort(en, kind="stable")
    ends = en[by_end]
    # A component begins where a start is at or past every earlier end.
    cut = np.flatnonzero(s_sorted[1:] >= reach[:-1]) + 1
    firsts = np.concatenate(([0], cut))
    # Buffers live when the k-th starts (frees first: half-open lifetimes).
    active = np.arange(n, dtype=np.int64) - np.searchsorted(ends, s_sorted, side="right")
    pairs = np.add.reduceat(active, firsts).tolist()
    by_start = order.tolist()
    bounds = firsts.tolist() + [n]
    comps = [by_start[a:b] for a, b in zip(bounds, bounds[1:])]
    # Bytes live just after each birth: born so far (in start order; at equal starts the
    # last of them sees all) minus those dead by then (half-open: an end at the start).
    born = np.cumsum(sz[order])
    dead = np.concatenate(([0], np.cumsum(sz[by_end])))
    best = int((born - dead[np.searchsorted(ends, s_sorted, side="right")]).max())
    return Scan(by_start, comps, pairs, max(best, 0))


def _scan_slow(inst: Instance) -> Scan:
    n = inst.n
    start, end, size = inst.start, inst.end, inst.size
    by_start = sorted(range(n), key=start.__getitem__)
    by_end = sorted(range(n), key=end.__getitem__)
    comps: list[list[int]] = []
    pairs: list[int] = []
    active = live = best = e = 0
    reach = None
    cur: list[int] = []
    count = 0
    for i in by_start:
        s = start[i]
        while e < n and end[by_end[e]] <= s:
            active -= 1
            live -= size[by_end[e]]
            e += 1
        if reach is None or s >= reach:
            if cur:
                comps.append(cur)
                pairs.append(count)
            cur, count, reach = [], 0, end[i]
        cur.append(i)
        count += active
        active += 1
        live += size[i]
        if live > best:
            best = live
        if end[i] > reach:
            reach = end[i]
    if cur:
        comps.append(cur)
        pairs.append(count)
    return Scan(by_start, comps, pairs, best)


def _align_up(x: int, a: int) -> int:
    return x if a == 1 else -(-x // a) * a


def place(
    inst: Instance,
    order: Sequence[int],
    best_fit: bool = False,
    initial: Sequence[int] | None = None,
) -> list[int]:
    """Place buffers in ``order``: first fit (lowest offset) or best fit (tightest gap).

    First fit puts each buffer at the lowest aligned offset where it overlaps no placed
    neighbour. Best fit picks, among the gaps between placed neighbours that can hold
    it, the one leaving the least slack (ties: the lowest), and otherwise goes on top.
    Buffers not in ``order`` keep their ``initial`` offset (-1 if none: unplaced).
    """
    size, align, nbrs = inst.size, inst.align, inst.nbrs
    off = [-1] * inst.n if initial is None else list(initial)
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


# Holes the sweep compares for a buffer (the tightest that hold it first): at most this
# many, so a step stays O(log n) whatever the density. Measured on random sets with about
# 2,500 live (100,000 buffers, the sweep alone): 1 hole 1.070 of max-live, 2 1.056, 4
# 1.048, 8 1.039, 16 1.035 (best fit alone on the high-water top: 1.076); the sweep of a
# million such buffers takes 5.1-5.2 s of CPU with 1, 6.4 s with 4, 7.6-7.9 s with 8
# (best fit alone: 3.1-3.7 s).
SWEEP_CHOICES = 4


def sweep_place(inst: Instance, births: Sequence[int], off: list[int]) -> None:
    """Allocate the buffers ``births`` (in that order, which must be by start time) at their
    start and free them at their end. Writes ``off``.

    *Where.* Among the holes that hold the buffer aligned, the tightest (size ``g``) and
    any up to ``max(g, 2 * size)`` bytes (at most :data:`SWEEP_CHOICES`, tightest first)
    are candidates, each at its bottom (on the live buffer below it, or on offset 0) and at
    its top (under the live buffer above it). The buffer goes where its neighbour dies
    closest to its own death (offset 0 counts as a perfect match; ties: the lower
    offset): neighbours that die together free one hole instead of two, so holes coalesce
    and fragmentation stays low (20,000 buffers with about 2,500 live, every hole up to
    the limit compared: 1.082 of max-live by best fit alone, 1.033 so). When no hole holds it,
    it goes on top of the highest live buffer.

    *How.* Holes are the free blocks below the highest live buffer, kept with boundary
    tags (coalesced on free) and in one sorted list of ``size * K + offset`` keys; live
    buffers are indexed by their two ends (for their deaths), so a step costs O(log n)
    plus a short list move. The space above the highest live buffer is not a hole:
    freeing the buffer on top lowers the top (down through the hole below it), so a
    buffer goes up there only when no hole holds it. (Keeping the high-water mark as the
    top and the space under it as one more hole spreads the plan up to that mark
    everywhere: a million buffers with about 100 live, 1.107 of max-live after
    :func:`replan_windows` by best fit, 1.03 with the live top.) When nothing is live,
    every hole has merged down to offset 0 and the top is 0: each component gets its own
    height.
    """
    start, end, size, align = inst.start, inst.end, inst.size, inst.align
    if not births:
        return
    arrays = inst.arrays()
    kind = object if arrays is None else np.int64
    b = np.array(births, dtype=np.int64)
    if arrays is None:
        st, en, sz, al = (np.array(xs, dtype=object)[b] for xs in (start, end, size, align))
    else:
        st, en, sz, al = (x[b] for x in arrays)
    order = np.argsort(en, kind="stable")  # deaths in time order (ties: birth order)
    dying = b[order].tolist()
    death_times = en[order].tolist() + [math.inf]
    dying_size = sz[order].tolist()
    if kind is np.int64 and int(sz.max()) + int(al.max()) < (1 << 62) // len(births):
        K = int(sz.sum()) + int(al.sum()) + 1  # above every offset and block size
    else:
        K = sum(size[i] + align[i] for i in births) + 1
    free_at: dict[int, int] = {}  # offset -> size of the hole there
    free_end: dict[int, int] = {}  # end of a hole -> its offset
    blocks: list[int] = []  # size * K + offset, sorted
    # Offset of a live buffer -> its end time, and its end offset -> its end time. Only
    # read at the ends of holes, where a live buffer is: the last buffer written there is
    # that one, so entries of dead buffers need no removal.
    dies_from: dict[int, int] = {}
    dies_to: dict[int, int] = {}
    bisect_left, insort = bisect.bisect_left, bisect.insort
    pop_end, pop_at = free_end.pop, free_at.pop
    top = 0
    e = 0
    next_death = death_times[0]
    # When every size is a multiple of the largest alignment, so is every offset made:
    # alignment then needs no arithmetic.
    amax = int(al.max())
    aligns = [1] * len(births) if not bool((sz % amax).any()) else al.tolist()
    for i, s, z, a, d in zip(births, st.tolist(), sz.tolist(), aligns, en.tolist()):
        while next_death <= s:  # i itself dies after s: the loop stops in time
            lo = off[dying[e]]
            hi = lo + dying_size[e]
            e += 1
            next_death = death_times[e]
            p = pop_end(lo, None)
            if p is not None:  # merge with the hole below
                del blocks[bisect_left(blocks, (lo - p) * K + p)]
                del free_at[p]
                lo = p
            if hi == top:  # the highest live buffer: the top comes down
                top = lo
                continue
            q = pop_at(hi, None)
            if q is not None:  # and the one above
                del blocks[bisect_left(blocks, q * K + hi)]
                del free_end[hi + q]
                hi += q
            free_at[lo] = hi - lo
            free_end[hi] = lo
            insort(blocks, (hi - lo) * K + lo)
        k = bisect_left(blocks, z * K)
        nb = len(blocks)
        bs = 0  # the loop sets it whenever a hole is found (k < nb after it)
        while k < nb:  # the tightest hole that holds it aligned
            bs, bo = divmod(blocks[k], K)
            if a == 1 or -(-bo // a) * a + z <= bo + bs:
                break
            k += 1
        if k == nb:  # none: on top (the padding is a hole)
            p = top if a == 1 else -(-top // a) * a
            if p > top:
                free_at[top] = p - top
                free_end[p] = top
                insort(blocks, (p - top) * K + top)
            top = p + z
            off[i] = p
            dies_from[p] = d
            dies_to[p + z] = d
            continue
        # The choice (index in blocks, offset, mismatch of deaths) among the holes from the
        # tightest up to the limit, each at its bottom and its top, until a perfect match.
        bk = bp = bm = bbs = bbo = -1
        cap = (max(bs, 2 * z) + 1) * K  # keys of holes up to the limit are below
        last = min(nb, k + SWEEP_CHOICES)
        while k < last and blocks[k] < cap:
            bs, bo = divmod(blocks[k], K)
            lo = bo if a == 1 else -(-bo // a) * a
            hi = bo + bs - z
            if a > 1:
                hi -= hi % a
            if lo <= hi:
                m = d - dies_to[bo] if bo else 0  # |d - death|, without calls to abs()
                if m < 0:
                    m = -m
                if bk < 0 or m < bm or (m == bm and lo < bp):
                    bk, bbs, bbo, bp, bm = k, bs, bo, lo, m
                    if not m:
                        break
                m = d - dies_from[bo + bs]
                if m < 0:
                    m = -m
                if m < bm or (m == bm and hi < bp):
                    bk, bbs, bbo, bp, bm = k, bs, bo, hi, m
                    if not m:
                        break
            k += 1
        p, bs, bo = bp, bbs, bbo
        del blocks[bk]
        del free_at[bo]
        del free_end[bo + bs]
        if p > bo:
            free_at[bo] = p - bo
            free_end[p] = bo
            insort(blocks, (p - bo) * K + bo)
        hi = p + z
        rest = bo + bs - hi
        if rest > 0:
            free_at[hi] = rest
            free_end[bo + bs] = hi
            insort(blocks, rest * K + hi)
        off[i] = p
        dies_from[p] = d
        dies_to[p + z] = d


def size_order(inst: Instance) -> list[int]:
    """Largest first; ties: earlier start, then input order."""
    size, start = inst.size, inst.start
    arrays = inst.arrays() if inst.n >= 4096 else None
    if arrays is not None:
        st, _, sz, _ = arrays
        return np.lexsort((np.arange(inst.n), st, -sz)).tolist()
    return sorted(range(inst.n), key=lambda i: (-size[i], start[i], i))


def conflict_weights(inst: Instance) -> list[int]:
    """For each buffer, its own size plus the sizes of the buffers it conflicts with,
    from sorted start and end times and prefix sums (no conflict lists)."""
    n = inst.n
    if not n:
        return []
    # j conflicts with i (or is i) iff start_j < end_i and not end_j <= start_i; every j
    # with end_j <= start_i also has start_j < end_i.
    arrays = inst.arrays()
    kind = object if arrays is None else np.int64
    if arrays is None:
        st, en, sz = (np.array(xs, dtype=object) for xs in (inst.start, inst.end, inst.size))
    else:
        st, en, sz, _ = arrays
    by_start = np.argsort(st, kind="stable")
    by_end = np.argsort(en, kind="stable")
    zero = np.zeros(1, dtype=kind)
    sum_start = np.concatenate((zero, np.cumsum(sz[by_start])))
    sum_end = np.concatenate((zero, np.cumsum(sz[by_end])))
    starts, ends = st[by_start], en[by_end]
    if kind is object:
        return [
            int(sum_start[bisect.bisect_left(starts, inst.end[i])])
            - int(sum_end[bisect.bisect_right(ends, inst.start[i])])
            for i in range(n)
        ]
    w = (
        sum_start[np.searchsorted(starts, en, side="left")]
        - sum_end[np.searchsorted(ends, st, side="right")]
    )
    return w.tolist()


def conflict_order(inst: Instance) -> list[int]:
    """Most conflicting bytes first (own size included); ties: larger, earlier, input order."""
    size, start = inst.size, inst.start
    weight = conflict_weights(inst)
    return sorted(range(inst.n), key=lambda i: (-weight[i], -size[i], start[i], i))


def greedy(
    inst: Instance,
    method: str = "greedy-size",
    sc: Scan | None = None,
    pair_budget: int | None = None,
) -> tuple[list[int], int]:
    """A greedy plan (``greedy-size`` or ``greedy-conflict``) and the conflict pairs it
    looked at. When all conflict pairs fit in ``pair_budget`` (default :data:`PAIR_BUDGET`),
    first fit on conflict lists everywhere. Otherwise the sweep places everything (births
    ordered by start, then by the method's key), then first fit re-plans windows of time
    around the buffer on top of the arena while their pairs fit in the budget
    (:func:`replan_windows`): only the highest point matters, so only the pairs near it
    are worth building."""
    sc = sc or scan(inst)
    if pair_budget is None:
        pair_budget = PAIR_BUDGET
    key = size_order if method == "greedy-size" else conflict_order
    if sum(sc.pairs) <= pair_budget:
        return place(inst, key(inst)), sum(sc.pairs)
    off = [0] * inst.n  # singletons sit at 0
    comps = [(m, p) for m, p in zip(sc.components, sc.pairs) if len(m) > 1]
    if not comps:
        return off, 0
    swept = [i for m, _ in comps for i in m]
    arrays = inst.arrays()
    kind = object if arrays is None else np.int64
    idx = np.array(swept, dtype=np.int64)
    if arrays is None:
        st, sz = (np.array(xs, dtype=object)[idx] for xs in (inst.start, inst.size))
    else:
        st, sz = arrays[0][idx], arrays[2][idx]
    if method == "greedy-size":
        keys: tuple[Any, ...] = (idx, -sz, st)
    else:
        w = np.array(conflict_weights(inst), dtype=kind)[idx]
        keys = (idx, -sz, -w, st)
    sweep_place(inst, idx[np.lexsort(keys)].tolist(), off)
    if arrays is None:
        return off, 0  # offsets past 64 bits: the sweep's plan
    used = replan_windows(inst, off, key, pair_budget, sc.max_live)
    return off, used


# Windows of time re-planned by first fit past the pair budget: half-widths in median
# lifetimes, tried in turn (wider when a narrower window cannot lower the top).
WINDOW_RADII = (4, 8, 16, 32, 64, 128)
# Buffers kept in the heap of the highest tops (the rest are known to be lower).
TOP_CANDIDATES = 4096


def replan_windows(
    inst: Instance,
    off: list[int],
    key: Callable[[Instance], list[int]],
    pair_budget: int,
    floor: int,
) -> int:
    """Lower a plan (``off``, changed in place) window by window; returns the conflict
    pairs built.

    The buffer on top of the arena sets its height. A window of time around it is taken
    out: the buffers inside it are placed again by first fit (in the order ``key``
    gives), the ones crossing its borders stay where they are as obstacles (nothing else
    conflicts with a buffer inside). The new placement is kept when the window's highest
    top is lower than the arena was; else a wider window is tried (a window that covers
    a whole component is first fit on it). The next round starts from the new top. It
    stops when the top cannot be lowered, at ``floor`` (a lower bound), or when the
    pairs of the next window (counted before its conflict lists are built) would take the
    total past ``pair_budget``. Deterministic: pairs, not time, end it.
    """
    n = inst.n
    if n < 2 or pair_budget <= 0:
        return 0
    arrays = inst.arrays()
    if arrays is None:
        return 0
    size = inst.size
    st, en, sz, _ = arrays
    order = np.argsort(st, kind="stable")
    s_sorted = st[order]
    reach = np.maximum.accumulate(en[order])  # latest end among the first k by start
    median = max(1, int(np.median(en - st)))
    offn = np.array(off, dtype=np.int64)
    heap: list[tuple[int, int]] = []
    cutoff = 0  # every buffer outside the heap has its top at or below this

    def refill() -> None:
        nonlocal cutoff
        tops = offn + sz
        k = min(n, TOP_CANDIDATES)
        top_k = np.argpartition(-tops, k - 1)[:k] if k < n else np.arange(n)
        cutoff = int(tops[top_k].min()) if k < n else 0
        heap[:] = [(-int(tops[i]), int(i)) for i in top_k]
        heapq.heapify(heap)

    def highest() -> int:
        while True:
            if not heap or -heap[0][0] < cutoff:
                refill()
            t, i = heap[0]
            if -t == off[i] + size[i]:
                return i
            heapq.heappop(heap)  # stale: the buffer moved

    refill()
    used = 0
    while True:
        i = highest()
        top = off[i] + size[i]
        if top <= floor:
            break
        lowered = False
        for radius in WINDOW_RADII:
            a, b = int(st[i]) - radius * median, int(en[i]) + radius * median
            while True:
                k0 = int(np.searchsorted(reach, a, side="right"))
                k1 = int(np.searchsorted(s_sorted, b, side="left"))
                cand = order[k0:k1]
                cand = cand[en[cand] > a]
                inside = (st[cand] >= a) & (en[cand] <= b)
                free, fixed = cand[inside], cand[~inside]
                hot = fixed[offn[fixed] + sz[fixed] >= top]
                if not hot.size:
                    break
                # A buffer as high as the top would stay: the window takes it in.
                a, b = min(a, int(st[hot].min())), max(b, int(en[hot].max()))
            pairs = _pairs(st[cand], en[cand])
            if used + pairs > pair_budget:
                return used
            used += pairs
            members = free.tolist() + fixed.tolist()
            sub = subinstance(inst, members)
            nf = len(free)
            initial = [-1] * nf + offn[fixed].tolist()
            new = place(sub, [k for k in key(sub) if k < nf], initial=initial)
            if max(o + z for o, z in zip(new[:nf], sub.size)) < top:
                for j, o in zip(free.tolist(), new):
                    off[j] = o
                    heapq.heappush(heap, (-(o + size[j]), j))
                offn[free] = new[:nf]
                lowered = True
                break
            if not fixed.size:
                break  # the whole component, by first fit: no wider window helps
        if not lowered:
            break
    return used


def _pairs(st: np.ndarray, en: np.ndarray) -> int:
    """Conflicting pairs among the intervals ``[st, en)``: for each, those that began no
    later (earlier in a stable order) and have not ended by its start."""
    starts = np.sort(st, kind="stable")
    ends = np.sort(en)
    return int((np.arange(len(starts)) - np.searchsorted(ends, starts, side="right")).sum())


def _big(xs: list[int]) -> bool:
    return bool(xs) and (max(xs) >= 1 << 62 or min(xs) <= -(1 << 62))


def components(inst: Instance) -> list[list[int]]:
    """Groups of buffers joined by chains of lifetime overlaps, in time order."""
    return scan(inst).components


def subinstance(inst: Instance, members: Sequence[int]) -> Instance:
    """The buffers ``members`` of ``inst`` as an instance of their own (``index`` maps back)."""
    sub = Instance(
        list(members),
        [inst.start[i] for i in members],
        [inst.end[i] for i in members],
        [inst.size[i] for i in members],
        [inst.align[i] for i in members],
    )
    if inst._nbrs is not None:
        pos = {j: k for k, j in enumerate(members)}
        sub._nbrs = [[pos[j] for j in inst._nbrs[i] if j in pos] for i in members]
    return sub


def max_live(inst: Instance) -> int:
    """Most bytes live at once (the lower bound for this instance)."""
    return scan(inst).max_live

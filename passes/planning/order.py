"""The order of a DAG's nodes that keeps the fewest bytes live at once (an IR-free solver).

An :class:`OrderProblem` is nodes in a written (topological) order, their dependences, and
the buffers they make: each born with the first of its births and freed after its last
user, with in-place credits (a node that is the last user of a buffer may write its result
over it). :func:`schedule` returns an order of the nodes whose peak (:func:`order_peak`) is
never above the written order's, and is the written order on ties. ReorderForMemory reads
a function into such a problem (its cost model) and rebuilds the body in the order found.

**Search.** A node that every other node either precedes or follows (all its ancestors and
descendants together are the whole graph, as in HMCOS's hierarchical decomposition; the
pass's barriers are such nodes; :func:`cuts` finds them in linear time) splits every
topological order in two, and the peak of each part depends on the order inside it only,
so each stretch between such nodes is solved alone. Only a stretch written above the
*floor* (the largest step some node needs in every order: what it reads and makes, less
its best in-place credit) can lower the peak; the others stay as written. Each of the rest,
highest first, gets a greedy order (at each step the node giving the lowest peak, then the
fewest live bytes), then dynamic programming over its downsets (Serenity, MLSys 2020): a
state is the set of nodes run, its value the lowest peak of any order reaching it; the
bytes live after a set depend on the set only, so the search is exact. States that reach
the best peak known so far, or that still have to run a node whose step needs that much
anyway, are dropped. If the exact search needs more than half of the states left, a beam
search replaces it: each level cut to the best states (lowest peak, then fewest live
bytes), at most ``beam`` of them and as many as the budget allows. ``max_states`` bounds
all the work (states visited: each step tried from a state counts one); stretches the
budget does not reach stay as written. The search is deterministic: its work is counted in
states.

The node sets of a stretch are windows (:data:`Window`), not masks over all nodes, and a
stretch of one node is dropped once its written peak and bounds are known, so a long
stretch or a long chain takes memory linear in its length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable


@dataclass
class OrderProblem:
    """Nodes ``0 .. n-1`` in written order (a topological order) and the buffers they make.

    ``preds[v]`` lists ``v``'s direct predecessors (node numbers, each below ``v``). Buffer
    ``b`` has ``sizes[b]`` bytes, is born when the first node of ``births[b]`` runs, and is
    freed once every node of ``users[b]`` (and of ``births[b]``) has run; with no users it
    is live only while the node making it runs. ``inplace[v]`` lists ``(b, bytes)``: when
    ``v`` runs as the last user of buffer ``b``, ``v``'s result takes ``b``'s bytes, so the
    step needs ``bytes`` less.

    The memory of the step running ``v`` after the set ``S`` of nodes already run is the
    bytes live after ``S``, plus the buffers ``v`` makes, minus an in-place credit; the peak
    of an order is its largest step.

    The sets are lists of node numbers, not bit masks over all nodes: a mask naming node
    ``v`` is ``v`` bits long, so masks per node would take memory quadratic in the length
    of the function. The search's sets of nodes run are masks over one stretch, held only
    for the level in hand; every fixed set of a stretch is a window (:data:`Window`)."""

    n: int
    preds: list[tuple[int, ...]]
    sizes: list[int] = field(default_factory=list)
    births: list[tuple[int, ...]] = field(default_factory=list)
    users: list[tuple[int, ...]] = field(default_factory=list)
    inplace: list[list[tuple[int, int]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.inplace:
            self.inplace = [[] for _ in range(self.n)]

    def add_buffer(self, size: int, births: Iterable[int], users: Iterable[int]) -> int:
        self.sizes.append(size)
        self.births.append(tuple(sorted(set(births))))
        self.users.append(tuple(sorted(set(users))))
        return len(self.sizes) - 1

    def is_topological(self, order: list[int]) -> bool:
        done: set[int] = set()
        for v in order:
            if v in done or not set(self.preds[v]) <= done:
                return False
            done.add(v)
        return len(done) == self.n

    def peak(self, order: list[int]) -> int:
        """The peak of ``order``, evaluated step by step from the definition (no search;
        quadratic: a reference for small problems)."""
        done: set[int] = set()
        best = 0
        for v in order:
            live = sum(
                s
                for s, b, u in zip(self.sizes, self.births, self.users)
                if done.intersection(b) and not done.issuperset(u)
            )
            made = sum(
                s for s, b in zip(self.sizes, self.births) if v in b and not done.intersection(b)
            )
            credit = max(
                (c for b, c in self.inplace[v] if set(self.users[b]) - done == {v}), default=0
            )
            best = max(best, live + made - credit)
            done.add(v)
        return best


def order_peak(p: OrderProblem, order: list[int]) -> int:
    """The peak of the topological order ``order`` of ``p``'s nodes, in one sweep (the same
    value as :meth:`OrderProblem.peak`, which evaluates each step from the definition)."""
    if not order:
        return 0
    pos = [0] * p.n
    for t, v in enumerate(order):
        pos[v] = t
    delta = [0] * (len(order) + 1)  # bytes made live at each step, freed after their last
    for size, births, users in zip(p.sizes, p.births, p.users):
        if not size or not births:
            continue
        born = min(pos[v] for v in births)
        last = max((pos[v] for v in users), default=born)
        delta[born] += size
        delta[last + 1] -= size
    last_use = [max((pos[u] for u in users), default=-1) for users in p.users]
    best = live = 0
    for t, v in enumerate(order):
        live += delta[t]
        credit = 0
        for b, c in p.inplace[v]:
            if c > credit and last_use[b] == t:
                credit = c
        best = max(best, live - credit)
    return best


Window = tuple[int, int]
"""A set of nodes of a stretch as ``(base, bits)``: node ``base + i`` for each bit ``i`` of
``bits``. A plain mask naming node ``v`` is ``v`` bits long; a window is as long as the
span of its nodes, so the sets of all nodes of a long stretch take memory linear in it."""


def _window(nodes: Iterable[int]) -> Window:
    nodes = list(nodes)
    if not nodes:
        return 0, 0
    base = min(nodes)
    return base, sum(1 << (v - base) for v in set(nodes))


def _meets(w: Window, done: int) -> bool:
    """Some node of ``w`` is in ``done``."""
    return bool((done >> w[0]) & w[1])


def _not_within(w: Window, done: int) -> bool:
    """Some node of ``w`` is not in ``done``."""
    return bool(w[1] & ~(done >> w[0]))


def _rest_is(w: Window, done: int, v: int) -> bool:
    """The nodes of ``w`` not in ``done`` are exactly ``{v}``."""
    return v >= w[0] and w[1] & ~(done >> w[0]) == 1 << (v - w[0])


@dataclass
class _Local:
    """One buffer as seen from a stretch ``[lo, hi)`` of nodes (windows of local nodes)."""

    size: int
    born_before: bool
    births: Window
    used_after: bool
    users: Window

    def alive(self, done: int) -> bool:
        return (self.born_before or _meets(self.births, done)) and (
            self.used_after or _not_within(self.users, done)
        )


class Stretch:
    """The nodes ``[lo, hi)`` of a problem, with what a step of each needs to know.

    Per node ``v`` (local index): ``made[v]``, the bytes of the buffers only ``v`` makes;
    ``shared[v]``, ``(births, bytes)`` of buffers ``v`` makes unless another of ``births``
    ran first (a concat's result); ``credits[v]``, ``(users, bytes)`` of the in-place
    credits; ``touch[v]``, the buffers whose liveness ``v`` may change.
    """

    def __init__(self, p: OrderProblem, lo: int, hi: int, spans: list[tuple[int, int, int]]):
        self.m = m = hi - lo
        self.preds = [_window(u - lo for u in p.preds[v] if u >= lo) for v in range(lo, hi)]
        self.succs: list[list[int]] = [[] for _ in range(m)]
        for v in range(lo, hi):
            for u in p.preds[v]:
                if u >= lo:
                    self.succs[u - lo].append(v - lo)
        for succ in self.succs:
            succ.sort()
        base = 0  # bytes live all through the stretch
        self.made = [0] * m
        self.shared: list[list[tuple[Window, int]]] = [[] for _ in range(m)]
        self.touch: list[list[_Local]] = [[] for _ in range(m)]
        self.credits: list[list[tuple[Window, int]]] = [[] for _ in range(m)]
        local: dict[int, _Local] = {}
        for b, first, last in spans:
            if last < lo or first >= hi:
                continue
            births, users = p.births[b], p.users[b]
            lb = [v - lo for v in births if lo <= v < hi]
            lu = [v - lo for v in users if lo <= v < hi]
            born_before = any(v < lo for v in births)
            used_after = any(v >= hi for v in users)
            if born_before and not lu and not lb:
                if used_after:
                    base += p.sizes[b]
                continue
            loc = local[b] = _Local(p.sizes[b], born_before, _window(lb), used_after, _window(lu))
            born_here = set(lb)
            for v in sorted(born_here.union(lu)):
                self.touch[v].append(loc)
                if v in born_here and not born_before:
                    if len(born_here) == 1:
                        self.made[v] += loc.size
                    else:
                        self.shared[v].append((loc.births, loc.size))
        for v in range(m):
            for b, c in p.inplace[lo + v]:
                if b in local and not local[b].used_after:
                    self.credits[v].append((local[b].users, c))
        self.live0 = base + sum(s.size for s in local.values() if s.alive(0))
        # A lower bound of each node's step in any order: what it reads and makes is live.
        self.bounds = [
            base
            + sum(s.size for s in self.touch[v])
            - max((c for _, c in self.credits[v]), default=0)
            for v in range(m)
        ]
        self.first_ready = sum(1 << v for v in range(m) if not self.preds[v][1])

    def memory(self, done: int, live: int, v: int) -> int:
        """Bytes of the step running ``v`` after the set ``done`` (``live`` bytes live)."""
        mem = live + self.made[v]
        for births, size in self.shared[v]:
            if not _meets(births, done):
                mem += size
        credit = 0
        for users, c in self.credits[v]:
            if c > credit and _rest_is(users, done, v):
                credit = c
        return mem - credit

    def live_after(self, done: int, live: int, v: int) -> int:
        """Bytes live after ``done`` and then ``v`` (``live`` bytes live after ``done``)."""
        after = done | (1 << v)
        for s in self.touch[v]:
            was, now = s.alive(done), s.alive(after)
            if was != now:
                live += s.size if now else -s.size
        return live

    def ready_after(self, ready: int, done: int, v: int) -> int:
        after = done | (1 << v)
        ready &= ~(1 << v)
        for w in self.succs[v]:
            if not _not_within(self.preds[w], after):
                ready |= 1 << w
        return ready

    def written_peak(self) -> int:
        done, live, best = 0, self.live0, 0
        for v in range(self.m):
            best = max(best, self.memory(done, live, v))
            live = self.live_after(done, live, v)
            done |= 1 << v
        return best


@dataclass
class SearchResult:
    order: list[int]
    peak: int
    written_peak: int
    exact: bool  # every stretch searched exhaustively: no order has a lower peak
    states: int  # states visited


def cuts(p: OrderProblem) -> list[int]:
    """Nodes that every other node precedes or follows, in written order; in time linear in
    the nodes and edges (no set of ancestors per node).

    Every node before ``v`` precedes it exactly when every *sink* of the nodes before ``v``
    (a node none of whose successors is before ``v``) is a direct predecessor of ``v``: from
    any earlier node, successors lead up to such a sink, and a path from a sink to ``v``
    can only be the edge to ``v``. Such a sink is a direct predecessor of ``v`` when its
    first successor is ``v``. So ``v`` is preceded by all when the sinks before it number as
    many as the nodes whose first successor is ``v``; and, the same way mirrored, followed by
    all when the sources after it number as many as the nodes whose last predecessor is
    ``v``."""
    n = p.n
    first_succ = [n] * n  # n: none
    last_pred = [-1] * n
    for v in range(n):
        for u in p.preds[v]:
            if first_succ[u] == n:
                first_succ[u] = v
            if u > last_pred[v]:
                last_pred[v] = u
    first_of = [0] * (n + 1)  # v -> how many nodes have v as first successor
    for u in range(n):
        first_of[first_succ[u]] += 1
    last_of = [0] * n  # v -> how many nodes have v as last predecessor
    for w in range(n):
        if last_pred[w] >= 0:
            last_of[last_pred[w]] += 1
    after = [False] * n  # every later node follows v
    sources = 0  # nodes after v with no predecessor after v
    for v in reversed(range(n)):
        after[v] = sources == last_of[v]
        sources += 1 - last_of[v]
    out = []
    sinks = 0  # nodes before v with no successor before v
    for v in range(n):
        if sinks == first_of[v] and after[v]:
            out.append(v)
        sinks += 1 - first_of[v]
    return out


def buffer_spans(p: OrderProblem) -> list[tuple[int, int, int]]:
    """(buffer, first node touching it, last node touching it)."""
    out = []
    for b, (births, users) in enumerate(zip(p.births, p.users)):
        if (births or users) and p.sizes[b]:
            nodes = births + users
            out.append((b, min(nodes), max(nodes)))
    return out


def schedule(p: OrderProblem, beam: int = 64, max_states: int = 100_000) -> SearchResult:
    """The order of ``p``'s nodes with the lowest peak the search finds (see the module
    docstring); never above the written order's peak, and the written order on ties.

    ``max_states`` bounds the work: the states visited (one per step tried from a state)
    over all stretches; ``beam`` is the widest level the heuristic keeps."""
    spans = buffer_spans(p)
    pieces: list[tuple[int, int]] = []
    start = 0
    for c in cuts(p):
        if start < c:
            pieces.append((start, c))
        pieces.append((c, c + 1))
        start = c + 1
    if start < p.n:
        pieces.append((start, p.n))
    # Only stretches of two nodes or more can be searched: the others give their written
    # peak and bounds and are dropped at once (a chain is one stretch per node).
    stretches: dict[int, Stretch] = {}
    written_peaks: list[int] = []
    floor = 0  # every order reaches this at some step: a stretch at or below it stays
    spans.sort(key=lambda b: b[1])
    active: list[tuple[int, int, int]] = []  # buffers touched at or before the piece
    k = 0
    for i, (lo, hi) in enumerate(pieces):
        while k < len(spans) and spans[k][1] < hi:
            active.append(spans[k])
            k += 1
        active = [b for b in active if b[2] >= lo]  # not over before the piece
        st = Stretch(p, lo, hi, active)
        written_peaks.append(st.written_peak())
        floor = max(floor, max(st.bounds, default=0))
        if st.m > 1:
            stretches[i] = st
    orders: list[list[int] | None] = [None] * len(pieces)
    peaks = list(written_peaks)
    exact = True
    used = 0
    todo = [i for i, w in enumerate(written_peaks) if w > floor and i in stretches]
    for i in sorted(todo, key=lambda i: (-written_peaks[i], i)):  # the highest first
        st, w = stretches[i], written_peaks[i]
        found, peak, complete, work = _solve(st, w, beam, max_states - used)
        used += work
        exact = exact and complete
        if found is not None:
            orders[i], peaks[i] = found, peak
    peak, written = max(peaks, default=0), max(written_peaks, default=0)
    if peak >= written:
        # A stretch below the peak may have been lowered while the one holding it was not:
        # nothing better overall, so the written order (ties keep it).
        return SearchResult(list(range(p.n)), written, written, exact, used)
    order: list[int] = []
    for (lo, hi), found in zip(pieces, orders):
        order.extend(range(lo, hi) if found is None else (lo + v for v in found))
    return SearchResult(order, peak, written, exact, used)


def _solve(
    st: Stretch, written: int, beam: int, budget: int
) -> tuple[list[int] | None, int, bool, int]:
    """The best order of one stretch found within ``budget`` states, if below ``written``.

    First a greedy order (a beam of one: the step with the lowest peak, then the fewest live
    bytes), which bounds what the exact search must beat; then the exact search over all
    downsets, given half of what is left; if that runs out, a beam as wide as the rest of
    the budget allows (at most ``beam``). Returns (order or None, its peak, whether the
    answer is exact, states visited)."""
    if budget <= 0:
        return None, written, False, 0
    best, best_peak = None, written
    order, peak, complete, used = _search(st, written, 1, budget)
    if order is not None:
        best, best_peak = order, peak
    if complete:
        return best, best_peak, True, used
    greedy_cost = max(used, 1)
    order, peak, complete, work = _search(st, best_peak, None, (budget - used) // 2)
    used += work
    if complete:
        return (order, peak, True, used) if order is not None else (best, best_peak, True, used)
    width = min(beam, (budget - used) // greedy_cost)
    if width >= 2:
        order, peak, _, work = _search(st, best_peak, width, budget - used)
        used += work
        if order is not None:
            best, best_peak = order, peak
    return best, best_peak, False, used


def _search(
    st: Stretch, limit: int, width: int | None, budget: int
) -> tuple[list[int] | None, int, bool, int]:
    """Forward dynamic programming over the downsets of a stretch for an order whose peak is
    below ``limit``; with a ``width``, each level is cut to that many states (the lowest
    peaks, then the fewest live bytes). A state that has reached ``limit``, or whose nodes
    still to run include one whose step needs ``limit`` in any order, is dropped. Stops
    after ``budget`` states visited. Returns (the best order found, or None; its peak;
    whether the answer is exact: no level was cut and the budget sufficed; states
    visited)."""
    # state (set of nodes run) -> [peak so far, live after, ready mask, parent, last node];
    # the parent is the number of a state of the level before (in its order), and the levels
    # passed keep only (parent, last node): the sets themselves are dropped with their level.
    level: dict[int, list[int]] = {0: [0, st.live0, st.first_ready, -1, -1]}
    history: list[list[tuple[int, int]]] = []
    cut = False
    used = 0
    memory, live_after, ready_after = st.memory, st.live_after, st.ready_after
    by_bound = [v for b, v in sorted(zip(st.bounds, range(st.m)), reverse=True) if b >= limit]
    for _ in range(st.m):
        nxt: dict[int, list[int]] = {}
        for number, (done, (peak, live, ready, _, _)) in enumerate(level.items()):
            used += ready.bit_count()
            r = ready
            while r:
                low = r & -r
                r ^= low
                v = low.bit_length() - 1
                mem = memory(done, live, v)
                if mem >= limit:
                    continue
                new_peak = peak if peak >= mem else mem
                child = done | low
                old = nxt.get(child)
                if old is None:
                    if any(not child >> u & 1 for u in by_bound):
                        continue  # a node still to run needs ``limit`` wherever it runs
                    nxt[child] = [
                        new_peak,
                        live_after(done, live, v),
                        ready_after(ready, done, v),
                        number,
                        v,
                    ]
                elif new_peak < old[0]:
                    old[0], old[3], old[4] = new_peak, number, v
            if used > budget:
                return None, 0, False, used
        if not nxt:
            return None, 0, not cut, used  # no order below ``limit`` (proven unless cut)
        if width is not None and len(nxt) > width:
            cut = True
            ranked = sorted(nxt.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[0]))
            nxt = dict(ranked[:width])
        history.append([(entry[3], entry[4]) for entry in level.values()])
        level = nxt
    full = (1 << st.m) - 1
    peak, _, _, parent, v = level[full]
    order = [v]
    for k in range(st.m - 1, 0, -1):  # back from level m to level 1
        parent, v = history[k][parent]
        order.append(v)
    order.reverse()
    return order, peak, not cut, used


__all__ = [
    "OrderProblem",
    "SearchResult",
    "Stretch",
    "Window",
    "buffer_spans",
    "cuts",
    "order_peak",
    "schedule",
]

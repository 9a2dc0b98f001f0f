"""ReorderForMemory: reorder the independent bindings of a function to lower its peak memory.

Guarantees: every non-primitive function keeps the same statements, each computing the same
value; only the order of bindings that do not depend on one another changes, and the new
order is a topological order of the data dependences. Statements whose order may matter are
never moved past one another: an expression statement (a kill, a runtime call written for
its effect), a binding of an effectful or runtime op (``call_packed``), and a call of a
function that contains any of these are *barriers*: everything written before one stays
before it, everything after stays after. The new order's peak of live bytes under the model
below is never above the written order's; when it is not strictly below, the function is
left exactly as written. A function that was modelled gets two attributes,
``order_peak_written = N`` and ``order_peak_chosen = M``: the model's peak (bytes) in the
order it was given (kept from an earlier run when present) and in the order it now has, so
the report can show both. The search is deterministic: its work is counted in states.

Left to later passes: it allocates nothing and plans nothing. It runs on the dataflow IR,
before ManifestAlloc (a function that already has explicit memory, planned or not, is
left as it is, so that the pipelines accept their own output again); PlanMemory, and the
in-place and elision rewrites the model anticipates, decide
the memory. Functions with a tensor whose size is unbounded (a symbolic dim without
``upper_bounds``) are left as written, without the attributes.

**Analysis (the cost model).** Per buffer, the way PlanMemory's lower bound counts it (the
most bytes live at once, see :mod:`relaxc.passes.memory_report`): each value computed by a
kernel op or a primitive function (each field of a tuple result apart, as ManifestAlloc
allocates them) is a buffer of its byte size, at the upper bounds, rounded up to ``align``.
Parameters, constants, values reaching the return and values kept by a runtime function are
not intermediates and cost nothing; the result of a call of a non-primitive function is the
callee's to allocate and costs nothing here either. A buffer is live from the statement
computing it to the last statement using any value that refers to it: views, aliases, tuples
and projections cost nothing and extend their source's life (alias analysis per buffer, as
:mod:`relaxc.ir.alias`). Three anticipated rewrites, options on by default:

* ``inplace``: ``%y = op(..., %x, ...)`` where the op's record (``OpDef.inplace``) lists
  ``%x``'s position, ``%x`` is an intermediate computed by a kernel (not a view or alias of
  anything, not a parameter, constant or returned value), ``%y`` is an intermediate of
  ``%x``'s shape and dtype, and this statement is the last use of ``%x``'s buffer (through
  views too, in the order being measured), and no other input of the op reads those bytes
  (but ``%x`` again where the op allows): ``%y`` takes ``%x``'s bytes, no new allocation.
* ``concat``: ``%r = concat(%a, %b, ..., axis=k)`` where every dim of ``%r`` before axis
  ``k`` is a static 1 (each input a contiguous slice), ``%r`` is an intermediate and the
  inputs are distinct intermediates, each computed by a kernel op (not a concat) and used by
  nothing but this concat, all shapes static: ``%r``'s bytes are born when the first of
  its inputs is computed, and the inputs cost nothing of their own (they are written into
  their slices; none of them is then computed in place).
* ``split``: the outputs of ``split(%x, ..., axis=k)`` where every dim of ``%x`` before
  ``k`` is 1, at static shapes, are views of ``%x``: they cost nothing and keep it live.

These follow ComputeInPlace and ElideConcatSplit, with stricter conditions where those go
further (a concat input also read elsewhere, an input moved into a slice or into an
output: not modelled, so such savings are missed). ElideConcatSplit keeps its rewrite of a
function only when it lowers the bytes live at once, so with ``concat`` or ``split`` on, an
order costs the lower of its peaks with those elisions and without them (each searched).

Statements that allocate nothing and whose every use of a buffer is followed by a later use
of the same buffer (views, aliases, tuples, constants, with a consumer) cannot change the
peak wherever they stand: they are left out of the search and placed just before their
first consumer (or, with none, at the end of their stretch between barriers). The others
are the *nodes* of the scheduling problem, with the dependences between them (through the
left-out statements).

**Search.** A node that every other node either precedes or follows (all its ancestors and
descendants together are the whole graph, as in HMCOS's hierarchical decomposition;
barriers are such nodes) splits every topological order in two, and the peak of each part
depends on the order inside it only, so each stretch between such nodes is solved alone.
Only a stretch written above the *floor* (the largest step some node needs in every order:
what it reads and makes, less its best in-place credit) can lower the function's peak; the
others stay as written. Each of the rest, highest first, gets a greedy order (at each step
the node giving the lowest peak, then the fewest live bytes), then dynamic programming over
its downsets (Serenity, MLSys 2020): a state is the set of nodes run, its value the lowest
peak of any order reaching it; the bytes live after a set depend on the set only, so the
search is exact. States that reach the best peak known so far, or that still have to run a
node whose step needs that much anyway, are dropped. If the exact search needs more than
half of the states left, a beam search replaces it: each level cut to the best states
(lowest peak, then fewest live bytes), at most ``beam`` of them and as many as the budget
allows. ``max_states`` bounds all the work (states visited: each step tried from a state
counts one); stretches the budget does not reach stay as written.

**Rewrite.** Each stretch takes the better of its written order and the order found (the
written one on ties). When the function's peak improves (the lower of the models' peaks,
each order measured under both), the body is rebuilt in the new order of nodes, every
left-out statement just before its first consumer; the attributes are set either way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, Iterable, Mapping

from relaxc.ir import dims as D
from relaxc.ir.alias import flatten, param_aliases_of_result
from relaxc.ir.nodes import (
    Bind,
    Call,
    CallFunc,
    Effect,
    Function,
    Invoke,
    Module,
    Project,
    Stmt,
    TupleExpr,
    Var,
    expr_vars,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.ops.memory import MAX_ALIGN
from relaxc.ir.packed import packed_spec
from relaxc.ir.registry import bind_args
from relaxc.ir.sizes import round_up, round_up_dim, tensor_nbytes
from relaxc.ir.types import TensorType, TupleType, Type
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.vocab import ALLOC_OPS, CONST, is_int
from relaxc.ir.walk import map_functions

from .base import Pass, module_types

WRITTEN_ATTR = "order_peak_written"
CHOSEN_ATTR = "order_peak_chosen"


# ---------------------------------------------------------------------------------------
# The scheduling problem and its exact evaluation.


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


class _Stretch:
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


def _cuts(p: OrderProblem) -> list[int]:
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


def _spans(p: OrderProblem) -> list[tuple[int, int, int]]:
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
    spans = _spans(p)
    pieces: list[tuple[int, int]] = []
    start = 0
    for c in _cuts(p):
        if start < c:
            pieces.append((start, c))
        pieces.append((c, c + 1))
        start = c + 1
    if start < p.n:
        pieces.append((start, p.n))
    # Only stretches of two nodes or more can be searched: the others give their written
    # peak and bounds and are dropped at once (a chain is one stretch per node).
    stretches: dict[int, _Stretch] = {}
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
        st = _Stretch(p, lo, hi, active)
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
    order: list[int] = []
    for (lo, hi), found in zip(pieces, orders):
        order.extend(range(lo, hi) if found is None else (lo + v for v in found))
    return SearchResult(order, max(peaks, default=0), max(written_peaks, default=0), exact, used)


def _solve(
    st: _Stretch, written: int, beam: int, budget: int
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
    st: _Stretch, limit: int, width: int | None, budget: int
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


# ---------------------------------------------------------------------------------------
# From a function to the problem.

_KERNEL, _FREE, _NODE, _BARRIER = "kernel", "free", "node", "barrier"


@dataclass
class _Model:
    problem: OrderProblem
    stmt_of: list[int]  # node -> index of its statement in the body
    free: list[bool]  # per statement: left out of the search
    barrier_stmts: list[int]


@dataclass(frozen=True)
class _Callees:
    """What the walks of one module's functions share: the functions by name, and whether
    each has effects (:func:`_has_effects`, filled in as asked). Made once per module, so
    a module of n functions calling each other is walked in O(n), not O(n^2)."""

    functions: Mapping[str, Function]
    effects: dict[str, bool]

    @staticmethod
    def of(module: Module) -> "_Callees":
        return _Callees(module.by_name, {})


def _has_effects(fn: Function, functions: dict[str, Function], memo: dict[str, bool]) -> bool:
    """True if ``fn`` (or a function it calls) has an expression statement or an effectful
    or runtime op: its call must keep its place among the other barriers. Callees are
    decided first, with an explicit stack (a chain of thousands of calls is no deeper)."""
    stack = [fn.name]
    on_stack = {fn.name}
    while stack:
        name = stack[-1]
        if name in memo:
            on_stack.discard(stack.pop())
            continue
        f = functions.get(name)
        if f is None:
            memo[name] = True
            on_stack.discard(stack.pop())
            continue
        pending = [
            s.value.func
            for s in f.body
            if isinstance(s.value, CallFunc)
            and s.value.func not in memo
            and s.value.func not in on_stack  # recursion (refused by the verifier)
        ]
        if pending:
            stack.extend(pending)
            on_stack.update(pending)
            continue
        on_stack.discard(stack.pop())
        memo[name] = _own_effects(f, functions, memo)
    return memo[fn.name]


def _own_effects(fn: Function, functions: dict[str, Function], memo: dict[str, bool]) -> bool:
    """``fn`` has effects itself or calls a function that has (callees already in ``memo``;
    a callee missing from it is on the current call path: recursion, assume the worst)."""
    for s in fn.body:
        if isinstance(s, Effect) or isinstance(s.value, Invoke):
            return True
        if isinstance(s.value, Call):
            op = REGISTRY.get(s.value.op)
            if op is None or op.effectful or op.category in ("runtime", "memory"):
                return True
        elif isinstance(s.value, CallFunc):
            callee = functions.get(s.value.func)
            if callee is None or memo.get(callee.name, True):
                return True
    return False


def _size(t: TensorType, bounds: dict[str, int], align: int, cache: dict) -> int | None:
    key = (t, align)
    if key not in cache:
        nbytes = round_up_dim(tensor_nbytes(t), align)
        ub = nbytes if isinstance(nbytes, int) else D.upper_bound(nbytes, bounds)
        cache[key] = None if ub is None else round_up(max(ub, 0), align)
    return cache[key]


def _same_type(a: Type | None, b: Type | None) -> bool:
    return (
        isinstance(a, TensorType)
        and isinstance(b, TensorType)
        and a.dtype == b.dtype
        and len(a.shape) == len(b.shape)
        and all(D.dims_equal(x, y) for x, y in zip(a.shape, b.shape))
    )


def _split_is_view(op, e: Call, args: list[Var], name: str | None, types: dict[str, Type]) -> bool:
    """ElideConcatSplit makes this split's outputs views of its input: static shapes, and
    every dim of the input before the axis is 1 (each output one run of its bytes)."""
    t = types.get(args[0].name) if args else None
    out = types.get(name or "")
    if not isinstance(t, TensorType) or not t.is_static() or not isinstance(out, TupleType):
        return False
    if not all(isinstance(f, TensorType) and f.is_static() for f in out.fields):
        return False
    axis = bind_args(op, e.args, e.kwargs).attrs.get("axis")
    if not is_int(axis):
        return False
    axis = axis + len(t.shape) if axis < 0 else axis
    return 0 <= axis < len(t.shape) and all(d == 1 for d in t.shape[:axis])


class _Walk:
    """One walk over a function's body: what kind of statement each is, the buffers (alias
    roots) each value may refer to, and the buffers kernels make."""

    def __init__(
        self, fn: Function, module: Module, types: dict[str, Type], split: bool, callees: _Callees
    ):
        self.fn, self.module, self.types, self.split = fn, module, types, split
        self.functions = callees.functions
        self.effects_memo = callees.effects
        self.kind: list[str] = []
        self.trees: dict[str, object] = {p.name: frozenset() for p in fn.params}  # no buffer
        self.defined_at: dict[str, int] = {}
        self.made: dict[object, tuple[int, TensorType]] = {}  # root -> (statement, type)
        self.escaping: set = set()
        self.kernel_op_results: set[str] = set()  # one tensor computed by a kernel op
        self.supported = True
        for i, s in enumerate(fn.body):
            name = s.name if isinstance(s, Bind) else None
            k, tree = self._classify(s, name)
            if k == _KERNEL:
                tree = self._kernel_result(i, s, name)
            self.kind.append(k)
            if name is not None:
                self.trees[name] = tree
                self.defined_at[name] = i

    def roots(self, name: str) -> frozenset:
        return flatten(self.trees.get(name, frozenset()))

    def _classify(self, s: Stmt, name: str | None) -> tuple[str, object]:
        e = s.value
        if isinstance(s, Effect) or isinstance(e, Invoke):
            return _BARRIER, frozenset()
        if isinstance(e, Var):
            return _FREE, self.trees.get(e.name, frozenset())
        if isinstance(e, TupleExpr):
            return _FREE, tuple(self.trees.get(v.name, frozenset()) for v in e.fields)
        if isinstance(e, Project):
            src = self.trees.get(e.tuple_var.name, frozenset())
            ok = isinstance(src, tuple) and e.index < len(src)
            return _FREE, src[e.index] if ok else flatten(src)
        if isinstance(e, CallFunc):
            return self._classify_call(e)
        assert isinstance(e, Call)
        op = REGISTRY.get(e.op)
        args = [a for a in e.args if isinstance(a, Var)]
        if op is None or op.effectful or op.category in ("runtime", "memory"):
            tree = frozenset().union(*(self.roots(a.name) for a in args))
            if op is None or op.category == "runtime":
                if packed_spec(e.args[0] if e.args else None).keeps_args:
                    self.escaping |= tree
            return _BARRIER, tree
        if op.is_view:
            return _FREE, self.roots(args[0].name) if args else frozenset()
        if e.op == CONST:
            return _FREE, frozenset()
        if self.split and e.op == "split" and _split_is_view(op, e, args, name, self.types):
            out = self.types.get(name or "")
            n_out = len(out.fields) if isinstance(out, TupleType) else 1
            return _FREE, tuple(self.roots(args[0].name) for _ in range(n_out))  # views
        return _KERNEL, frozenset()

    def _classify_call(self, e: CallFunc) -> tuple[str, object]:
        callee = self.functions.get(e.func)
        if callee is None or (
            not callee.is_primitive and _has_effects(callee, self.functions, self.effects_memo)
        ):
            return _BARRIER, frozenset().union(*(self.roots(a.name) for a in e.args))
        if callee.is_primitive:
            return _KERNEL, frozenset()
        # The callee allocates its result (no bytes here); it may return (a view of) an argument.
        aliased = param_aliases_of_result(callee, self.module)
        return _NODE, frozenset().union(
            *(self.roots(a.name) for j, a in enumerate(e.args) if j in aliased)
        )

    def _kernel_result(self, i: int, s: Stmt, name: str | None) -> object:
        """The buffers a kernel's result is: one per tensor (per field of a tuple)."""
        assert name is not None
        t = self.types.get(name)
        if isinstance(t, TensorType):
            self.made[name] = (i, t)
            if isinstance(s.value, Call):
                self.kernel_op_results.add(name)
            return frozenset({name})
        if isinstance(t, TupleType) and all(isinstance(f, TensorType) for f in t.fields):
            for j, leaf in enumerate(t.fields):
                assert isinstance(leaf, TensorType)
                self.made[(name, j)] = (i, leaf)
            return tuple(frozenset({(name, j)}) for j in range(len(t.fields)))
        self.supported = False
        return frozenset()


def build_model(
    fn: Function,
    module: Module,
    types: dict[str, Type],
    *,
    align: int = 64,
    inplace: bool = True,
    concat: bool = True,
    split: bool = True,
    callees: _Callees | None = None,
) -> _Model | None:
    """The scheduling problem of ``fn``, or None when a buffer's size is unbounded
    (``callees``: the module's, shared by the calls for its functions)."""
    w = _Walk(fn, module, types, split, callees if callees is not None else _Callees.of(module))
    if not w.supported:
        return None
    body, kind = fn.body, w.kind
    ret_vars = list(expr_vars(fn.ret))
    returned = frozenset().union(*(w.roots(v.name) for v in ret_vars))
    bounds, cache = fn.upper_bounds(), {}
    size: dict[object, int] = {}  # intermediate -> its bytes
    for r, (_, t) in w.made.items():
        if r not in returned and r not in w.escaping:
            nbytes = _size(t, bounds, align, cache)
            if nbytes is None:
                return None  # an unbounded size: leave the function as written
            size[r] = nbytes
    consumers: dict[str, list[int]] = {}
    uses: list[frozenset] = []  # per statement: the intermediates it reads
    for i, s in enumerate(body):
        u: frozenset = frozenset()
        for v in expr_vars(s.value):
            consumers.setdefault(v.name, []).append(i)
            u = u | w.roots(v.name)
        uses.append(frozenset(r for r in u if r in size))
    # Left out of the search: allocates nothing, and a consumer reads all it reads later.
    free = [
        kind[i] == _FREE and (not uses[i] or (uses[i] <= w.roots(s.name) and s.name in consumers))
        for i, s in enumerate(body)
    ]
    stmt_of = [i for i in range(len(body)) if not free[i]]
    node_of = {i: g for g, i in enumerate(stmt_of)}
    p = OrderProblem(len(stmt_of), _dependences(body, kind, free, node_of, w.defined_at))
    slice_of = _concat_slices(w, body, size, consumers, ret_vars) if concat else {}
    births: dict[object, list[int]] = {}  # concat result -> the nodes computing its slices
    for a, r in slice_of.items():
        births.setdefault(r, []).append(node_of[w.defined_at[a]])
    users: dict[object, list[int]] = {}  # intermediate -> the nodes reading it
    for i in stmt_of:
        for r in uses[i]:
            users.setdefault(r, []).append(node_of[i])
    buffer_of: dict[object, int] = {}
    for r, nbytes in size.items():
        if r not in slice_of:
            made_at = [node_of[w.made[r][0]]]
            buffer_of[r] = p.add_buffer(nbytes, births.get(r, made_at), users.get(r, ()))
    if inplace:
        for i, credit in _inplace_credits(w, body, buffer_of, slice_of, p.sizes):
            p.inplace[node_of[i]].append(credit)
    barriers = [i for i in stmt_of if kind[i] == _BARRIER]
    return _Model(p, stmt_of, free, barriers)


def _dependences(
    body: tuple[Stmt, ...],
    kind: list[str],
    free: list[bool],
    node_of: dict[int, int],
    defined_at: dict[str, int],
) -> list[tuple[int, ...]]:
    """Each node's predecessors: the nodes it reads, directly or through left-out
    statements; a barrier follows every node since the previous one, and precedes every node
    until the next."""
    deps: dict[int, set[int]] = {}  # per left-out statement: the nodes it depends on
    preds: list[tuple[int, ...]] = [()] * len(node_of)
    start, last_barrier = 0, -1
    for i, s in enumerate(body):
        d: set[int] = set()
        for v in expr_vars(s.value):
            j = defined_at.get(v.name)
            if j is not None:
                if free[j]:
                    d |= deps[j]
                else:
                    d.add(node_of[j])
        if free[i]:
            deps[i] = d
            continue
        g = node_of[i]
        if kind[i] == _BARRIER:
            d.update(range(start, g))
            start, last_barrier = g + 1, g
        elif last_barrier >= 0:
            d.add(last_barrier)
        preds[g] = tuple(sorted(d))
    return preds


def _concat_slices(
    w: _Walk,
    body: tuple[Stmt, ...],
    size: dict[object, int],
    consumers: dict[str, list[int]],
    ret_vars: list[Var],
) -> dict[str, str]:
    """Each concat input written into its slice of the result -> that result."""
    returned = {v.name for v in ret_vars}
    slice_of: dict[str, str] = {}
    for i, s in enumerate(body):
        e = s.value
        if w.kind[i] != _KERNEL or not isinstance(e, Call) or e.op != "concat":
            continue
        assert isinstance(s, Bind)
        t = w.types.get(s.name)
        if s.name not in size or not isinstance(t, TensorType) or not t.is_static():
            continue
        op = REGISTRY.get(e.op)
        assert op is not None
        bound = bind_args(op, e.args, e.kwargs)  # verified: it binds
        inputs = [a.name for a in bound.inputs]
        axis = bound.attrs.get("axis")
        if not is_int(axis):
            continue
        axis = axis + len(t.shape) if axis < 0 else axis
        if not 0 <= axis < len(t.shape) or any(d != 1 for d in t.shape[:axis]):
            continue
        if not inputs or len(set(inputs)) != len(inputs):
            continue

        def qualifies(a: str) -> bool:
            made = body[w.defined_at[a]].value if a in w.defined_at else None
            return (
                a in w.kernel_op_results
                and a in size
                and isinstance(made, Call)
                and made.op != "concat"
                and consumers.get(a) == [i]
                and a not in returned
                and a not in slice_of
            )

        if all(qualifies(a) for a in inputs):
            for a in inputs:
                slice_of[a] = s.name
    return slice_of


def _inplace_credits(
    w: _Walk,
    body: tuple[Stmt, ...],
    buffer_of: dict[object, int],
    slice_of: dict[str, str],
    sizes: list[int],
) -> list[tuple[int, tuple[int, int]]]:
    """(statement, (buffer, bytes)): the statement's result may take that input's bytes."""
    out = []
    for i, s in enumerate(body):
        e = s.value
        if w.kind[i] != _KERNEL or not isinstance(e, Call) or not isinstance(s, Bind):
            continue
        op = REGISTRY.get(e.op)
        y = s.name
        if op is None or not op.inplace or y not in buffer_of or y in slice_of:
            continue
        inputs = [a for a in e.args if isinstance(a, Var)]
        best: tuple[int, int] | None = None
        for pos in op.inplace:
            if pos >= len(inputs):
                continue
            x = inputs[pos].name
            j = w.defined_at.get(x)
            if j is None or w.kind[j] != _KERNEL or x not in buffer_of:
                continue
            if w.trees.get(x) != frozenset({x}) or not _same_type(w.types.get(x), w.types.get(y)):
                continue
            if any(
                q != pos and x in w.roots(a.name) and (a.name != x or q not in op.inplace)
                for q, a in enumerate(inputs)
            ):
                continue  # another input reads those bytes while they are written
            b = buffer_of[x]
            if best is None or sizes[b] > best[1]:
                best = (b, sizes[b])
        if best is not None:
            out.append((i, best))
    return out


def _emit(fn: Function, model: _Model, order: list[int]) -> list[int]:
    """The statements (indices into the body) in the order of nodes ``order``, each left-out
    statement pulled just before its first consumer (in written order among themselves), the
    rest at the end of their stretch between barriers."""
    body = fn.body
    free = model.free
    defined_at = {s.name: i for i, s in enumerate(body) if isinstance(s, Bind)}
    emitted = [False] * len(body)
    out: list[int] = []

    def pull(i: int) -> None:
        todo = [i]
        found: set[int] = set()
        while todo:
            k = todo.pop()
            for v in expr_vars(body[k].value):
                j = defined_at.get(v.name)
                if j is not None and free[j] and not emitted[j] and j not in found:
                    found.add(j)
                    todo.append(j)
        for j in sorted(found):
            emitted[j] = True
            out.append(j)

    def emit(i: int) -> None:
        pull(i)
        emitted[i] = True
        out.append(i)

    barrier_set = set(model.barrier_stmts)
    swept = 0  # every left-out statement before this one is emitted
    for g in order:
        i = model.stmt_of[g]
        if i in barrier_set:  # the end of a stretch: what is left of it goes first
            for j in range(swept, i):
                if free[j] and not emitted[j]:
                    emit(j)
            swept = max(swept, i)
        emit(i)
    for j in range(len(body)):
        if not emitted[j]:
            emit(j)
    return out


@dataclass(frozen=True)
class ReorderForMemory(Pass):
    """Reorder independent bindings so that fewer bytes are live at once."""

    name: ClassVar[str] = "ReorderForMemory"
    summary: ClassVar[str] = (
        "reorder independent bindings (a topological order) to lower the peak of live bytes"
    )

    inplace: bool = True
    concat: bool = True
    split: bool = True
    align: int = 64
    beam: int = 64
    max_states: int = 100_000

    def __post_init__(self) -> None:
        if self.align <= 0 or self.align & (self.align - 1) or self.align > MAX_ALIGN:
            raise ValueError(f"align={self.align} is not a power of two from 1 to {MAX_ALIGN}")
        if self.beam < 1:
            raise ValueError(f"beam={self.beam} must be 1 or more")
        if self.max_states < 0:
            raise ValueError(f"max_states={self.max_states} must be 0 or more")

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        types = module_types(module, types)
        callees = _Callees.of(module)
        return map_functions(
            module,
            lambda fn: (
                fn
                if fn.is_primitive or _has_explicit_memory(fn)
                else self._function(fn, module, types, callees)
            ),
        )

    def _function(
        self, fn: Function, module: Module, types: ModuleTypes, callees: _Callees
    ) -> Function:
        # ElideConcatSplit keeps its rewrite only where it lowers the bytes live at once:
        # an order costs the lower of its peaks with and without the elisions.
        variants = [(self.concat, self.split)]
        if self.concat or self.split:
            variants.append((False, False))
        models = []
        for concat, split in variants:
            model = build_model(
                fn,
                module,
                types[fn.name],
                align=self.align,
                inplace=self.inplace,
                concat=concat,
                split=split,
                callees=callees,
            )
            if model is None or not any(model.problem.sizes):
                return fn
            models.append(model)
        written = min(order_peak(m.problem, list(range(m.problem.n))) for m in models)
        best: tuple[int, list[int]] | None = None
        used = 0
        for model in models:
            result = schedule(model.problem, beam=self.beam, max_states=self.max_states - used)
            used += result.states
            if result.peak >= written:
                continue
            stmts = _emit(fn, model, result.order)
            peak = min(order_peak(m.problem, _nodes_in(m, stmts)) for m in models)
            if peak < written and (best is None or peak < best[0]):
                best = (peak, stmts)
        body = fn.body if best is None else tuple(fn.body[i] for i in best[1])
        earlier = fn.attr(WRITTEN_ATTR)
        attrs = {
            WRITTEN_ATTR: earlier if is_int(earlier) else written,
            CHOSEN_ATTR: written if best is None else best[0],
        }
        return _with_attrs(fn, body, attrs)


def _nodes_in(model: _Model, stmts: list[int]) -> list[int]:
    """The order of ``model``'s nodes in the statement order ``stmts``."""
    node_of = {i: g for g, i in enumerate(model.stmt_of)}
    return [node_of[i] for i in stmts if i in node_of]


def _has_explicit_memory(fn: Function) -> bool:
    """``fn`` already has explicit memory (its allocations, and any plan, fix its order), as
    the ``-t ir`` output of ``relaxc build`` has: it is left as it is."""
    return any(
        isinstance(s.value, Invoke) or (isinstance(s.value, Call) and s.value.op in ALLOC_OPS)
        for s in fn.body
    )


def _with_attrs(fn: Function, body: tuple[Stmt, ...], new: dict[str, int]) -> Function:
    """``fn`` with ``body`` and the attributes ``new`` (replacing earlier ones, at the end)."""
    return dataclasses.replace(fn.with_attrs(new), body=body)

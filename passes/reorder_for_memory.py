"""ReorderForMemory: reorder the independent bindings of a function to lower its peak memory.

Guarantees: every non-primitive function keeps the same statements, each computing the same
value; only the order of bindings that do not depend on one another changes, and the new
order is a topological order of the data dependences. Statements whose order may matter are
never moved past one another: an expression statement (a kill, a runtime call written for
its effect), a binding of an effectful or runtime op (``call_packed``), and a call of a
function that contains any of these are *barriers*: everything written before one stays
before it, everything after stays after. The new order's peak of live bytes under the cost
model (:func:`build_model`) is never above the written order's; when it is not strictly
below, the function is left exactly as written. A function that was modelled gets two
attributes, ``order_peak_written = N`` and ``order_peak_chosen = M``: the model's peak
(bytes) in the order it was given (kept from an earlier run when present) and in the order
it now has, so the report can show both. The search is deterministic: its work is counted
in states (``max_states``).

Left to later passes: it allocates nothing and plans nothing. It runs on the dataflow IR,
before ManifestAlloc (a function that already has explicit memory, planned or not, is
left as it is, so that the pipelines accept their own output again); PlanMemory, and the
in-place and elision rewrites the model anticipates, decide the memory. Functions with a
tensor whose size is unbounded (a symbolic dim without ``upper_bounds``) are left as
written, without the attributes.

This file is the cost model (:func:`build_model` reads a function into an
:class:`~relaxc.passes.planning.order.OrderProblem`) and the rewrite (the body rebuilt in
the order :func:`~relaxc.passes.planning.order.schedule` finds); the solver knows nothing
of the IR.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, ClassVar, Mapping, Union, cast

from relaxc.ir import dims as D
from relaxc.ir.alias import flatten, param_aliases_of_result
from relaxc.ir.call_graph import called
from relaxc.ir.nodes import (
    Bind,
    Call,
    CallFunc,
    Effect,
    Expr,
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
from relaxc.ir.registry import OpDef, bind_args
from relaxc.ir.sizes import round_up, round_up_dim, tensor_nbytes
from relaxc.ir.types import TensorType, TupleType, Type
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.vocab import ALLOC_OPS, CONST, call_of, is_int
from relaxc.ir.walk import ExprFunctor, StmtVisitor, map_functions

from .base import Pass, module_types
from .planning.order import OrderProblem, order_peak, schedule

WRITTEN_ATTR = "order_peak_written"
CHOSEN_ATTR = "order_peak_chosen"


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


def _has_effects(fn: Function, functions: Mapping[str, Function], memo: dict[str, bool]) -> bool:
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
            g
            for g in called(f)
            if g not in memo and g not in on_stack  # on the stack: recursion (the verifier refuses)
        ]
        if pending:
            stack.extend(pending)
            on_stack.update(pending)
            continue
        on_stack.discard(stack.pop())
        memo[name] = _own_effects(f, functions, memo)
    return memo[fn.name]


def _own_effects(fn: Function, functions: Mapping[str, Function], memo: dict[str, bool]) -> bool:
    """``fn`` has effects itself or calls a function that has (callees already in ``memo``;
    a callee missing from it is on the current call path: recursion, assume the worst)."""
    effectful = _Effectful(functions, memo)
    return any(isinstance(s, Effect) or effectful.visit_expr(s.value) for s in fn.body)


class _Effectful(ExprFunctor[bool]):
    """Whether a bound expression has an effect or calls a function that has one."""

    def __init__(self, functions: Mapping[str, Function], memo: dict[str, bool]):
        self.functions, self.memo = functions, memo

    def visit_default(self, e: Expr) -> bool:
        return False

    def visit_invoke(self, e: Invoke) -> bool:
        return True

    def visit_call(self, e: Call) -> bool:
        return _is_barrier_op(REGISTRY.get(e.op))

    def visit_call_func(self, e: CallFunc) -> bool:
        callee = self.functions.get(e.func)
        return callee is None or self.memo.get(callee.name, True)


def _is_barrier_op(op: OpDef | None) -> bool:
    """A call of ``op`` keeps its place: an unknown, effectful, runtime or memory op."""
    return op is None or op.effectful or op.category in ("runtime", "memory")


def _size(
    t: TensorType,
    bounds: dict[str, int],
    align: int,
    cache: dict[tuple[TensorType, int], int | None],
) -> int | None:
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


_Root = Union[str, tuple[str, int]]
"""A buffer: the value's name, or (name, field index) for a field of a kernel's tuple result."""

_Tree = Union[frozenset[_Root], tuple["_Tree", ...]]
"""A value's buffers, as :data:`relaxc.ir.alias.Tree` (a tuple of trees for a tuple value)."""

# ir.alias.flatten only unions the sets, whatever their roots: these trees hold field roots too.
_flatten = cast(Callable[[_Tree], "frozenset[_Root]"], flatten)


def _split_is_view(
    op: OpDef, e: Call, args: list[Var], name: str | None, types: dict[str, Type]
) -> bool:
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


class _Walk(StmtVisitor, ExprFunctor[tuple[str, _Tree]]):
    """One walk over a function's body: what kind of statement each is, the buffers (alias
    roots) each value may refer to, and the buffers kernels make.

    The ``visit_*`` methods of expressions return the kind of the statement binding the
    value and the value's tree of roots (a kernel's own buffers are added by
    :meth:`visit_bind`)."""

    def __init__(
        self, fn: Function, module: Module, types: dict[str, Type], split: bool, callees: _Callees
    ):
        self.fn, self.module, self.types, self.split = fn, module, types, split
        self.functions = callees.functions
        self.effects_memo = callees.effects
        self.kind: list[str] = []
        self.trees: dict[str, _Tree] = {p.name: frozenset() for p in fn.params}  # no buffer
        self.defined_at: dict[str, int] = {}
        self.made: dict[object, tuple[int, TensorType]] = {}  # root -> (statement, type)
        self.escaping: set[_Root] = set()
        self.kernel_op_results: set[str] = set()  # one tensor computed by a kernel op
        self.supported = True
        self.name: str | None = None  # the name the statement in hand binds
        self.visit_function(fn)

    def roots(self, name: str) -> frozenset[_Root]:
        return _flatten(self.trees.get(name, frozenset()))

    # -- statements ---------------------------------------------------------------------
    def visit_bind(self, s: Bind) -> None:
        i, self.name = len(self.kind), s.name
        k, tree = self.visit_expr(s.value)
        if k == _KERNEL:
            tree = self._kernel_result(i, s)
        self.kind.append(k)
        self.trees[s.name] = tree
        self.defined_at[s.name] = i

    def visit_effect(self, s: Effect) -> None:
        self.kind.append(_BARRIER)  # written for its effect: it keeps its place

    # -- expressions --------------------------------------------------------------------
    def visit_invoke(self, e: Invoke) -> tuple[str, _Tree]:
        return _BARRIER, frozenset()

    def visit_var(self, e: Var) -> tuple[str, _Tree]:
        return _FREE, self.trees.get(e.name, frozenset())

    def visit_tuple(self, e: TupleExpr) -> tuple[str, _Tree]:
        return _FREE, tuple(self.trees.get(v.name, frozenset()) for v in e.fields)

    def visit_project(self, e: Project) -> tuple[str, _Tree]:
        src = self.trees.get(e.tuple_var.name, frozenset())
        if isinstance(src, tuple) and e.index < len(src):
            return _FREE, src[e.index]
        return _FREE, _flatten(src)

    def visit_call(self, e: Call) -> tuple[str, _Tree]:
        name = self.name
        op = REGISTRY.get(e.op)
        args = [a for a in e.args if isinstance(a, Var)]
        if _is_barrier_op(op):
            tree = frozenset().union(*(self.roots(a.name) for a in args))
            if op is None or op.category == "runtime":
                if packed_spec(e.args[0] if e.args else None).keeps_args:
                    self.escaping |= tree
            return _BARRIER, tree
        assert op is not None
        if op.is_view:
            return _FREE, self.roots(args[0].name) if args else frozenset()
        if e.op == CONST:
            return _FREE, frozenset()
        if self.split and e.op == "split" and _split_is_view(op, e, args, name, self.types):
            out = self.types.get(name or "")
            n_out = len(out.fields) if isinstance(out, TupleType) else 1
            return _FREE, tuple(self.roots(args[0].name) for _ in range(n_out))  # views
        return _KERNEL, frozenset()

    def visit_call_func(self, e: CallFunc) -> tuple[str, _Tree]:
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

    def _kernel_result(self, i: int, s: Bind) -> _Tree:
        """The buffers a kernel's result is: one per tensor (per field of a tuple)."""
        name = s.name
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
    (``callees``: the module's, shared by the calls for its functions).

    Per buffer, the way PlanMemory's lower bound counts it (the most bytes live at once, see
    :mod:`relaxc.cli.report.analysis`): each value computed by a kernel op or a primitive
    function (each field of a tuple result apart, as ManifestAlloc allocates them) is a buffer
    of its byte size, at the upper bounds, rounded up to ``align``. Parameters, constants,
    values reaching the return and values kept by a runtime function are not intermediates and
    cost nothing; the result of a call of a non-primitive function is the callee's to allocate
    and costs nothing here either. A buffer is live from the statement computing it to the last
    statement using any value that refers to it: views, aliases, tuples and projections cost
    nothing and extend their source's life (alias analysis per buffer, as
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
      nothing but this concat, all shapes static: ``%r``'s bytes are born when the first of its
      inputs is computed, and the inputs cost nothing of their own (they are written into their
      slices; none of them is then computed in place).
    * ``split``: the outputs of ``split(%x, ..., axis=k)`` where every dim of ``%x`` before
      ``k`` is 1, at static shapes, are views of ``%x``: they cost nothing and keep it live.

    These follow ComputeInPlace and ElideConcatSplit, with stricter conditions where those go
    further (a concat input also read elsewhere, an input moved into a slice or into an output:
    not modelled, so such savings are missed). ElideConcatSplit keeps its rewrite of a function
    only when it lowers the bytes live at once, so with ``concat`` or ``split`` on, an order
    costs the lower of its peaks with those elisions and without them (each searched).

    Statements that allocate nothing and whose every use of a buffer is followed by a later use
    of the same buffer (views, aliases, tuples, constants, with a consumer) cannot change the
    peak wherever they stand: they are left out of the search and placed just before their first
    consumer (or, with none, at the end of their stretch between barriers). The others are the
    *nodes* of the scheduling problem, with the dependences between them (through the left-out
    statements).
    """
    w = _Walk(fn, module, types, split, callees if callees is not None else _Callees.of(module))
    if not w.supported:
        return None
    body, kind = fn.body, w.kind
    ret_vars = list(expr_vars(fn.ret))
    returned = frozenset().union(*(w.roots(v.name) for v in ret_vars))
    bounds = fn.upper_bounds()
    cache: dict[tuple[TensorType, int], int | None] = {}
    size: dict[object, int] = {}  # intermediate -> its bytes
    for r, (_, t) in w.made.items():
        if r not in returned and r not in w.escaping:
            nbytes = _size(t, bounds, align, cache)
            if nbytes is None:
                return None  # an unbounded size: leave the function as written
            size[r] = nbytes
    consumers: dict[str, list[int]] = {}
    uses: list[frozenset[_Root]] = []  # per statement: the intermediates it reads
    for i, s in enumerate(body):
        u: frozenset[_Root] = frozenset()
        for v in expr_vars(s.value):
            consumers.setdefault(v.name, []).append(i)
            u = u | w.roots(v.name)
        uses.append(frozenset(r for r in u if r in size))
    # Left out of the search: allocates nothing, and a consumer reads all it reads later.
    free = [
        kind[i] == _FREE  # a binding: an effect is a barrier
        and isinstance(s, Bind)
        and (not uses[i] or (uses[i] <= w.roots(s.name) and s.name in consumers))
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
        e = call_of(s.value, "concat")
        if w.kind[i] != _KERNEL or e is None:
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
        e = call_of(s.value)
        if w.kind[i] != _KERNEL or e is None or not isinstance(s, Bind):
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
        """``fn`` in the best order found, with the attributes. Each stretch between cuts
        takes the better of its written order and the order found (the written one on ties).
        When the function's peak improves (the lower of the models' peaks, each order
        measured under both), the body is rebuilt in the new order of nodes, every left-out
        statement just before its first consumer (:func:`_emit`); the attributes are set
        either way."""
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
        isinstance(s.value, Invoke) or call_of(s.value, *ALLOC_OPS) is not None for s in fn.body
    )


def _with_attrs(fn: Function, body: tuple[Stmt, ...], new: dict[str, int]) -> Function:
    """``fn`` with ``body`` and the attributes ``new`` (replacing earlier ones, at the end)."""
    return dataclasses.replace(fn.with_attrs(new), body=body)

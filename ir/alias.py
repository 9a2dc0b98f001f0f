"""Alias and liveness analysis per *buffer*, not per name.

Every value is mapped to the set of *roots* (the bindings that own memory) it may refer
to: a view, an alias ``%v = %x``, a tuple and its projections, the result of a function
that returns (a view of) its argument, and a packed call that may return an argument all
share roots with their source. A tuple keeps the roots of each field separately, so a
projection refers to exactly one field's buffers.

Liveness is then computed per root: a root is live from its definition to the last
statement that uses *any* value referring to it. Roots that are returned, or handed to a
runtime function that may keep them, live to the end of the function.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from .nodes import (
    Bind,
    Call,
    CallFunc,
    Effect,
    Function,
    Invoke,
    Module,
    Project,
    TupleExpr,
    Var,
    expr_vars,
)
from .call_graph import callees_first
from .ops import REGISTRY
from .packed import PackedSpec, packed_spec
from .vocab import ALLOC_STORAGE, ALLOC_TENSOR, CALL_CPACKED, STRUCT_SET
from .vocab import CONST as CONST_OP
from .walk import ExprFunctor, StmtVisitor

Roots = frozenset[str]
"""Root names."""

Tree = Union[Roots, tuple["Tree", ...]]
"""Roots of a value: a frozenset of root names, or a tuple of trees for a tuple value."""

Memo = dict[str, frozenset[int]]
"""function name -> the indices of the parameters its result may alias."""

PARAM, CONST, FRESH, STORAGE, TENSOR, OBJECT = (
    "param",
    "const",
    "fresh",
    "storage",
    "tensor",
    "object",
)

KERNEL = PackedSpec("a primitive function called packed (call_cpacked): destination passing")
"""What ``call_cpacked("f", ...)`` of a primitive function ``@f`` does with its arguments: it
reads and writes them during the call and keeps none (TVM's assumption for PrimFuncs)."""


def flatten(tree: Tree) -> Roots:
    if isinstance(tree, frozenset):
        return tree
    out: Roots = frozenset()
    for t in tree:
        out |= flatten(t)
    return out


def tree_leaves(tree: Tree) -> list[Roots]:
    """The leaves (root sets) of a tree, in order: one per tensor leaf of the value."""
    if isinstance(tree, frozenset):
        return [tree]
    return [x for t in tree for x in tree_leaves(t)]


@dataclass
class AliasInfo:
    """Roots of every value of one function."""

    trees: dict[str, Tree] = field(default_factory=dict)
    kind: dict[str, str] = field(
        default_factory=dict
    )  # root -> PARAM | CONST | FRESH | STORAGE | TENSOR | OBJECT
    storage_of: dict[str, str] = field(
        default_factory=dict
    )  # alloc_tensor root -> its storage root
    escaping: set[str] = field(default_factory=set)  # roots kept by a runtime function

    def roots(self, name: str) -> Roots:
        return flatten(self.trees.get(name, frozenset()))

    def returned(self, fn: Function) -> Roots:
        """Roots the function's return value may refer to."""
        return frozenset().union(*(self.roots(v.name) for v in expr_vars(fn.ret)))


def param_aliases_of_result(
    fn: Function, module: Module, _memo: Memo | None = None
) -> frozenset[int]:
    """Indices of the parameters that ``fn``'s result may alias (for interprocedural aliasing).

    The functions ``fn`` calls are analysed first, callees before callers, in an order found
    with an explicit stack (not Python's): so analysing one function never recurses into
    another, and a chain of thousands of calls is analysed like a short one.
    """
    memo = _memo if _memo is not None else _module_memo(module)
    if fn.name in memo:
        return memo[fn.name]
    order = callees_first(module, [fn], done=memo)
    for f in order:  # callees before their callers
        memo[f.name] = frozenset()  # no recursion in verified modules; guard anyway
        info = analyze_aliases(f, module, memo)
        returned = info.returned(f)
        memo[f.name] = frozenset(i for i, p in enumerate(f.params) if p.name in returned)
    return memo[fn.name]


_last_memo: tuple[Module | None, Memo] = (None, {})


def _module_memo(module: Module) -> Memo:
    """The memo of :func:`param_aliases_of_result` for ``module``, kept for the last module
    asked about (modules are immutable): every pass analyses each function of one module, and
    without it each would analyse again all the functions it calls, down to the leaves."""
    global _last_memo
    if _last_memo[0] is not module:
        _last_memo = (module, {})
    return _last_memo[1]


def analyze_aliases(fn: Function, module: Module, _memo: Memo | None = None) -> AliasInfo:
    """Map every value of ``fn`` to the roots it may refer to."""
    info = AliasInfo()
    for p in fn.params:
        info.trees[p.name] = frozenset({p.name})
        info.kind[p.name] = PARAM
    walker = _AliasWalker(info, module, _memo if _memo is not None else _module_memo(module))
    walker.visit_function(fn)
    return info


class _AliasWalker(StmtVisitor, ExprFunctor["Tree | None"]):
    """Gives each binding its tree of roots, statement by statement.

    The ``visit_*`` methods of expressions return the tree of the value (``None``: the
    statement binds nothing that holds memory, and the name gets no tree) and record the
    kind of a new root in ``info.kind``.
    """

    def __init__(self, info: AliasInfo, module: Module, memo: Memo):
        self.info = info
        self.module = module
        self.memo = memo
        self.functions = module.by_name
        self.name: str | None = None  # the name the current statement binds
        self.own: Roots = frozenset()  # the root that name would be

    def tree(self, v: Var) -> Tree:
        return self.info.trees.get(v.name, frozenset())

    def new_root(self, kind: str) -> Roots:
        """The binding's own root, recorded as a root of ``kind``."""
        if self.name:
            self.info.kind[self.name] = kind
        return self.own

    # -- statements ---------------------------------------------------------------------
    def visit_bind(self, stmt: Bind) -> None:
        self.name, self.own = stmt.name, frozenset({stmt.name})
        t = self.visit_expr(stmt.value)
        if t is not None:
            self.info.trees[stmt.name] = t

    def visit_effect(self, stmt: Effect) -> None:
        self.name, self.own = None, frozenset()
        self.visit_expr(stmt.value)

    # -- expressions --------------------------------------------------------------------
    def visit_var(self, e: Var) -> Tree:
        return self.tree(e)

    def visit_tuple(self, e: TupleExpr) -> Tree:
        return tuple(self.tree(v) for v in e.fields)

    def visit_project(self, e: Project) -> Tree:
        src = self.tree(e.tuple_var)
        return src[e.index] if isinstance(src, tuple) and e.index < len(src) else flatten(src)

    def visit_call_func(self, e: CallFunc) -> Tree:
        callee = self.functions.get(e.func)
        t = self.new_root(FRESH)
        if callee is not None and not callee.is_primitive:
            for i in param_aliases_of_result(callee, self.module, self.memo):
                if i < len(e.args):
                    t = t | flatten(self.tree(e.args[i]))
        return t

    def visit_invoke(self, e: Invoke) -> None:
        return None  # writes into its outs, which already have their roots

    def visit_call(self, e: Call) -> Tree | None:
        info = self.info
        op = REGISTRY.get(e.op)
        arg_vars = [a for a in e.args if isinstance(a, Var)]
        if op is None:
            return self.own
        if op.is_view:
            return flatten(self.tree(arg_vars[0])) if arg_vars else self.own
        if e.op == CONST_OP:
            return self.new_root(CONST)
        if e.op == ALLOC_STORAGE:
            return self.new_root(STORAGE)
        if e.op == ALLOC_TENSOR:
            if self.name:
                for s in flatten(self.tree(arg_vars[0])) if arg_vars else frozenset():
                    info.storage_of[self.name] = s
            return self.new_root(TENSOR)
        if e.op == STRUCT_SET:
            # The struct now refers to the buffer stored into it.
            if len(arg_vars) >= 2:
                h, v = arg_vars[0], arg_vars[-1]
                info.trees[h.name] = flatten(self.tree(h)) | flatten(self.tree(v))
            return None
        if op.category == "runtime":
            return self._runtime_call(e)
        if op.category == "memory":
            return None  # kills
        return self.new_root(FRESH)

    def _runtime_call(self, e: Call) -> Tree:
        info = self.info
        spec = packed_spec(e.args[0] if e.args else None)
        callee = (
            self.functions.get(e.args[0])
            if e.op == CALL_CPACKED and e.args and isinstance(e.args[0], str)
            else None
        )
        if callee is not None and callee.is_primitive:
            spec = KERNEL  # a kernel called packed: it writes its outputs and keeps nothing
        passed = [a for a in e.args[1:] if isinstance(a, Var)]
        if spec.keeps_args:
            for a in passed:
                info.escaping |= flatten(self.tree(a))
        t = self.new_root(OBJECT)
        for i in spec.result_aliases:
            sources = passed if i < 0 else passed[i : i + 1]
            for a in sources:
                t = t | flatten(self.tree(a))
        return t


@dataclass
class Liveness:
    """For each root: the statement index defining it and the last index using it.

    Indices count statements of the body; parameters are defined at -1, and
    ``len(body)`` means "used by the return" (live to the end).
    """

    defined: dict[str, int]
    last_use: dict[str, int]


def buffer_liveness(fn: Function, info: AliasInfo) -> Liveness:
    """Per-root liveness; storages stay live while any tensor carved from them is."""
    defined: dict[str, int] = {p.name: -1 for p in fn.params}
    last: dict[str, int] = {}
    end = len(fn.body)

    def touch(roots: Roots, i: int) -> None:
        for r in roots:
            if last.get(r, -2) < i:
                last[r] = i

    for i, stmt in enumerate(fn.body):
        if isinstance(stmt, Bind):
            defined[stmt.name] = i
            last.setdefault(stmt.name, i)
        for v in expr_vars(stmt.value):
            touch(info.roots(v.name), i)
            touch(frozenset({v.name}), i)
    touch(info.returned(fn), end)
    for v in expr_vars(fn.ret):
        touch(frozenset({v.name}), end)
    touch(frozenset(info.escaping), end)
    # A storage lives as long as any tensor placed in it.
    for tensor, storage in info.storage_of.items():
        if tensor in last:
            last[storage] = max(last.get(storage, -2), last[tensor])
    return Liveness(defined, last)

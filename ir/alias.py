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

from .nodes import Bind, Call, CallFunc, Effect, Function, Invoke, Module, Project, TupleExpr, Var, expr_vars
from .ops import REGISTRY
from .packed import PackedSpec, packed_spec

Tree = Union[frozenset, tuple]
"""Roots of a value: a frozenset of root names, or a tuple of trees for a tuple value."""

PARAM, CONST, FRESH, STORAGE, TENSOR, OBJECT = "param", "const", "fresh", "storage", "tensor", "object"

KERNEL = PackedSpec("a primitive function called packed (call_cpacked): destination passing")
"""What ``call_cpacked("f", ...)`` of a primitive function ``@f`` does with its arguments: it
reads and writes them during the call and keeps none (TVM's assumption for PrimFuncs)."""


def flatten(tree: Tree) -> frozenset:
    if isinstance(tree, frozenset):
        return tree
    out: frozenset = frozenset()
    for t in tree:
        out |= flatten(t)
    return out


@dataclass
class AliasInfo:
    """Roots of every value of one function."""

    trees: dict[str, Tree] = field(default_factory=dict)
    kind: dict[str, str] = field(default_factory=dict)  # root -> PARAM | CONST | FRESH | STORAGE | TENSOR | OBJECT
    storage_of: dict[str, str] = field(default_factory=dict)  # alloc_tensor root -> its storage root
    escaping: set[str] = field(default_factory=set)  # roots kept by a runtime function

    def roots(self, name: str) -> frozenset:
        return flatten(self.trees.get(name, frozenset()))

    def returned(self, fn: Function) -> frozenset:
        """Roots the function's return value may refer to."""
        return frozenset().union(*(self.roots(v.name) for v in expr_vars(fn.ret)))


def _tree_of_ret(fn: Function, info: AliasInfo) -> Tree:
    if isinstance(fn.ret, TupleExpr):
        return tuple(info.trees.get(v.name, frozenset()) for v in fn.ret.fields)
    return info.trees.get(fn.ret.name, frozenset())


def param_aliases_of_result(fn: Function, module: Module, _memo: dict | None = None) -> frozenset:
    """Indices of the parameters that ``fn``'s result may alias (for interprocedural aliasing)."""
    memo = _memo if _memo is not None else {}
    if fn.name in memo:
        return memo[fn.name]
    memo[fn.name] = frozenset()  # no recursion in verified modules; guard anyway
    info = analyze_aliases(fn, module, memo)
    params = [p.name for p in fn.params]
    result = frozenset(i for i, p in enumerate(params) if p in info.returned(fn))
    memo[fn.name] = result
    return result


def analyze_aliases(fn: Function, module: Module, _memo: dict | None = None) -> AliasInfo:
    """Map every value of ``fn`` to the roots it may refer to."""
    info = AliasInfo()
    memo = _memo if _memo is not None else {}
    functions = {f.name: f for f in module.functions}
    for p in fn.params:
        info.trees[p.name] = frozenset({p.name})
        info.kind[p.name] = PARAM

    def tree(v: Var) -> Tree:
        return info.trees.get(v.name, frozenset())

    for stmt in fn.body:
        e = stmt.value
        name = stmt.name if isinstance(stmt, Bind) else None
        own = frozenset({name}) if name else frozenset()
        if isinstance(e, Var):
            t: Tree = tree(e)
        elif isinstance(e, TupleExpr):
            t = tuple(tree(v) for v in e.fields)
        elif isinstance(e, Project):
            src = tree(e.tuple_var)
            t = src[e.index] if isinstance(src, tuple) and e.index < len(src) else flatten(src)
        elif isinstance(e, CallFunc):
            callee = functions.get(e.func)
            t = own
            if callee is not None and not callee.is_primitive:
                for i in param_aliases_of_result(callee, module, memo):
                    if i < len(e.args):
                        t = t | flatten(tree(e.args[i]))
            if name:
                info.kind[name] = FRESH
        elif isinstance(e, Invoke):
            continue
        elif isinstance(e, Call):
            op = REGISTRY.get(e.op)
            arg_vars = [a for a in e.args if isinstance(a, Var)]
            if op is None:
                t = own
            elif op.is_view:
                t = flatten(tree(arg_vars[0])) if arg_vars else own
            elif e.op == "const":
                t = own
                if name:
                    info.kind[name] = CONST
            elif e.op == "memory.alloc_storage":
                t = own
                if name:
                    info.kind[name] = STORAGE
            elif e.op == "memory.alloc_tensor":
                t = own
                if name:
                    info.kind[name] = TENSOR
                    storage_roots = flatten(tree(arg_vars[0])) if arg_vars else frozenset()
                    for s in storage_roots:
                        info.storage_of[name] = s
            elif e.op == "tir.struct_set":
                # The struct now refers to the buffer stored into it.
                if len(arg_vars) >= 2:
                    h, v = arg_vars[0], arg_vars[-1]
                    info.trees[h.name] = flatten(tree(h)) | flatten(tree(v))
                continue
            elif op.category == "runtime":
                spec = packed_spec(e.args[0] if e.args else None)
                callee = functions.get(e.args[0]) if e.op == "call_cpacked" and e.args and isinstance(
                    e.args[0], str) else None
                if callee is not None and callee.is_primitive:
                    spec = KERNEL  # a kernel called packed: it writes its outputs and keeps nothing
                passed = [a for a in e.args[1:] if isinstance(a, Var)]
                if spec.keeps_args:
                    for a in passed:
                        info.escaping |= flatten(tree(a))
                t = own
                for i in spec.result_aliases:
                    sources = passed if i < 0 else passed[i:i + 1]
                    for a in sources:
                        t = t | flatten(tree(a))
                if name:
                    info.kind[name] = OBJECT
            elif op.category == "memory":
                continue  # kills
            else:
                t = own
                if name:
                    info.kind[name] = FRESH
        else:  # pragma: no cover
            t = own
        if name:
            info.trees[name] = t
    return info


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

    def touch(roots: frozenset, i: int) -> None:
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

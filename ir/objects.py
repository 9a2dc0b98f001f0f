"""Which names are the same object, and which objects the return value holds: the
register view of a function.

``%u = %t`` does not copy: in TVM's VM (and any register machine that compiles a trivial
binding to a register move or to nothing) ``%u`` and ``%t`` are the same object, so a
``vm.kill_object`` of either releases both. A projection ``%p = %tup.i`` of a tuple built
from an object ``%o`` is ``%o`` again. Tensors are tracked per buffer by
:mod:`relaxc.ir.alias`; this module answers the question for the names themselves.
"""

from __future__ import annotations

from .nodes import Bind, Expr, Function, Project, TupleExpr, Var, expr_vars
from .walk import ExprFunctor, StmtVisitor


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:  # path compression
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


class _SameObject(StmtVisitor, ExprFunctor[None]):
    """Unites the names of one object: ``%u = %t``, and ``%p = %tup.i`` of a tuple built here."""

    def __init__(self) -> None:
        self.uf = _UnionFind()
        self.fields: dict[str, tuple[str, ...]] = {}  # tuple built here -> its field names
        self.name = ""

    def visit_bind(self, stmt: Bind) -> None:
        self.name = stmt.name
        self.visit_expr(stmt.value)

    def visit_default(self, expr: Expr) -> None:
        pass  # a kernel, a call, a constant: a new object

    def visit_var(self, expr: Var) -> None:
        self.uf.union(self.name, expr.name)

    def visit_tuple(self, expr: TupleExpr) -> None:
        self.fields[self.name] = tuple(v.name for v in expr.fields)

    def visit_project(self, expr: Project) -> None:
        src = _built_tuple(expr.tuple_var.name, self.fields, self.uf)
        if src is not None and expr.index < len(src):
            self.uf.union(self.name, src[expr.index])


def object_groups(fn: Function) -> dict[str, frozenset[str]]:
    """Each name that is the same object as another name -> every name of that object.

    Names of an object of one name are absent.
    """
    walk = _SameObject()
    walk.visit_function(fn)
    uf = walk.uf
    members: dict[str, set[str]] = {}
    for name in list(uf.parent):
        members.setdefault(uf.find(name), set()).add(name)
    return {
        name: frozenset(group) for group in members.values() if len(group) > 1 for name in group
    }


def _built_tuple(
    name: str, fields: dict[str, tuple[str, ...]], uf: _UnionFind
) -> tuple[str, ...] | None:
    if name in fields:
        return fields[name]
    root = uf.find(name)
    for t, fs in fields.items():
        if uf.find(t) == root:
            return fs
    return None


def same_object(groups: dict[str, frozenset[str]], name: str) -> frozenset[str]:
    """Every name of ``name``'s object (``name`` alone when no other name is that object)."""
    return groups.get(name, frozenset({name}))


def returned_objects(fn: Function, groups: dict[str, frozenset[str]]) -> frozenset[str]:
    """Every name of every object the return value holds: the returned names, the fields of
    the tuples among them, their fields, and so on (a tuple returned inside a tuple is the
    caller's as much as the outer one)."""
    fields: dict[str, tuple[str, ...]] = {}
    for stmt in fn.body:
        if isinstance(stmt, Bind) and isinstance(stmt.value, TupleExpr):
            fields[stmt.name] = tuple(v.name for v in stmt.value.fields)
    out: set[str] = set()
    todo = [v.name for v in expr_vars(fn.ret)]
    while todo:
        name = todo.pop()
        for n in same_object(groups, name):
            if n in out:
                continue
            out.add(n)
            todo.extend(fields.get(n, ()))
    return frozenset(out)


def tuple_holders(fn: Function) -> dict[str, tuple[str, ...]]:
    """Each name -> the tuples built with it as a field (``%nt = (%t, %y)`` holds ``%t``)."""
    out: dict[str, list[str]] = {}
    for stmt in fn.body:
        if isinstance(stmt, Bind) and isinstance(stmt.value, TupleExpr):
            for v in stmt.value.fields:
                out.setdefault(v.name, []).append(stmt.name)
    return {k: tuple(v) for k, v in out.items()}

"""Which names are the same object: the register view of a function.

``%u = %t`` does not copy: in TVM's VM (and any register machine that compiles a trivial
binding to a register move or to nothing) ``%u`` and ``%t`` are the same object, so a
``vm.kill_object`` of either releases both. Tensors are tracked per buffer by
:mod:`relaxc.ir.alias`; this module answers the question for the names themselves.
"""

from __future__ import annotations

from .nodes import Bind, Function, Var


def object_groups(fn: Function) -> dict[str, frozenset[str]]:
    """Each name bound or aliased by a trivial binding ``%u = %t`` -> every name of its object.

    Names in no trivial binding are absent (they are an object of one name).
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for stmt in fn.body:
        if isinstance(stmt, Bind) and isinstance(stmt.value, Var):
            a, b = find(stmt.name), find(stmt.value.name)
            parent.setdefault(a, a)
            parent.setdefault(b, b)
            if a != b:
                parent[a] = b
    members: dict[str, set[str]] = {}
    for name in list(parent):
        members.setdefault(find(name), set()).add(name)
    return {name: frozenset(group) for group in members.values() for name in group}


def same_object(fn_groups: dict[str, frozenset[str]], name: str) -> frozenset[str]:
    """Every name of ``name``'s object (``name`` alone when it is in no trivial binding)."""
    return fn_groups.get(name, frozenset({name}))

"""What the memory-sharing passes (ElideConcatSplit, ComputeInPlace) know of a lowered
function, and the rewrite both end with.

Both run on explicit-memory IR (after ManifestAlloc, before PlanMemory) and let a tensor
take the bytes of another instead of owning a storage: its ``memory.alloc_tensor`` becomes
a ``memory.view`` of the tensor whose bytes it takes, and the storage it no longer needs
disappears. Alias analysis (:mod:`relaxc.ir.alias`) then sees both as one buffer, so
PlanMemory, KillAfterLastUse and the backends need no new rule: a buffer lives until the
last use of anything referring to it, and a view is a pointer moved by its byte offset.

This module gives them:

* :class:`Layout`: where each tensor of a function lives (the storage it is carved from, or
  the tensor it is a view of and at which byte offset), which tensors own their storage
  alone, and the statements that use each name as data;
* :class:`Groups`: the buffers that share bytes after the rewrites so far (a union-find
  over alias roots), each with the last statement using any of them and whether a pass may
  write over it (only tensors the function allocated: never a parameter, a constant, or
  something a runtime function keeps);
* :func:`place_lazily`: the body with every memory binding moved to just before the first
  statement that needs it, so that a view whose source was written later in the original
  order is defined in time, and no storage is defined (live, to PlanMemory) before its
  first tensor needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence, cast

from relaxc.ir import dims as D
from relaxc.ir.alias import TENSOR, AliasInfo, Liveness, analyze_aliases, buffer_liveness
from relaxc.ir.diagnostics import InternalError, Loc
from relaxc.ir.nodes import (
    Arg,
    Bind,
    Call,
    DType,
    Effect,
    Expr,
    Function,
    Invoke,
    KwArgs,
    Module,
    Stmt,
    Var,
    expr_vars,
)
from relaxc.ir.sizes import tensor_nbytes
from relaxc.ir.types import TensorType, Type
from relaxc.ir.vocab import ALLOC_STORAGE, ALLOC_TENSOR, MEMORY_VIEW, call_of, is_kill

from .candidates import planning_candidates
from .planning.model import lower_bound

MEMORY_BINDINGS = (ALLOC_STORAGE, ALLOC_TENSOR, MEMORY_VIEW)
"""Bindings that only name memory (no data is read or written): free to move."""


@dataclass
class Place:
    """Where a tensor's bytes are: ``offset`` bytes into ``source``, which is a storage
    (``alloc_tensor``) or a tensor (``memory.view``)."""

    source: str
    offset: D.Dim
    type: TensorType
    is_view: bool


@dataclass
class Layout:
    """The memory facts of one explicit-memory function, updated as a pass rewrites it."""

    fn: Function
    types: dict[str, Type]
    index: dict[str, int] = field(default_factory=dict)  # binding -> statement index
    place: dict[str, Place] = field(default_factory=dict)  # alloc_tensor / view -> its place
    storage_args: dict[str, tuple[tuple[Arg, ...], KwArgs]] = field(
        default_factory=dict
    )  # alloc_storage -> (args, kw)
    tenants: dict[str, list[str]] = field(default_factory=dict)  # storage -> its tensors
    other_storage_uses: dict[str, int] = field(default_factory=dict)  # storage -> non-carving uses
    data_uses: dict[str, list[int]] = field(
        default_factory=dict
    )  # name -> statements reading/writing
    writers: dict[str, list[int]] = field(default_factory=dict)  # tensor -> invokes writing it
    dropped: set[int] = field(default_factory=set)  # statements the rewrite removes
    # view -> (the tensor it was last found to lead to, the offset): see :meth:`base`
    _hops: dict[str, tuple[str, int]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, fn: Function, types: dict[str, Type]) -> "Layout":
        lay = cls(fn, types)
        end = len(fn.body)
        for i, st in enumerate(fn.body):
            value = st.value
            if isinstance(st, Bind):
                lay.index[st.name] = i
                if (c := call_of(value, ALLOC_STORAGE)) is not None:
                    lay.storage_args[st.name] = (c.args, c.kwargs)
                    lay.tenants.setdefault(st.name, [])
                    continue
                if (c := call_of(value, ALLOC_TENSOR)) is not None and _tensor_place(c, False):
                    p = _tensor_place(c, False)
                    assert p is not None
                    lay.place[st.name] = p
                    lay.tenants.setdefault(p.source, []).append(st.name)
                    continue
                if (c := call_of(value, MEMORY_VIEW)) is not None and _tensor_place(c, True):
                    p = _tensor_place(c, True)
                    assert p is not None
                    lay.place[st.name] = p
                    continue
            if isinstance(value, Invoke):
                for v in value.outs + ((value.scratch,) if value.scratch is not None else ()):
                    lay.writers.setdefault(v.name, []).append(i)
            for v in expr_vars(value):
                if v.name in lay.storage_args and not is_kill(st):
                    lay.other_storage_uses[v.name] = lay.other_storage_uses.get(v.name, 0) + 1
                lay.data_uses.setdefault(v.name, []).append(i)
        for v in expr_vars(fn.ret):
            lay.data_uses.setdefault(v.name, []).append(end)
        return lay

    # -- questions ----------------------------------------------------------------------
    def base(self, name: str) -> tuple[str, int] | None:
        """The allocated tensor whose bytes ``name`` is, and the static byte offset into it
        (None: not a tensor carved or viewed from one, or at a symbolic offset).

        A view never changes once it is one (:meth:`make_view` turns only a tensor that
        owns its bytes into a view), so the tensor and offset a view was found to lead to
        stay true; only that tensor may later become a view itself. Each view remembers
        them (``_hops``), and a chain of views is walked once, not once per question (a
        chain of n in-place ops asks n questions)."""
        trail: list[tuple[str, int]] = []  # views passed, with their offset from ``name``
        offset = 0
        while True:
            p = self.place.get(name)
            if p is None:
                return None
            if not p.is_view:
                break
            hop = self._hops.get(name)
            if hop is None:
                if not isinstance(p.offset, int):
                    return None
                hop = (p.source, p.offset)
            trail.append((name, offset))
            name, offset = hop[0], offset + hop[1]
            if len(trail) > len(self.place):  # a cycle cannot happen in verified IR
                return None
        for view, before in trail:
            self._hops[view] = (name, offset - before)
        return name, offset

    def nbytes(self, name: str) -> int | None:
        t = self.types.get(name)
        if isinstance(t, TensorType) and t.is_static():
            n = tensor_nbytes(t)
            return n if isinstance(n, int) else None
        return None

    def owns_storage(self, tensor: str) -> str | None:
        """The storage ``tensor`` is carved from, when it is that storage's only tensor, at
        offset 0, and the storage is used for nothing else and is the function's own (not
        an output the caller owns, not an arena); else None."""
        p = self.place.get(tensor)
        if p is None or p.is_view or p.offset != 0:
            return None
        s = p.source
        if s not in self.storage_args or self.tenants.get(s) != [tensor]:
            return None
        if self.other_storage_uses.get(s, 0):
            return None
        kwargs = dict(self.storage_args[s][1])
        if kwargs.get("external") is True or kwargs.get("arena") is True:
            return None
        return s

    def written_only_at(self, tensor: str, i: int) -> bool:
        return self.writers.get(tensor, []) == [i]

    def data_range(self, name: str) -> tuple[int, int] | None:
        uses = self.data_uses.get(name)
        return (min(uses), max(uses)) if uses else None

    # -- rewrites -----------------------------------------------------------------------
    def make_view(self, name: str, source: str, offset: int) -> str | None:
        """``name`` becomes a view of ``source`` at ``offset``; returns the storage it owned
        (now unused, dropped with its binding) or None."""
        old = self.place[name]
        t = self.types[name]
        assert isinstance(t, TensorType)
        owned = None
        if not old.is_view:
            self.tenants[old.source].remove(name)
            if not self.tenants[old.source] and not self.other_storage_uses.get(old.source):
                owned = old.source
                self.dropped.add(self.index[owned])
        self.place[name] = Place(source, offset, t, True)
        return owned

    def rewritten_body(self) -> tuple[Stmt, ...]:
        """The body with the views made and the dropped statements removed, memory
        bindings placed lazily."""
        body: list[Stmt] = []
        for i, st in enumerate(self.fn.body):
            if i in self.dropped:
                continue
            if isinstance(st, Bind) and st.name in self.place:
                p = self.place[st.name]
                if p.is_view and call_of(st.value, ALLOC_TENSOR) is not None:
                    st = Bind(st.name, st.type, view_call(p, st.value.loc), st.loc)
                elif p.is_view and (c := call_of(st.value, MEMORY_VIEW)) is not None:
                    if not (c.args and isinstance(c.args[0], Var) and c.args[0].name == p.source):
                        st = Bind(st.name, st.type, view_call(p, c.loc), st.loc)
            body.append(st)
        return place_lazily(body, [p.name for p in self.fn.params], self.fn.ret)


def view_call(p: Place, loc: Loc | None = None) -> Call:
    return Call(
        MEMORY_VIEW, (Var(p.source), p.offset, tuple(p.type.shape), DType(p.type.dtype)), (), loc
    )


def _tensor_place(c: Call, is_view: bool) -> Place | None:
    """The place an ``alloc_tensor(storage, offset, shape, dtype)`` or ``memory.view(x,
    offset, shape, dtype)`` call names (arguments by position or by name)."""
    named = dict(zip(("source", "offset", "shape", "dtype"), c.args))
    for k, v in c.kwargs:
        named.setdefault(k, v)
    src, offset = named.get("source"), named.get("offset")
    shape, dtype = named.get("shape"), named.get("dtype")
    if len(named) != 4 or not isinstance(src, Var) or offset is None:
        return None
    if not isinstance(shape, tuple) or not isinstance(dtype, DType):
        return None
    # The verifier holds the offset to a dim (AttrSpec "offset", "dim" on both ops).
    return Place(src.name, cast(D.Dim, offset), TensorType(tuple(shape), dtype.name), is_view)


class Groups:
    """Buffers that share bytes: a union-find over the alias roots of one function."""

    def __init__(self, info: AliasInfo, live: Liveness):
        self.info = info
        self.parent: dict[str, str] = {}
        self.last: dict[str, int] = dict(live.last_use)
        # A pass may write over a buffer only if the function allocated it and nothing
        # outside the function (a runtime function that keeps it, the caller) can see it.
        self.writable: dict[str, bool] = {
            r: k == TENSOR and r not in info.escaping for r, k in info.kind.items()
        }

    def find(self, r: str) -> str:
        root = r
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while r != root:  # path compression
            self.parent[r], r = root, self.parent[r]
        return root

    def of(self, name: str) -> frozenset[str]:
        """The groups the value ``name`` may refer to."""
        return frozenset(self.find(r) for r in self.info.roots(name))

    def single(self, name: str) -> str | None:
        g = self.of(name)
        return next(iter(g)) if len(g) == 1 else None

    def union(self, keep: str, other: str) -> None:
        a, b = self.find(keep), self.find(other)
        if a == b:
            return
        self.parent[b] = a
        self.last[a] = max(self.last.get(a, -1), self.last.get(b, -1))
        self.writable[a] = self.writable.get(a, False) and self.writable.get(b, False)


def max_live_bytes(fn: Function, module: Module) -> int:
    """The most bytes PlanMemory's candidates hold at once in ``fn``, summed over scopes:
    the lower bound of any plan of the function as written."""
    info = analyze_aliases(fn, module)
    by_scope, _ = planning_candidates(fn, info, buffer_liveness(fn, info))
    return sum(lower_bound([b for _, b in items]) for items in by_scope.values())


def has_kills(fn: Function) -> bool:
    return any(is_kill(s) for s in fn.body)


def place_lazily(
    body: Sequence[Stmt], params: Sequence[str], ret: Expr | None = None
) -> tuple[Stmt, ...]:
    """``body`` with every memory binding (``alloc_storage``, ``alloc_tensor``,
    ``memory.view``) that something uses moved to just before the first statement using it
    (after what it needs); bindings nothing uses stay where they are."""
    movable: dict[str, Bind] = {
        s.name: s for s in body if isinstance(s, Bind) and call_of(s.value, *MEMORY_BINDINGS)
    }
    used: set[str] = set()
    for s in body:
        used.update(v.name for v in expr_vars(s.value))
    if ret is not None:
        used.update(v.name for v in expr_vars(ret))
    defined = set(params)
    out: list[Stmt] = []

    def need(name: str, depth: int = 0) -> None:
        if name in defined:
            return
        b = movable.get(name)
        if b is None:
            raise InternalError(
                f"%{name} is used before it is defined after moving memory bindings"
            )
        if depth > len(movable):
            raise InternalError(f"memory bindings refer to each other in a cycle at %{name}")
        for v in expr_vars(b.value):
            need(v.name, depth + 1)
        defined.add(name)
        out.append(b)

    for s in body:
        if isinstance(s, Bind) and s.name in movable and s.name in used:
            continue  # placed before its first use
        for v in expr_vars(s.value):
            if v.name not in defined and v.name in movable:
                need(v.name)
        out.append(s)
        if isinstance(s, Bind):
            defined.add(s.name)
    if ret is not None:
        for v in expr_vars(ret):
            if v.name in movable:
                need(v.name)
    return tuple(out)


def invoke_at(fn: Function, i: int) -> Invoke | None:
    st = fn.body[i]
    if isinstance(st, Effect) and isinstance(st.value, Invoke):
        return st.value
    return None

"""ComputeInPlace: an op writes its output over an input that dies at it.

Guarantees (per non-primitive function in explicit-memory form, before PlanMemory):

* For ``invoke op(..., %x, ...) outs (%y)`` where the op's registry record lets its output
  overwrite that input (``OpDef.inplace``: elementwise and unary ops, clip, batch norm in
  inference form, softmax, layer and RMS norm, ...), ``%y`` has ``%x``'s shape and dtype, and
  this statement is the last use of every value that shares ``%x``'s bytes, the two share
  memory. Either ``%y``'s ``alloc_tensor`` becomes ``memory.view(%x, 0, ...)`` and its
  storage disappears (``%y`` owned a storage alone), or, when ``%y``'s place is fixed (a
  slice of a concat's result after ElideConcatSplit, or an output the caller owns), the
  tensor holding ``%x`` becomes a view of ``%y`` (when it owned a storage of exactly
  ``%y``'s size alone, and no other value using those bytes of ``%y`` is live meanwhile).
* Never in place over a parameter, a constant, an output, a value a runtime function keeps,
  or anything aliased to a value still live (alias-aware: views, tuples, projections and
  calls that return their arguments all count); never when another input of the op shares
  bytes with the one overwritten, unless it is the same value at a position the op allows.
* Chains compose (conv → batch norm → relu share one buffer): statements are decided in
  program order on the sharing made so far.
* The decision is in the IR (``--dump-after ComputeInPlace`` shows the views), so every
  later pass, the report and every backend see it; nothing else needs to know.

Left to later passes: placing the buffers (PlanMemory) and freeing them (KillAfterLastUse);
a buffer now lives until the last use of anything sharing it. Functions that already hold
kills or are planned are left alone, as are symbolic sizes where a view would have to move
(an output's place is fixed only at static sizes). Running the pass twice changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from relaxc.ir import dims as D
from relaxc.ir.alias import analyze_aliases, buffer_liveness
from relaxc.ir.nodes import Function, Invoke, Module, Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpDef
from relaxc.ir.types import TensorType, Type
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.walk import map_functions, with_body

from .base import Pass, module_types
from .properties import EXPLICIT_MEMORY, PACKED_CALLS
from .storage_tenants import Groups, Layout, has_kills, invoke_at


@dataclass(frozen=True)
class ComputeInPlace(Pass):
    """Let ops write their output over an input that dies at them, as their record allows."""

    name: ClassVar[str] = "ComputeInPlace"
    summary: ClassVar[str] = (
        "an op writes its output over an input that dies at it (OpDef.inplace), as a view"
    )
    requires: ClassVar[frozenset[str]] = frozenset({EXPLICIT_MEMORY})
    forbids: ClassVar[frozenset[str]] = frozenset({PACKED_CALLS})
    hints: ClassVar[dict[str, str]] = {
        EXPLICIT_MEMORY: "run ManifestAlloc before it",
        PACKED_CALLS: "compute in place before LegalizePackedCalls",
    }

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        types = module_types(module, types)
        return map_functions(module, lambda fn: compute_in_place(fn, module, types[fn.name]))


def compute_in_place(fn: Function, module: Module, types: dict[str, Type]) -> Function:
    """``fn`` with every op that may write over a dying input doing so (``types``: the
    verifier's types of ``fn``'s values)."""
    if fn.is_primitive or fn.attr("planned") or has_kills(fn):
        return fn
    # -- analysis: where everything lives, and who shares bytes with whom --------------
    layout = Layout.of(fn, types)
    info = analyze_aliases(fn, module)
    groups = Groups(info, buffer_liveness(fn, info))
    names_of: dict[str, set[str]] = {}  # alias root -> the values that may refer to it
    for name in info.trees:
        for r in info.roots(name):
            names_of.setdefault(r, set()).add(name)
    decided = _Decider(fn, layout, groups, names_of)
    changed = False
    for i in range(len(fn.body)):
        inv = invoke_at(fn, i)
        if inv is None or inv.is_func or len(inv.outs) != 1:
            continue
        op = REGISTRY.get(inv.target)
        if op is None or not op.inplace:
            continue
        changed |= decided.at(i, inv, op)
    # -- rewrite --------------------------------------------------------------------
    return with_body(fn, layout.rewritten_body()) if changed else fn


@dataclass
class _Decider:
    fn: Function
    layout: Layout
    groups: Groups
    names_of: dict[str, set[str]]

    def at(self, i: int, inv: Invoke, op: OpDef) -> bool:
        y = inv.outs[0].name
        if not self.layout.written_only_at(y, i):
            return False
        for k in op.inplace:
            a = inv.args[k] if k < len(inv.args) else None
            if isinstance(a, Var):
                x = a.name
                if self._same_type(x, y) and self._dies_here(i, inv, op, k, x, y):
                    if self._take_input(x, y) or self._move_input(i, inv, x, y):
                        return True
        return False

    def _same_type(self, x: str, y: str) -> bool:
        tx, ty = self.layout.types.get(x), self.layout.types.get(y)
        return (
            isinstance(tx, TensorType)
            and isinstance(ty, TensorType)
            and tx.dtype == ty.dtype
            and tx.ndim == ty.ndim
            and all(D.dims_equal(a, b) for a, b in zip(tx.shape, ty.shape))
        )

    def _dies_here(self, i: int, inv: Invoke, op: OpDef, k: int, x: str, y: str) -> bool:
        """``%x``'s buffer is the function's own, no value sharing it is used after ``i``,
        and no other input of the op shares it (except ``%x`` again where the op allows)."""
        g = self.groups.single(x)
        if g is None or not self.groups.writable.get(g) or self.groups.last.get(g) != i:
            return False
        if g in self.groups.of(y):
            return False  # already in place
        for j, a in enumerate(inv.args):
            if j == k or not isinstance(a, Var) or g not in self.groups.of(a.name):
                continue
            if a.name != x or j not in op.inplace:
                return False
        return True

    def _take_input(self, x: str, y: str) -> bool:
        """``%y`` owns its storage alone: it becomes a view of ``%x``."""
        if self.layout.owns_storage(y) is None:
            return False
        base = self.layout.base(x)
        if base is None or not self._exclusive(base[0]):
            return False
        gx, gy = self.groups.single(x), self.groups.single(y)
        if gx is None or gy is None:
            return False
        self.layout.make_view(y, x, 0)
        self.groups.union(gx, gy)
        return True

    def _move_input(self, i: int, inv: Invoke, x: str, y: str) -> bool:
        """``%y``'s place is fixed: the tensor holding ``%x`` moves into ``%y``'s bytes."""
        lay = self.layout
        base_x, base_y = lay.base(x), lay.base(y)
        if base_x is None or base_y is None or base_x[1] != 0:
            return False
        rx, (ry, oy) = base_x[0], base_y
        n = lay.nbytes(y)
        if n is None or lay.owns_storage(rx) is None or lay.nbytes(rx) != n:
            return False
        gx, gy = self.groups.single(x), self.groups.single(y)
        if gx is None or gy is None or gx == gy:
            return False
        if not self.groups.info.kind.get(ry) == "tensor":
            return False  # only into memory the function allocated (or an output it writes)
        start = lay.index[rx]
        # No other value using those bytes of %y's buffer may be live while %x's is.
        for r in self._members(gy):
            for v in self.names_of.get(r, ()):
                if v == y or self.groups.single(v) == gx:
                    continue
                span = lay.data_range(v)
                if span is None or span[1] < start or span[0] >= i:
                    continue
                where = lay.base(v)
                if where is not None and where[0] == ry:
                    size = lay.nbytes(v)
                    if size is not None and (where[1] + size <= oy or where[1] >= oy + n):
                        continue  # other bytes of the buffer
                return False
        for a in inv.args:
            if isinstance(a, Var) and a.name != x and gy in self.groups.of(a.name):
                return False
        lay.make_view(rx, y, 0)
        self.groups.union(gy, gx)
        return True

    def _exclusive(self, tensor: str) -> bool:
        """No other tensor of ``tensor``'s storage may overlap its bytes (then the bytes
        are free once its buffer is dead, for the output to take)."""
        lay = self.layout
        p = lay.place.get(tensor)
        if p is None or p.is_view or lay.other_storage_uses.get(p.source, 0):
            return False
        if p.source not in lay.storage_args:
            return False
        kwargs = dict(lay.storage_args[p.source][1])
        if kwargs.get("external") is True or kwargs.get("arena") is True:
            return False
        others = [t for t in lay.tenants.get(p.source, []) if t != tensor]
        if not others:
            return True
        n = lay.nbytes(tensor)
        if n is None or not isinstance(p.offset, int):
            return False
        for t in others:
            q, m = lay.place[t], lay.nbytes(t)
            if m is None or not isinstance(q.offset, int):
                return False
            if not (q.offset + m <= p.offset or q.offset >= p.offset + n):
                return False
        return True

    def _members(self, g: str) -> list[str]:
        return sorted(r for r in self.groups.info.kind if self.groups.find(r) == g)

"""ElideConcatSplit: producers write straight into their slice of a concat; split's outputs
are views of its input. Neither copies anything.

Guarantees (per non-primitive function in explicit-memory form, before PlanMemory):

* ``invoke concat(%a, %b, ..., axis=k) outs (%r)``: when every dim of ``%r`` before ``k``
  is 1 (so each input is one contiguous run of ``%r``'s bytes) and all shapes are static,
  each input that owns its storage alone, is written by one statement before the concat
  and by none after, becomes ``memory.view(%r, OFFSET, ...)`` at its byte offset in
  ``%r``, its storage disappears, and the concat statement goes: the producers have
  written the result. Only when *every* input qualifies (else the copy stays): a
  parameter, a constant, a view of another buffer, or one value twice keeps the copy.
* ``invoke split(%x, ...) outs (%a, %b, ...)``: when every dim of ``%x`` before the axis is
  1 and shapes are static, each output that owns its storage alone becomes
  ``memory.view(%x, OFFSET, ...)`` and the split statement goes. ``%x`` may be anything,
  a parameter too: the views are only read (ComputeInPlace never writes over a buffer
  shared with a parameter or still live).
* Liveness follows from alias analysis: the joined buffer lives from the first producer of
  a slice to the last use of any slice or of the result; a split input lives as long as any
  of its parts.
* A concat on an inner axis with a batch above 1, or at symbolic shapes, keeps its copy.

Left to later passes: in-place execution over the slices (ComputeInPlace, which must run
after this pass to see them), placing (PlanMemory) and freeing (KillAfterLastUse).
Functions that already hold kills or are planned are left alone. Running the pass twice
changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from relaxc.ir.nodes import Function, Invoke, Module
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import BoundCall, OpError, bind_args
from relaxc.ir.types import TensorType, Type
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.walk import map_functions, with_body

from .base import Pass, module_types
from .properties import EXPLICIT_MEMORY, PACKED_CALLS

# A named tool, deliberately: an elision is kept only when it pays after ComputeInPlace, so
# both versions of a function are measured as that pass would leave them.
from .compute_in_place import compute_in_place
from .storage_tenants import Layout, has_kills, invoke_at, max_live_bytes

CONCAT, SPLIT = "concat", "split"


@dataclass(frozen=True)
class ElideConcatSplit(Pass):
    """Write concat inputs into their slices of the result; make split outputs views."""

    name: ClassVar[str] = "ElideConcatSplit"
    summary: ClassVar[str] = (
        "producers write into their slice of a concat, split outputs view its input: no copies"
    )
    requires: ClassVar[frozenset[str]] = frozenset({EXPLICIT_MEMORY})
    forbids: ClassVar[frozenset[str]] = frozenset({PACKED_CALLS})
    hints: ClassVar[dict[str, str]] = {
        EXPLICIT_MEMORY: "run ManifestAlloc before it",
        PACKED_CALLS: "elide copies before LegalizePackedCalls",
    }

    concat: bool = True
    split: bool = True
    only_if_smaller: bool = True

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        types = module_types(module, types)
        return map_functions(module, lambda fn: self._function(fn, module, types[fn.name]))

    def _function(self, fn: Function, module: Module, types: dict[str, Type]) -> Function:
        if fn.is_primitive or fn.attr("planned") or has_kills(fn):
            return fn
        new = self._elide(fn, types)
        if new is fn or not self.only_if_smaller:
            return new
        # Joining the slices makes the joined buffer live from its first producer on: on
        # some graphs (DenseNet's growing concats) that costs more than the copies saved.
        # Keep the rewrite only if, with in-place execution after it, fewer bytes are live
        # at once than without it.
        before = max_live_bytes(compute_in_place(fn, module, types), module)
        after = max_live_bytes(compute_in_place(new, module, types), module)
        return new if after <= before else fn

    def _elide(self, fn: Function, types: dict[str, Type]) -> Function:
        # -- analysis -------------------------------------------------------------------
        layout = Layout.of(fn, types)
        changed = False
        for i in range(len(fn.body)):
            inv = invoke_at(fn, i)
            if inv is None or inv.is_func:
                continue
            if inv.target == CONCAT and self.concat:
                changed |= _elide_concat(layout, i, inv)
            elif inv.target == SPLIT and self.split:
                changed |= _elide_split(layout, i, inv)
        # -- rewrite --------------------------------------------------------------------
        return with_body(fn, layout.rewritten_body()) if changed else fn


def _contiguous_parts(t: object, axis: int) -> bool:
    """Cutting a tensor of type ``t`` along ``axis`` gives contiguous runs of bytes."""
    return (
        isinstance(t, TensorType)
        and t.is_static()
        and -t.ndim <= axis < t.ndim
        and all(d == 1 for d in t.shape[: axis % t.ndim])
    )


def _bound(inv: Invoke) -> BoundCall | None:
    """The call's tensor inputs and attributes as the registry binds them: positional
    attributes (``split(%x, 2, axis=1)``), keywords and defaults alike; None if they do
    not bind."""
    op = REGISTRY.get(inv.target)
    if op is None:
        return None
    try:
        return bind_args(op, inv.args, inv.kwargs)
    except OpError:
        return None


def _elide_concat(lay: Layout, i: int, inv: Invoke) -> bool:
    bound = _bound(inv)
    if len(inv.outs) != 1 or bound is None:
        return False
    r = inv.outs[0].name
    axis = bound.attrs["axis"]
    if not isinstance(axis, int) or not _contiguous_parts(lay.types.get(r), axis):
        return False
    if not lay.written_only_at(r, i) or r not in lay.place or lay.place[r].is_view:
        return False
    names = [a.name for a in bound.inputs]
    if len(set(names)) != len(names) or r in names:
        return False
    offsets = []
    offset = 0
    for a in names:
        n = lay.nbytes(a)
        writes = lay.writers.get(a, [])
        if n is None or lay.owns_storage(a) is None or len(writes) != 1 or writes[0] >= i:
            return False
        offsets.append(offset)
        offset += n
    if offset != lay.nbytes(r):
        return False
    for a, off in zip(names, offsets):
        lay.make_view(a, r, off)
    lay.dropped.add(i)
    return True


def _elide_split(lay: Layout, i: int, inv: Invoke) -> bool:
    bound = _bound(inv)
    if bound is None or len(bound.inputs) != 1:
        return False
    x = bound.inputs[0].name
    axis = bound.attrs["axis"]
    if not isinstance(axis, int) or not _contiguous_parts(lay.types.get(x), axis):
        return False
    names = [v.name for v in inv.outs]
    if len(set(names)) != len(names) or x in names:
        return False
    offsets = []
    offset = 0
    for o in names:
        n = lay.nbytes(o)
        if n is None or lay.owns_storage(o) is None or not lay.written_only_at(o, i):
            return False
        offsets.append(offset)
        offset += n
    if offset != lay.nbytes(x):
        return False
    for o, off in zip(names, offsets):
        lay.make_view(o, x, off)
    lay.dropped.add(i)
    return True

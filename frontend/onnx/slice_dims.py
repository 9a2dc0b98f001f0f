"""Slice where a bound or the sliced axis is symbolic.

Exporters slice with bounds computed from the input's dims: BERT's
``position_ids[:, :seq]`` of a 64-long table, ``y[:, :, : h // 2]`` of an axis of ``2 * h``,
``x[:, 0:1]`` of an axis of ``seq``. relaxc's ``strided_slice`` takes static bounds of static
axes; such a slice (step 1) becomes ``take(x, arange(start, length))`` along the axis,
with ONNX's clamping of the bounds to ``[0, n]`` decided at import time from what is known of
the dims (each at least 1, at most its bound):

* a bound that provably lies in ``[0, n]`` is used as it is, one provably past an end is
  clamped to it;
* an end ``a * seq + b`` that cannot be proved at most a static ``n`` (no ``--bound`` says
  ``seq`` is small enough) is a bound the model implies: beyond it the slice would be shorter
  than ``seq`` and the graph's later ops could not combine it with ``seq``-long tensors.
  ``seq <= (n - b) / a`` is recorded (:attr:`ProgramBuilder.implied`) and becomes one of the
  function's ``upper_bounds``, so the run refuses a larger ``seq`` instead of computing
  something else (a note says so);
* otherwise the clamp stays in the length as ``min(e, n)``.

A symbolic start (``x[:, seq - 4:]``) is added to the indices when the program runs (the dim
computed as data: :meth:`ProgramBuilder._dims_tensor`); a step other than 1 with symbolic
bounds is refused.
"""

from __future__ import annotations

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType

from .context import NodeContext, shape_of
from .shape_fold import interval, prove_le
from .values import Folded, ShapeValue, Value

TO_THE_END = 2**31 - 1
"""An end at least this large means "to the end" (INT_MAX, INT64_MAX, numpy's None)."""


def _from_end(ctx: NodeContext, b: D.Dim, n: D.Dim, what: str) -> D.Dim:
    """A bound with ONNX's negative (from the end) reading resolved, before clamping."""
    bounds = ctx.builder.bounds
    if D.is_static(b):
        return D.simplify(D.add(n, b)) if int(b) < 0 else b  # type: ignore[arg-type]
    lo, hi = interval(b, bounds)
    if lo >= 0:
        return b
    if hi is not None and hi < 0:
        return D.simplify(D.add(n, b))
    raise ctx.fail(
        f"its {what} {D.dim_to_str(b)} may be negative or not depending on a symbolic dim; "
        "give the input a static shape (--shape)"
    )


def _clamp_start(ctx: NodeContext, s: D.Dim, n: D.Dim) -> D.Dim:
    bounds = ctx.builder.bounds
    if not prove_le(0, s, bounds):
        s = 0 if prove_le(s, 0, bounds) else D.simplify(D.DimCall("max", (s, 0)))
    if prove_le(s, n, bounds):
        return s
    if prove_le(n, s, bounds):
        return n
    return D.simplify(D.DimCall("min", (s, n)))


def _clamp_end(ctx: NodeContext, e: D.Dim, n: D.Dim, axis: int) -> D.Dim:
    bounds = ctx.builder.bounds
    if not prove_le(0, e, bounds):
        if prove_le(e, 0, bounds):
            return 0
        e = D.simplify(D.DimCall("max", (e, 0)))
    if prove_le(e, n, bounds):
        return e
    if prove_le(n, e, bounds):
        return n
    affine = _affine(e)
    if D.is_static(n) and affine is not None and affine[1] > 0:
        sym, a, b = affine
        limit = (int(n) - b) // a  # type: ignore[arg-type]
        if limit >= 1:
            known = ctx.builder.implied.get(sym)
            if known is None or limit < known[0]:
                why = (
                    f"node {ctx.node.name or ctx.op_type!r} slices axis {axis} of length {n} "
                    f"to {D.dim_to_str(e)}"
                )
                ctx.builder.implied[sym] = (limit, why)
            ctx.builder.bounds[sym] = min(limit, ctx.builder.bounds.get(sym, limit))
            return e
    return D.simplify(D.DimCall("min", (e, n)))


def _affine(d: D.Dim) -> tuple[str, int, int] | None:
    if isinstance(d, D.Sym):
        return d.name, 1, 0
    return D.affine_in(d)


def slice_axis(ctx: NodeContext, x: Value, axis: int, start: D.Dim, end: D.Dim, step: int) -> Value:
    """``x[start:end:step]`` along ``axis`` (ONNX Slice semantics) where the axis or a bound
    is symbolic."""
    n = shape_of(x)[axis]
    if step != 1:
        raise ctx.fail(
            f"a step of {step} on axis {axis} with symbolic bounds or length "
            f"({D.dim_to_str(start)}:{D.dim_to_str(end)} of {D.dim_to_str(n)}) is not "
            "supported (only step 1); give the input a static shape (--shape)"
        )
    s = _clamp_start(ctx, _from_end(ctx, start, n, "start"), n)
    if D.is_static(end) and int(end) >= TO_THE_END:  # type: ignore[arg-type]
        e: D.Dim = n
    else:
        e = _clamp_end(ctx, _from_end(ctx, end, n, "end"), n, axis)
    length = D.simplify(D.BinOp("-", e, s))
    if not prove_le(0, length, ctx.builder.bounds):
        length = D.simplify(D.DimCall("max", (length, 0)))
    if D.is_static(s) and int(s) == 0 and D.dims_equal(length, n):  # type: ignore[arg-type]
        return x
    first = int(s) if D.is_static(s) else 0  # type: ignore[arg-type]
    if D.is_static(length):
        indices: Value = Folded(
            np.arange(first, first + int(length), dtype=np.int64),  # type: ignore[arg-type]
            f"{ctx.hint()}_indices",
        )
    else:
        attrs = {"start": first, "delta": 1, "length": length, "dtype": DType("i64")}
        indices = ctx.emit("arange", [], attrs)
    if not D.is_static(s):  # x[seq - k:]: the start computed when the program runs
        indices = ctx.emit("add", [indices, ShapeValue((s,), scalar=True)])
    return ctx.emit("take", [x, indices], {"axis": axis})

"""Converters of the second reduction family: CumSum, CumProd, LpNormalization and
TopK (LogSoftmax and Hardmax are next to Softmax in convert_nn)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir.types import numpy_dtype

from .context import NodeContext, norm_axis, rank_of, shape_of
from .values import Folded

Converter = Callable[[NodeContext], list]


def _cumulative(op: str) -> Converter:
    """CumSum (opsets 11, 14) and CumProd (26): the axis is a constant 0-D (or 1-element)
    integer input."""

    def convert(ctx: NodeContext) -> list:
        x = ctx.input(0)
        rank = rank_of(x)
        if rank == 0:
            raise ctx.fail("its input is a scalar; it needs a tensor of rank 1 or more")
        axes = ctx.ints(ctx.input(1, "axis"), "the axis input")
        assert axes is not None
        if len(axes) != 1:
            raise ctx.fail(f"the axis input must be a single integer, got {len(axes)} values")
        attrs = {
            "axis": norm_axis(axes[0], rank, ctx),
            "exclusive": bool(ctx.attr("exclusive", 0)),
            "reverse": bool(ctx.attr("reverse", 0)),
        }
        return [ctx.emit(op, [x], attrs)]

    return convert


def convert_lp_normalization(ctx: NodeContext) -> list:
    """x / ||x||_p along axis (p 1 or 2): the norm is a reduction with keepdims (1/L of x),
    divided in by broadcasting. Where the norm is 0 (x is 0 along the axis) the result is 0,
    as ONNX's reference: the norm is replaced by 1 there (on the small norm tensor)."""
    x = ctx.input(0)
    rank = rank_of(x)
    if rank == 0:
        raise ctx.fail("its input is a scalar; it needs a tensor of rank 1 or more")
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        raise ctx.fail(f"p must be 1 or 2, got {p}")
    axis = norm_axis(int(ctx.attr("axis", -1)), rank, ctx)
    norm = ctx.emit(f"l{p}_norm", [x], {"axes": (axis,), "keepdims": True})
    np_dtype = numpy_dtype(x.type.dtype)
    zero = Folded(np.zeros((), np_dtype), f"{ctx.hint()}_zero")
    one = Folded(np.ones((), np_dtype), f"{ctx.hint()}_one")
    safe = ctx.emit("where", [ctx.emit("equal", [norm, zero]), one, norm])
    return [ctx.emit("divide", [x, safe])]


def convert_topk(ctx: NodeContext) -> list:
    """TopK (opsets 1, 10, 11, 24): k an attribute before 10, a constant input since; the
    indices by topk_indices (always sorted, which sorted=0 allows), the values gathered
    with them (k/L of x)."""
    x = ctx.input(0)
    rank = rank_of(x)
    if rank == 0:
        raise ctx.fail("its input is a scalar; it needs a tensor of rank 1 or more")
    if ctx.opset < 10:
        k = int(ctx.attr("k", -1))
    else:
        ks = ctx.ints(ctx.input(1, "K"), "the K input", sets_shape=True)
        assert ks is not None
        if len(ks) != 1:
            raise ctx.fail(f"the K input must be a single integer, got {len(ks)} values")
        k = ks[0]
    axis = norm_axis(int(ctx.attr("axis", -1)), rank, ctx)
    length = shape_of(x)[axis]
    if k < 0 or (isinstance(length, int) and k > length):
        raise ctx.fail(f"k is {k}; it must be in [0, the axis length {length}]")
    largest = bool(ctx.attr("largest", 1))
    idx = ctx.emit("topk_indices", [x], {"k": k, "axis": axis, "largest": largest}, k=1)
    values = ctx.emit("gather_elements", [x, idx], {"axis": axis})
    return [values, idx]


def table() -> dict[str, Converter]:
    return {
        "CumSum": _cumulative("cumsum"),
        "CumProd": _cumulative("cumprod"),
        "LpNormalization": convert_lp_normalization,
        "TopK": convert_topk,
    }

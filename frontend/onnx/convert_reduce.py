"""Converters of reductions, index-producing ops and Range."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType
from relaxc.ir.ops.scan import arange_values, range_length

from .context import NodeContext, norm_axis, rank_of
from .values import DimArray, Folded, Runtime, ShapeValue, Value

Converter = Callable[[NodeContext], list]

_RANGE_INPUTS = ("start", "limit", "delta")


def _range_scalar(ctx: NodeContext, i: int) -> Value:
    v = ctx.input(i, _RANGE_INPUTS[i])
    if isinstance(v, Runtime):
        raise ctx.value_dependent(f"its {_RANGE_INPUTS[i]} input (and so its length)", v)
    if isinstance(v, DimArray):
        v = v.flat()
    size = v.array.size if isinstance(v, Folded) else len(v.dims)
    if size != 1:
        raise ctx.fail(f"its {_RANGE_INPUTS[i]} input must be a scalar, got {size} values")
    return v


def _known_number(v: Value) -> float | int | None:
    """The value of a scalar known at import time (None for a symbolic dim)."""
    if isinstance(v, Folded):
        x = v.array.reshape(-1)[0]
        return int(x) if v.array.dtype.kind in "iu" else float(x)
    assert isinstance(v, ShapeValue)
    d = v.dims[0]
    return d if isinstance(d, int) else None


def _as_dim(v: Value) -> D.Dim:
    if isinstance(v, ShapeValue):
        return v.dims[0]
    assert isinstance(v, Folded)
    return int(v.array.reshape(-1)[0])


_STASH: dict[int, np.dtype] = {1: np.dtype(np.float32), 11: np.dtype(np.float64)}


def _half_range(ctx: NodeContext, s: float, d: float, n: int, dt: np.dtype) -> np.ndarray:
    """A float16 or bfloat16 range (Range 27): computed in its stash_type (float by
    default, or double) as numpy's arange computes it, rounded to ``dt``."""
    stash = int(ctx.attr("stash_type", 1))
    if stash not in _STASH:
        raise ctx.fail(f"stash_type must be 1 (float) or 11 (double), got {stash}")
    wide = _STASH[stash]
    first = np.array(s, dtype=wide).item()
    values = np.arange(first, float(s) + n * float(d), float(d), dtype=wide)
    return np.ascontiguousarray(values[:n].astype(dt))


def convert_range(ctx: NodeContext) -> list:
    start, limit, delta = (_range_scalar(ctx, i) for i in range(3))
    folded = next((v for v in (start, limit, delta) if isinstance(v, Folded)), None)
    dt = folded.array.dtype if folded is not None else np.dtype(np.int64)
    numbers = [_known_number(v) for v in (start, limit, delta)]
    s, lim, d = numbers
    if d is None:
        raise ctx.fail("its delta input is a symbolic dim; relaxc needs the step known at import")
    if d == 0:
        raise ctx.fail("its delta input is 0, so the sequence never reaches its limit")
    if s is not None and lim is not None:
        n = max(int(math.ceil((float(lim) - float(s)) / float(d))), 0)
        if dt.kind in "iu":
            n = max(-((int(s) - int(lim)) // int(d)), 0)
        if dt.itemsize == 2 and dt.kind not in "iu":
            return [Folded(_half_range(ctx, s, d, n, dt), ctx.hint())]
        return [Folded(arange_values(s, d, n, dt), ctx.hint())]
    if s is None:
        raise ctx.fail(
            "its start input is a symbolic dim; relaxc computes a Range from symbolic dims "
            "only when start and delta are constants"
        )
    if dt.kind not in "iu" or not float(d).is_integer() or not float(s).is_integer():
        raise ctx.fail(
            f"its limit is a symbolic dim but the sequence is of {dt} "
            "(relaxc computes symbolic lengths of integer ranges only)"
        )
    length = range_length(int(s), _as_dim(limit), int(d))
    dtype = Folded(np.zeros((), dt), "").type.dtype
    return [
        ctx.emit(
            "arange",
            [],
            {"start": int(s), "delta": int(d), "length": length, "dtype": DType(dtype)},
        )
    ]


# -- reductions ---------------------------------------------------------------------------

REDUCE = {
    "ReduceMin": "min",
    "ReduceProd": "prod",
    "ReduceL1": "l1_norm",
    "ReduceL2": "l2_norm",
    "ReduceLogSum": "log_sum",
    "ReduceLogSumExp": "log_sum_exp",
    "ReduceSumSquare": "sum_square",
}
"""ONNX reduction -> relaxc op. Each takes its axes as an attribute before opset 18 and as
its second input since (with noop_with_empty_axes)."""

AXES_INPUT_SINCE = 18
FLOAT_ONLY = ("l2_norm", "log_sum", "log_sum_exp")
"""Ops relaxc computes on floats only: ONNX's integer forms are computed in f64 and cast back
(truncated), as onnxruntime computes them in the integer's own type and truncates each step
no differently for these non-negative (L2) or logarithmic results."""


def reduction_axes(ctx: NodeContext, rank: int) -> tuple[int, ...] | None:
    """The axes a Reduce* node reduces, normalized: None for every axis, ``()`` for none
    (noop_with_empty_axes with no axes given)."""
    if ctx.opset >= AXES_INPUT_SINCE:
        axes = ctx.ints(ctx.optional(1), "the axes input")
    else:
        axes = ctx.attr("axes")
    if not axes:
        return () if ctx.opset >= AXES_INPUT_SINCE and ctx.attr("noop_with_empty_axes", 0) else None
    normalized = {norm_axis(int(a), rank, ctx, "reduction axis") for a in axes}
    if len(normalized) != len(axes):
        raise ctx.fail(f"its axes {list(axes)} name an axis twice")
    return tuple(sorted(normalized))


def _reduce(op: str) -> Converter:
    def convert(ctx: NodeContext) -> list:
        x = ctx.input(0)
        rank = rank_of(x)
        axes = reduction_axes(ctx, rank)
        keepdims = bool(ctx.attr("keepdims", 1))
        if axes == () and op in ("min", "prod"):
            return [x]  # the reduction of each element alone is the element
        attrs = {"axes": tuple(range(rank)) if axes is None else axes, "keepdims": keepdims}
        dtype = x.type.dtype
        if op in FLOAT_ONLY and dtype not in ("f16", "f32", "f64"):
            wide = ctx.emit("cast", [x], {"dtype": DType("f64")})
            y = ctx.emit(op, [wide], attrs)
            return [ctx.emit("cast", [y], {"dtype": DType(dtype)})]
        return [ctx.emit(op, [x], attrs)]

    return convert


def _arg(op: str) -> Converter:
    def convert(ctx: NodeContext) -> list:
        x = ctx.input(0)
        rank = rank_of(x)
        if rank == 0:
            raise ctx.fail("its input is a scalar; it needs a tensor of rank 1 or more")
        attrs = {
            "axis": norm_axis(int(ctx.attr("axis", 0)), rank, ctx),
            "keepdims": bool(ctx.attr("keepdims", 1)),
            "select_last_index": bool(ctx.attr("select_last_index", 0)),
        }
        return [ctx.emit(op, [x], attrs)]

    return convert


def table() -> dict[str, Converter]:
    out: dict[str, Converter] = {
        "Range": convert_range,
        "ArgMax": _arg("argmax"),
        "ArgMin": _arg("argmin"),
    }
    out.update({k: _reduce(v) for k, v in REDUCE.items()})
    return out

"""Converters of elementwise math, reductions and casts."""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir import bf16
from relaxc.ir import dims as D
from relaxc.ir.nodes import DType
from relaxc.ir.types import numpy_dtype

from .context import NodeContext, norm_axis, rank_of, shape_of
from .model import NARROW, relax_dtype
from .values import Folded, Runtime, ShapeValue, Value

Converter = Callable[[NodeContext], list]

UNARY = {
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Sqrt": "sqrt",
    "Exp": "exp",
    "Erf": "erf",
    "Abs": "abs",
    "Neg": "negative",
    "Log": "log",
}
BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Pow": "power"}
VARIADIC = {"Sum": "add", "Max": "maximum", "Min": "minimum"}
# reduction -> (relaxc op, first opset taking axes as an input instead of an attribute)
REDUCE = {"ReduceMean": ("mean", 18), "ReduceSum": ("sum", 13), "ReduceMax": ("max", 18)}


def _unary(op: str) -> Converter:
    def convert(ctx: NodeContext) -> list:
        return [ctx.emit(op, [ctx.input(0)])]

    return convert


def _shape_dims(v: Value) -> tuple[tuple[D.Dim, ...], bool] | None:
    """(dims, scalar) of an integer shape-like value; None if ``v`` is not one."""
    if isinstance(v, ShapeValue):
        return v.dims, v.scalar
    if isinstance(v, Folded) and v.array.dtype.kind in "iu" and v.array.ndim <= 1:
        return tuple(int(x) for x in v.array.reshape(-1)), v.array.ndim == 0
    return None


_DIM_OPS = {
    "add": D.add,
    "subtract": lambda a, b: D.simplify(D.BinOp("-", a, b)),
    "multiply": D.mul,
    "divide": lambda a, b: D.simplify(D.BinOp("/", a, b)),
}


def _shape_arith(op: str, a: Value, b: Value) -> ShapeValue | None:
    """Integer arithmetic on shape values (e.g. ``Shape(x)[1] * 4``), or None if not that."""
    if not (isinstance(a, ShapeValue) or isinstance(b, ShapeValue)) or op not in _DIM_OPS:
        return None
    da, db = _shape_dims(a), _shape_dims(b)
    if da is None or db is None:
        return None
    (xa, sa), (xb, sb) = da, db
    if len(xa) != len(xb):
        if len(xa) == 1:
            xa = xa * len(xb)
        elif len(xb) == 1:
            xb = xb * len(xa)
        else:
            return None
    return ShapeValue(tuple(D.simplify(_DIM_OPS[op](p, q)) for p, q in zip(xa, xb)), sa and sb)


def _binary(op: str) -> Converter:
    def convert(ctx: NodeContext) -> list:
        a, b = ctx.input(0), ctx.input(1)
        shaped = _shape_arith(op, a, b)
        if shaped is not None:
            return [shaped]
        if op == "power" and a.type.dtype != b.type.dtype:
            # ONNX Pow lets the exponent have its own type; relaxc's power does not.
            b = ctx.emit("cast", [b], {"dtype": DType(a.type.dtype)})
        return [ctx.emit(op, [a, b])]

    return convert


def _variadic(op: str) -> Converter:
    def convert(ctx: NodeContext) -> list:
        values = [v for v in ctx.inputs if v is not None]
        if not values:
            raise ctx.fail("needs at least one input")
        acc = values[0]
        for v in values[1:]:
            acc = ctx.emit(op, [acc, v])
        return [acc]

    return convert


def convert_leaky_relu(ctx: NodeContext) -> list:
    return [ctx.emit("leaky_relu", [ctx.input(0)], {"alpha": float(ctx.attr("alpha", 0.01))})]


_FLT_MAX = float(np.finfo(np.float32).max)


def convert_clip(ctx: NodeContext) -> list:
    """Clip-6 takes its bounds as attributes (default the float range), Clip-11 on as
    optional inputs (Clip-12 adds integer types). A bound known at import time is an
    attribute of ``clip`` (floats) or a folded scalar of the input's dtype (integers, exact);
    one computed at run time is a ``maximum``/``minimum`` with it. ONNX clips to ``min``
    first and then to ``max``, so a min above the max gives the max everywhere."""
    x = ctx.input(0)
    if ctx.opset < 11:
        lo: Value | float | None = float(ctx.attr("min", -_FLT_MAX))
        hi: Value | float | None = float(ctx.attr("max", _FLT_MAX))
    else:
        lo, hi = _clip_bound(ctx, 1, "min"), _clip_bound(ctx, 2, "max")
    dtype = numpy_dtype(x.type.dtype)
    if dtype.kind == "f" and not isinstance(lo, Runtime) and not isinstance(hi, Runtime):
        if lo is None and hi is None:
            return [x]
        attrs = {
            "a_min": float("-inf") if lo is None else float(lo),  # type: ignore[arg-type]
            "a_max": float("inf") if hi is None else float(hi),  # type: ignore[arg-type]
        }
        if attrs["a_min"] <= attrs["a_max"]:
            return [ctx.emit("clip", [x], attrs)]
    y = x
    for bound, op in ((lo, "maximum"), (hi, "minimum")):
        if bound is None:
            continue
        if not isinstance(bound, Runtime):
            bound = Folded(np.array(bound, dtype=dtype), f"{ctx.hint()}_{op}")
        y = ctx.emit(op, [y, bound])
    return [y]


def _clip_bound(ctx: NodeContext, i: int, what: str) -> Value | float | None:
    v = ctx.optional(i)
    if v is None:
        return None
    if v.type.dtype != ctx.input(0).type.dtype:
        raise ctx.fail(f"the {what} input is {v.type.dtype}; it must have the input's dtype")
    if D.product(v.type.shape) != 1:
        raise ctx.fail(f"the {what} input must be a single value, got shape {v.type.shape}")
    if isinstance(v, Runtime):
        return v if not v.type.shape else ctx.emit("reshape", [v], {"newshape": ()})
    return ctx.folded(v, f"the {what} input").reshape(-1)[0].item()


def _cast_to(ctx: NodeContext, x: Value, to: str) -> list:
    """``saturate`` (opset 19; default 1) concerns the casts to the 8-bit floats,
    ``round_mode`` (24; default up) those to f8e8m0: relaxc's cast takes both."""
    if isinstance(x, ShapeValue) and to in ("i32", "i64"):
        return [x]  # dims stay dims
    if x.type.dtype == to:
        return [x]
    narrow = [d for d in (to, x.type.dtype) if d in NARROW]
    if narrow and not bf16.available():
        raise ctx.fail(
            f"casting to or from {narrow[0]} needs ml_dtypes installed (pip install 'relaxc[onnx]')"
        )
    attrs: dict = {"dtype": DType(to)}
    if not ctx.attr("saturate", 1):
        attrs["saturate"] = False
    round_mode = ctx.attr("round_mode", "up")
    round_mode = round_mode.decode() if isinstance(round_mode, bytes) else str(round_mode)
    if round_mode != "up":
        attrs["round_mode"] = round_mode
    return [ctx.emit("cast", [x], attrs)]


def convert_cast(ctx: NodeContext) -> list:
    """Cast (every version: 19 adds ``saturate``, 24 ``round_mode``; 19-25 add the 8-bit,
    4-bit and 2-bit types)."""
    to = relax_dtype(int(ctx.attr("to")), "the target of the Cast")
    return _cast_to(ctx, ctx.input(0), to)


def convert_cast_like(ctx: NodeContext) -> list:
    """CastLike (opset 15 on): Cast to the dtype of the second input (with Cast's
    ``saturate`` and ``round_mode``)."""
    return _cast_to(ctx, ctx.input(0), ctx.input(1, "target_type").type.dtype)


def _reduce(op: str, axes_input_since: int) -> Converter:
    def convert(ctx: NodeContext) -> list:
        x = ctx.input(0)
        rank = rank_of(x)
        if ctx.opset >= axes_input_since:
            axes = ctx.ints(ctx.optional(1), "the axes input")
        else:
            axes = ctx.attr("axes")
        keepdims = bool(ctx.attr("keepdims", 1))
        if not axes:
            if ctx.attr("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(rank))
        normalized = tuple(sorted({norm_axis(a, rank, ctx, "reduction axis") for a in axes}))
        empty = _empty_reduction(ctx, op, x, normalized, keepdims)
        if empty is not None:
            return [empty]
        return [ctx.emit(op, [x], {"axes": normalized, "keepdims": keepdims})]

    return convert


EMPTY_REDUCTION = {"sum": "zero", "max": "lowest"}
"""What ONNX defines a reduction over no values to be (ReduceMean's is undefined)."""


def _empty_reduction(
    ctx: NodeContext, op: str, x: Value, axes: tuple[int, ...], keepdims: bool
) -> Folded | None:
    """The result of reducing an axis of length 0 (ReduceSum: 0; ReduceMax: -inf, or the
    dtype's minimum, or False), as a folded splat; None when no reduced axis is empty."""
    shape = shape_of(x)
    if not any(D.is_static(shape[a]) and int(shape[a]) == 0 for a in axes):  # type: ignore[arg-type]
        return None
    if op not in EMPTY_REDUCTION:
        raise ctx.fail(f"{ctx.op_type} over an empty axis is undefined in ONNX")
    out = [1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes]
    if not all(D.is_static(d) for d in out):
        raise ctx.fail("a reduction over an empty axis needs the other dims static")
    dtype = numpy_dtype(x.type.dtype)
    if op == "sum":
        fill = np.zeros((), dtype)
    elif dtype.kind == "f":
        fill = np.array(-np.inf, dtype)
    elif dtype.kind == "b":
        fill = np.array(False)
    else:
        fill = np.array(np.iinfo(dtype).min, dtype)
    return Folded(np.broadcast_to(fill, [int(d) for d in out]), ctx.hint())  # type: ignore[arg-type]


def table() -> dict[str, Converter]:
    out: dict[str, Converter] = {}
    out.update({k: _unary(v) for k, v in UNARY.items()})
    out.update({k: _binary(v) for k, v in BINARY.items()})
    out.update({k: _variadic(v) for k, v in VARIADIC.items()})
    out.update({k: _reduce(op, since) for k, (op, since) in REDUCE.items()})
    out.update(
        {
            "LeakyRelu": convert_leaky_relu,
            "Clip": convert_clip,
            "Cast": convert_cast,
            "CastLike": convert_cast_like,
        }
    )
    return out

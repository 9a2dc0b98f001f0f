"""Converters of elementwise math, reductions and casts."""

from __future__ import annotations

from typing import Callable

from relaxc.ir import bf16
from relaxc.ir import dims as D
from relaxc.ir.nodes import DType

from .context import NodeContext, norm_axis, rank_of
from .model import relax_dtype
from .values import Folded, ShapeValue, Value

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


def convert_gelu(ctx: NodeContext) -> list:
    if ctx.attr("approximate", "none") != "none":
        raise ctx.fail(
            f"approximate='{ctx.attr('approximate')}' is not supported (only the exact erf form)"
        )
    return [ctx.emit("gelu", [ctx.input(0)])]


def convert_clip(ctx: NodeContext) -> list:
    x = ctx.input(0)
    if ctx.opset < 11:
        lo, hi = ctx.attr("min"), ctx.attr("max")
    else:
        lo, hi = (
            ctx.scalar(ctx.optional(1), "the min input"),
            ctx.scalar(ctx.optional(2), "the max input"),
        )
    if lo is None and hi is None:
        return [x]
    return [
        ctx.emit(
            "clip",
            [x],
            {
                "a_min": float("-inf") if lo is None else float(lo),
                "a_max": float("inf") if hi is None else float(hi),
            },
        )
    ]


def convert_cast(ctx: NodeContext) -> list:
    x = ctx.input(0)
    to = relax_dtype(int(ctx.attr("to")), f"the target of Cast {ctx.hint()}")
    if isinstance(x, ShapeValue) and to in ("i32", "i64"):
        return [x]  # dims stay dims
    if x.type.dtype == to:
        return [x]
    if to == "bf16" and not bf16.available():
        raise ctx.fail("casting to bfloat16 needs ml_dtypes installed (pip install 'relaxc[onnx]')")
    return [ctx.emit("cast", [x], {"dtype": DType(to)})]


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
        return [ctx.emit(op, [x], {"axes": normalized, "keepdims": keepdims})]

    return convert


def table() -> dict[str, Converter]:
    out: dict[str, Converter] = {}
    out.update({k: _unary(v) for k, v in UNARY.items()})
    out.update({k: _binary(v) for k, v in BINARY.items()})
    out.update({k: _variadic(v) for k, v in VARIADIC.items()})
    out.update({k: _reduce(op, since) for k, (op, since) in REDUCE.items()})
    out.update(
        {
            "LeakyRelu": convert_leaky_relu,
            "Gelu": convert_gelu,
            "Clip": convert_clip,
            "Cast": convert_cast,
        }
    )
    return out

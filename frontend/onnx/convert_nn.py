"""Converters of GlobalAveragePool, BatchNormalization, LRN, Softmax, LogSoftmax, Hardmax,
Gemm and MatMul, and LayerNormalization's core (convert_cnn.py adds its extra outputs).
Convolutions and pools are in convert_cnn.py."""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.types import numpy_dtype

from .context import NodeContext, norm_axis, rank_of, shape_of
from .values import Folded, Value

Converter = Callable[[NodeContext], list]


def convert_global_average_pool(ctx: NodeContext) -> list:
    x = ctx.input(0)
    if rank_of(x) == 4:
        return [ctx.emit("global_avg_pool2d", [x])]
    if rank_of(x) < 3:
        raise ctx.fail(f"needs an input of rank 3 or more, got {rank_of(x)}")
    return [ctx.emit("mean", [x], {"axes": tuple(range(2, rank_of(x))), "keepdims": True})]


def convert_batch_norm(ctx: NodeContext) -> list:
    if ctx.opset < 9 and not ctx.attr("spatial", 1):
        raise ctx.fail("spatial=0 (per-activation statistics) is not supported")
    if ctx.attr("training_mode", 0):
        raise ctx.fail("training_mode=1 is not supported (relaxc compiles inference)")
    x = ctx.input(0)
    params = [
        ctx.input(i, n) for i, n in enumerate(("scale", "B", "input_mean", "input_var"), start=1)
    ]
    if rank_of(x) < 2:
        raise ctx.fail(f"needs an input of rank 2 or more, got {rank_of(x)}")
    return [
        ctx.emit(
            "batch_norm", [x] + params, {"axis": 1, "epsilon": float(ctx.attr("epsilon", 1e-5))}
        )
    ]


def convert_lrn(ctx: NodeContext) -> list:
    if ctx.attr("size") is None:
        raise ctx.fail("it has no size attribute (the number of channels to sum over)")
    attrs = {
        "size": int(ctx.attr("size")),
        "axis": 1,
        "alpha": float(ctx.attr("alpha", 1e-4)),
        "beta": float(ctx.attr("beta", 0.75)),
        "bias": float(ctx.attr("bias", 1.0)),
    }
    return [ctx.emit("lrn", [ctx.input(0)], attrs)]


def convert_layer_norm(ctx: NodeContext) -> list:
    if ctx.attr("stash_type", 1) != 1:
        raise ctx.fail("stash_type other than 1 (float32 statistics) is not supported")
    x, scale, bias = ctx.input(0), ctx.input(1, "Scale"), ctx.optional(2)
    rank = rank_of(x)
    axis = norm_axis(int(ctx.attr("axis", -1)), rank, ctx)
    normalized = shape_of(x)[axis:]
    scale = _broadcast_param(ctx, scale, normalized, "Scale")
    if bias is None:
        if not all(D.is_static(d) for d in normalized):
            raise ctx.fail("without a bias input the normalized dims must be static")
        bias = Folded(
            np.zeros([int(d) for d in normalized], dtype=numpy_dtype(x.type.dtype)),  # type: ignore[arg-type]
            f"{ctx.hint()}_zero_bias",
        )
    bias = _broadcast_param(ctx, bias, normalized, "B")
    return [
        ctx.emit(
            "layer_norm",
            [x, scale, bias],
            {"axes": tuple(range(axis, rank)), "epsilon": float(ctx.attr("epsilon", 1e-5))},
        )
    ]


def _broadcast_param(ctx: NodeContext, v: Value, shape: tuple, what: str) -> Value:
    """A LayerNormalization parameter given with a broadcastable shape, made full-shaped."""
    if tuple(shape_of(v)) == tuple(shape):
        return v
    if isinstance(v, Folded) and all(D.is_static(d) for d in shape):
        try:
            return Folded(
                np.array(np.broadcast_to(v.array, [int(d) for d in shape]), order="C"), v.name
            )
        except ValueError:
            pass
    raise ctx.fail(
        f"{what} has shape {tuple(shape_of(v))}, which does not match the normalized "
        f"dims {tuple(D.dim_to_str(d) for d in shape)}"
    )


def _rows_at_axis(ctx: NodeContext, x: Value, emit_axis: Callable[[Value, int], Value]) -> list:
    """Softmax, LogSoftmax and Hardmax along their axis: since opset 13 a single axis;
    before, the input coerced to 2-D at axis (all dims from axis on as one flattened row)."""
    rank = rank_of(x)
    if rank == 0:
        raise ctx.fail("its input is a scalar; it needs a tensor of rank 1 or more")
    default = -1 if ctx.opset >= 13 else 1
    axis = norm_axis(int(ctx.attr("axis", default)), rank, ctx)
    if ctx.opset >= 13 or axis == rank - 1:
        return [emit_axis(x, axis)]
    shape = shape_of(x)
    rows = ctx.emit(
        "reshape", [x], {"newshape": (D.product(shape[:axis]), D.product(shape[axis:]))}
    )
    y = emit_axis(rows, 1)
    return [ctx.emit("reshape", [y], {"newshape": tuple(shape)})]


def _normalize_along(op: str) -> Callable[[NodeContext], list]:
    def convert(ctx: NodeContext) -> list:
        return _rows_at_axis(ctx, ctx.input(0), lambda v, axis: ctx.emit(op, [v], {"axis": axis}))

    return convert


def convert_hardmax(ctx: NodeContext) -> list:
    """One-hot of the first max along the axis: argmax (first index on a tie) then one_hot
    with x's type (no temporary beyond the index tensor, 1/L of x)."""
    x = ctx.input(0)
    dtype = x.type.dtype

    def hardmax(v: Value, axis: int) -> Value:
        length = shape_of(v)[axis]
        if not isinstance(length, int):
            raise ctx.fail(
                f"the length of its axis ({D.dim_to_str(length)}) must be known when the "
                "model is imported"
            )
        idx = ctx.emit("argmax", [v], {"axis": axis, "keepdims": False})
        values = Folded(np.array([0, 1], numpy_dtype(dtype)), f"{ctx.hint()}_off_on")
        return ctx.emit("one_hot", [idx, values], {"depth": length, "axis": axis})

    return _rows_at_axis(ctx, x, hardmax)


def convert_gemm(ctx: NodeContext) -> list:
    a, b, c = ctx.input(0, "A"), ctx.input(1, "B"), ctx.optional(2)
    if rank_of(a) != 2 or rank_of(b) != 2:
        raise ctx.fail(f"A and B must be matrices, got ranks {rank_of(a)} and {rank_of(b)}")
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    if ctx.attr("transA", 0):
        a = ctx.emit("transpose", [a], {"axes": (1, 0)})
    # dense(x, w) is x @ w.T: w is B when transB, else B transposed (folded when B is a weight).
    w = b if ctx.attr("transB", 0) else ctx.emit("transpose", [b], {"axes": (1, 0)})
    n = shape_of(w)[0]
    bias_fits = (
        c is not None
        and beta == 1.0
        and alpha == 1.0
        and len(shape_of(c)) == 1
        and D.dims_equal(shape_of(c)[0], n)
    )
    y = ctx.emit("dense", [a, w] + ([c] if bias_fits else []))
    if alpha != 1.0:
        y = ctx.emit("multiply", [y, _scalar_like(alpha, y, "alpha", ctx)])
    if c is not None and not bias_fits and beta != 0.0:
        if beta != 1.0:
            c = ctx.emit("multiply", [c, _scalar_like(beta, c, "beta", ctx)])
        y = ctx.emit("add", [y, c])
    return [y]


def _scalar_like(value: float, like: Value, name: str, ctx: NodeContext) -> Folded:
    return Folded(np.array(value, dtype=numpy_dtype(like.type.dtype)), f"{ctx.hint()}_{name}")


def convert_matmul(ctx: NodeContext) -> list:
    a, b = ctx.input(0), ctx.input(1)
    if rank_of(a) == 0 or rank_of(b) == 0:
        raise ctx.fail("MatMul operands must have rank 1 or more")
    squeeze = []
    if rank_of(a) == 1:
        a = ctx.emit("expand_dims", [a], {"axis": 0})
        squeeze.append(-2)
    if rank_of(b) == 1:
        b = ctx.emit("expand_dims", [b], {"axis": 1})
        squeeze.append(-1)
    y = ctx.emit("matmul", [a, b])
    if squeeze:
        rank = rank_of(y)
        y = ctx.emit("squeeze", [y], {"axes": tuple(sorted(s % rank for s in squeeze))})
    return [y]


def table() -> dict[str, Converter]:
    return {
        "GlobalAveragePool": convert_global_average_pool,
        "BatchNormalization": convert_batch_norm,
        "LRN": convert_lrn,
        "Softmax": _normalize_along("softmax"),
        "LogSoftmax": _normalize_along("log_softmax"),
        "Hardmax": convert_hardmax,
        "Gemm": convert_gemm,
        "MatMul": convert_matmul,
    }

"""Converters of the neural-network operators: convolution, pooling, normalizations,
Gemm/MatMul and Softmax."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.types import numpy_dtype

from .context import NodeContext, norm_axis, rank_of, shape_of
from .values import Folded, Value

Converter = Callable[[NodeContext], list]


def _require_4d(ctx: NodeContext, x: Value) -> None:
    if rank_of(x) != 4:
        raise ctx.fail(
            f"only 2-D {ctx.op_type} (4-D NCHW inputs) is supported; the input has "
            f"rank {rank_of(x)}"
        )


def _pair(ctx: NodeContext, name: str, default: int) -> tuple[int, int]:
    v = ctx.attr(name)
    if v is None:
        return (default, default)
    if len(v) != 2:
        raise ctx.fail(f"{name} must have 2 values for a 2-D {ctx.op_type}, got {list(v)}")
    return (int(v[0]), int(v[1]))


def _padding(
    ctx: NodeContext,
    x: Value,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilation: tuple[int, int],
) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from ``pads`` or ``auto_pad``."""
    auto = ctx.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = ctx.attr("pads")
        if pads is None:
            return (0, 0, 0, 0)
        if len(pads) != 4:
            raise ctx.fail(f"pads must have 4 values for a 2-D {ctx.op_type}, got {list(pads)}")
        return (int(pads[0]), int(pads[1]), int(pads[2]), int(pads[3]))
    if auto == "VALID":
        return (0, 0, 0, 0)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.fail(f"auto_pad '{auto}' is not an ONNX padding mode")
    before, after = [], []
    for size, k, s, d in zip(shape_of(x)[2:], kernel, strides, dilation):
        if not D.is_static(size):
            raise ctx.fail(
                f"auto_pad={auto} needs static spatial sizes; this input has {D.dim_to_str(size)}"
            )
        out = math.ceil(int(size) / s)  # type: ignore[arg-type]
        total = max((out - 1) * s + (k - 1) * d + 1 - int(size), 0)  # type: ignore[arg-type]
        small, big = total // 2, total - total // 2
        before.append(small if auto == "SAME_UPPER" else big)
        after.append(big if auto == "SAME_UPPER" else small)
    return (before[0], before[1], after[0], after[1])


def convert_conv(ctx: NodeContext) -> list:
    x, w, b = ctx.input(0, "X"), ctx.input(1, "W"), ctx.optional(2)
    _require_4d(ctx, x)
    if rank_of(w) != 4:
        raise ctx.fail(f"the weight must have rank 4, got {rank_of(w)}")
    kernel = tuple(int(d) for d in shape_of(w)[2:])  # type: ignore[arg-type]
    strides, dilation = _pair(ctx, "strides", 1), _pair(ctx, "dilations", 1)
    padding = _padding(ctx, x, kernel, strides, dilation)  # type: ignore[arg-type]
    attrs = {
        "strides": strides,
        "padding": padding,
        "dilation": dilation,
        "groups": int(ctx.attr("group", 1)),
    }
    return [ctx.emit("conv2d", [x, w] + ([b] if b is not None else []), attrs)]


def _pool_common(ctx: NodeContext, x: Value) -> dict:
    _require_4d(ctx, x)
    kernel = ctx.attr("kernel_shape")
    if kernel is None or len(kernel) != 2:
        raise ctx.fail(f"kernel_shape must have 2 values, got {kernel}")
    kernel = (int(kernel[0]), int(kernel[1]))
    strides, dilation = _pair(ctx, "strides", 1), _pair(ctx, "dilations", 1)
    return {
        "pool_size": kernel,
        "strides": strides,
        "padding": _padding(ctx, x, kernel, strides, dilation),
        "dilation": dilation,
        "ceil_mode": bool(ctx.attr("ceil_mode", 0)),
    }


def convert_max_pool(ctx: NodeContext) -> list:
    # storage_order (opset 8 on) orders only the Indices output, which is refused if used
    x = ctx.input(0)
    return [ctx.emit("max_pool2d", [x], _pool_common(ctx, x))]


def convert_average_pool(ctx: NodeContext) -> list:
    x = ctx.input(0)
    attrs = _pool_common(ctx, x)
    attrs["count_include_pad"] = bool(ctx.attr("count_include_pad", 0))
    return [ctx.emit("avg_pool2d", [x], attrs)]


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
    y = ctx.emit("dense", [a, w] + ([c] if bias_fits else []))  # type: ignore[list-item]
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
        "Conv": convert_conv,
        "MaxPool": convert_max_pool,
        "AveragePool": convert_average_pool,
        "GlobalAveragePool": convert_global_average_pool,
        "BatchNormalization": convert_batch_norm,
        "LRN": convert_lrn,
        "LayerNormalization": convert_layer_norm,
        "Softmax": _normalize_along("softmax"),
        "LogSoftmax": _normalize_along("log_softmax"),
        "Hardmax": convert_hardmax,
        "Gemm": convert_gemm,
        "MatMul": convert_matmul,
    }

"""Converters of ONNX's linear quantization, QuantizeLinear, DequantizeLinear (opsets 10 to
25: per tensor, per axis and blocked scales, output_dtype, precision) and
DynamicQuantizeLinear, composed from float ops, as ONNX's reference defines them, and
MatMulInteger and ConvInteger:

    DequantizeLinear   y = (float32(x) - float32(zero_point)) * scale, in the scale's type
    QuantizeLinear     y = saturate(round_half_even(x / scale) + zero_point)
    DynamicQuantizeLinear  scale = (max(x, 0) - min(x, 0)) / 255 (1 / 255 when both are 0),
                       zero_point = round(clip(-min(x, 0) / scale, 0, 255)), then as above
    MatMulInteger, ConvInteger  int32(op(float64(a) - a_zero, float64(b) - b_zero)), exact
    QLinearMatMul, QLinearConv  saturate(round(that * float64(a_scale * b_scale / y_scale)
                       + y_zero)), as the reference (its int32 accumulator times a float
                       scale is a float64 product in numpy)

The integer types (uint8, int8, uint16, int16, and the 4- and 2-bit ones) round in the
division's type (x's and the scale's, or ``precision``), then add the zero point and clip in
float32 (float64 for a float64 input), where every integer of these types is exact, then
cast: the result is the reference's bit for bit. The 8-bit floats are x / scale cast with
``saturate`` (their zero point must be 0), float4e2m1 x / scale + zero point cast, as the
reference. A scale or zero point is broadcast along ``axis`` (a vector) or repeated
``block_size`` times along it (a tensor of x's rank); constants are reshaped at
import, computed ones by a reshape or a take.

These are the float-level definitions; the integer kernels that run quantized models without
float in their inner loops are the subject of issue 32.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType
from relaxc.ir.types import numpy_dtype

from .context import NodeContext, norm_axis, rank_of, shape_of
from .convert_cnn import convert_conv
from .convert_nn import convert_matmul
from .model import relax_dtype
from .values import Folded, Value

Converter = Callable[[NodeContext], list]

INTEGER_RANGES: dict[str, tuple[int, int]] = {
    "u8": (0, 255),
    "i8": (-128, 127),
    "u16": (0, 65535),
    "i16": (-32768, 32767),
    "u4": (0, 15),
    "i4": (-8, 7),
    "u2": (0, 3),
    "i2": (-2, 1),
}
FLOAT8 = ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz")
"""8-bit float targets: x / scale cast with saturate (their zero point is 0)."""
FLOAT4 = ("f4e2m1",)
"""4-bit float targets: x / scale + zero point, cast (no saturation: the type has no inf)."""
_FLOATS = ("f16", "bf16", "f32", "f64")


def _cast(ctx: NodeContext, v: Value, dtype: str) -> Value:
    return v if v.type.dtype == dtype else ctx.emit("cast", [v], {"dtype": DType(dtype)})


def _along_axis(ctx: NodeContext, v: Value, x: Value, axis: int, block: int, what: str) -> Value:
    """Scale or zero point ``v`` broadcastable against ``x``: a scalar as it is, a vector
    along ``axis``, a blocked tensor repeated ``block`` times along ``axis``."""
    shape = shape_of(v)
    rank = rank_of(x)
    if len(shape) == 0:
        return v
    if len(shape) == 1 and shape[0] == 1 and not block:
        return ctx.emit("reshape", [v], {"newshape": ()})
    if not block:
        if len(shape) != 1:
            raise ctx.fail(f"{what} has rank {len(shape)}; without block_size it must be a vector")
        dims: list[D.Dim] = [1] * rank
        dims[axis] = shape[0]
        return ctx.emit("reshape", [v], {"newshape": tuple(dims)})
    if len(shape) != rank:
        raise ctx.fail(f"{what} has rank {len(shape)}; a blocked one needs x's rank {rank}")
    length, blocks = shape_of(x)[axis], shape[axis]
    if not isinstance(length, int) or not isinstance(blocks, int):
        raise ctx.fail("blocked quantization needs the blocked axis's length at import")
    if not (blocks - 1) * block < length <= blocks * block:
        raise ctx.fail(f"{what}'s {blocks} blocks of {block} do not cover x's axis of {length}")
    idx = Folded(np.arange(length, dtype=np.int64) // block, f"{ctx.hint()}_blocks")
    return ctx.emit("take", [v, idx], {"axis": axis})


def _axis_and_block(ctx: NodeContext, x: Value) -> tuple[int, int]:
    rank = rank_of(x)
    block = int(ctx.attr("block_size", 0)) if ctx.opset >= 21 else 0
    if block < 0:
        raise ctx.fail(f"block_size {block} must be positive")
    axis = int(ctx.attr("axis", 1))
    if rank <= 1 and not -rank <= axis < max(rank, 1):  # the default axis 1 of a vector
        return 0, block
    return norm_axis(axis, rank, ctx), block


def convert_dequantize_linear(ctx: NodeContext) -> list:
    x, scale, zero = ctx.input(0, "x"), ctx.input(1, "x_scale"), ctx.optional(2)
    if scale.type.dtype not in _FLOATS:
        raise ctx.fail(f"its scale must be a float tensor, got {scale.type.dtype}")
    if x.type.dtype not in (*INTEGER_RANGES, "i32", *FLOAT8, *FLOAT4):
        raise ctx.fail(f"dequantizing {x.type.dtype} is not supported")
    if zero is not None and zero.type.dtype != x.type.dtype:
        raise ctx.fail(f"its zero point is {zero.type.dtype}, its input {x.type.dtype}")
    if x.type.dtype in FLOAT8:
        _require_zero(ctx, zero)
        zero = None  # an 8-bit float's zero point is 0 (checked when it is a constant)
    out_code = ctx.attr("output_dtype", 0) if ctx.opset >= 23 else 0
    out = relax_dtype(int(out_code), "its output_dtype") if out_code else scale.type.dtype
    axis, block = _axis_and_block(ctx, x)
    dx = _cast(ctx, x, "f32")
    if zero is not None:
        dx = ctx.emit(
            "subtract",
            [dx, _cast(ctx, _along_axis(ctx, zero, x, axis, block, "its zero point"), "f32")],
        )
    y = ctx.emit(
        "multiply", [dx, _cast(ctx, _along_axis(ctx, scale, x, axis, block, "its scale"), "f32")]
    )
    return [_cast(ctx, y, out)]


def _require_zero(ctx: NodeContext, zero: Value | None) -> None:
    """An 8-bit float's zero point must be 0 (ONNX's reference raises otherwise)."""
    if isinstance(zero, Folded) and np.any(zero.array.astype(np.float32) != 0):
        raise ctx.fail("the zero point of an 8-bit float type must be 0")


def _quantize(
    ctx: NodeContext, x: Value, scale: Value, zero: Value | None, target: str, wide: str
) -> Value:
    """saturate(round(x / scale) + zero) as ``target``, scale and zero broadcastable."""
    low, high = INTEGER_RANGES[target]
    q = ctx.emit("round", [ctx.emit("divide", [x, scale])])
    q = _cast(ctx, q, wide)
    if zero is not None:
        q = ctx.emit("add", [q, _cast(ctx, zero, wide)])
    q = ctx.emit("clip", [q], {"a_min": float(low), "a_max": float(high)})
    return _cast(ctx, q, target)


def convert_quantize_linear(ctx: NodeContext) -> list:
    x, scale, zero = ctx.input(0, "x"), ctx.input(1, "y_scale"), ctx.optional(2)
    if x.type.dtype not in _FLOATS or scale.type.dtype not in _FLOATS:
        raise ctx.fail(
            f"it quantizes a float tensor with a float scale, got {x.type.dtype} and "
            f"{scale.type.dtype}"
        )
    out_code = int(ctx.attr("output_dtype", 0)) if ctx.opset >= 21 else 0
    target = relax_dtype(out_code, "its output_dtype") if out_code else None
    if zero is not None:
        if target is not None and target != zero.type.dtype:
            raise ctx.fail(f"its output_dtype is {target}, its zero point {zero.type.dtype}")
        target = zero.type.dtype
    target = target or "u8"
    if target not in (*INTEGER_RANGES, *FLOAT8, *FLOAT4):
        raise ctx.fail(f"quantizing to {target} is not supported")
    precision = int(ctx.attr("precision", 0)) if ctx.opset >= 23 else 0
    axis, block = _axis_and_block(ctx, x)
    s = _along_axis(ctx, scale, x, axis, block, "its scale")
    z = None if zero is None else _along_axis(ctx, zero, x, axis, block, "its zero point")
    if precision:
        compute = relax_dtype(precision, "its precision")
        x, s = _cast(ctx, x, compute), _cast(ctx, s, compute)
    elif x.type.dtype != s.type.dtype:  # numpy's promotion of x / scale
        compute = str(np.result_type(numpy_dtype(x.type.dtype), numpy_dtype(s.type.dtype)))
        compute = {"float16": "f16", "float32": "f32", "float64": "f64"}.get(compute, "f32")
        x, s = _cast(ctx, x, compute), _cast(ctx, s, compute)
    if target in FLOAT8:
        _require_zero(ctx, z)
        saturate = bool(ctx.attr("saturate", 1)) if ctx.opset >= 19 else True
        q = ctx.emit("divide", [x, s])
        return [ctx.emit("cast", [q], {"dtype": DType(target), "saturate": saturate})]
    if target in FLOAT4:
        q = ctx.emit("divide", [x, s])
        if z is not None:
            q = ctx.emit("add", [q, _cast(ctx, z, q.type.dtype)])
        return [_cast(ctx, q, target)]
    wide = "f64" if x.type.dtype == "f64" else "f32"
    return [_quantize(ctx, x, s, z, target, wide)]


def convert_dynamic_quantize_linear(ctx: NodeContext) -> list:
    x = ctx.input(0)
    if x.type.dtype != "f32":
        raise ctx.fail(f"its input must be float32, got {x.type.dtype}")
    everything = {"axes": tuple(range(rank_of(x))), "keepdims": False}
    zero = Folded(np.zeros((), np.float32), f"{ctx.hint()}_zero")
    high = ctx.emit("maximum", [ctx.emit("max", [x], everything), zero])
    low = ctx.emit("minimum", [ctx.emit("min", [x], everything), zero])
    span = ctx.emit("subtract", [high, low])
    one = Folded(np.ones((), np.float32), f"{ctx.hint()}_one")
    span = ctx.emit("where", [ctx.emit("equal", [high, low]), one, span])
    levels = Folded(np.array(255.0, np.float32), f"{ctx.hint()}_levels")
    scale = ctx.emit("divide", [span, levels], k=1)
    start = ctx.emit("negative", [ctx.emit("divide", [low, scale])])
    zp = ctx.emit("round", [ctx.emit("clip", [start], {"a_min": 0.0, "a_max": 255.0})])
    y = _quantize(ctx, x, scale, zp, "u8", "f32")
    return [y, scale, _cast(ctx, zp, "u8")]


def _centred(ctx: NodeContext, v: Value, zero: Value | None, axis: int | None) -> Value:
    """float64(v) - float64(zero): exact for every 8-bit value; ``zero`` a scalar, or a
    vector along ``axis`` of ``v``."""
    if v.type.dtype not in ("u8", "i8"):
        raise ctx.fail(f"its operands must be uint8 or int8, got {v.type.dtype}")
    wide = _cast(ctx, v, "f64")
    if zero is None:
        return wide
    if zero.type.dtype != v.type.dtype:
        raise ctx.fail(f"a zero point is {zero.type.dtype}, its operand {v.type.dtype}")
    shape = shape_of(zero)
    if len(shape) > 1 or (len(shape) == 1 and shape[0] != 1 and axis is None):
        raise ctx.fail(f"a zero point of shape {tuple(shape)} is not supported here")
    z = _cast(ctx, zero, "f64")
    if len(shape) == 1:
        dims: list[D.Dim] = [1] * rank_of(v)
        if shape[0] != 1:
            assert axis is not None
            dims[axis % rank_of(v)] = shape[0]
        z = ctx.emit("reshape", [z], {"newshape": tuple(dims)})
    return ctx.emit("subtract", [wide, z])


def _integer_op(convert: Converter, zero_axes: tuple[int | None, int | None]) -> Converter:
    """MatMulInteger / ConvInteger: the float op on the operands less their zero points, in
    float64 (every product and sum of 8-bit values exact there), cast to int32."""

    def integer(ctx: NodeContext) -> list:
        a, b = ctx.input(0), ctx.input(1)
        centred = [
            _centred(ctx, a, ctx.optional(2), zero_axes[0]),
            _centred(ctx, b, ctx.optional(3), zero_axes[1]),
        ]
        inner = NodeContext(ctx.node, ctx.attrs, ctx.opset, ctx.builder, centred)
        return [_cast(ctx, y, "i32") for y in convert(inner)]

    return integer


def _requantized(
    ctx: NodeContext, acc: Value, factor: Value, zero: Value | None, target: str
) -> Value:
    """saturate(round(acc * factor + zero)) as ``target``: acc (float64, exact integers)
    times the float64 of the scale ratio, as ONNX's reference multiplies an int32
    accumulator by a float scale (numpy promotes the product to float64)."""
    y = ctx.emit("multiply", [acc, _cast(ctx, factor, "f64")])
    if zero is not None:
        y = ctx.emit("add", [y, _cast(ctx, zero, "f64")])
    low, high = INTEGER_RANGES[target]
    y = ctx.emit("clip", [ctx.emit("round", [y])], {"a_min": float(low), "a_max": float(high)})
    return _cast(ctx, y, target)


def _scale_ratio(ctx: NodeContext, a: Value, b: Value, y: Value) -> Value:
    """a * b / y, in the scales' own type (rounded at each step, as the reference)."""
    for s in (a, b, y):
        if s.type.dtype not in _FLOATS:
            raise ctx.fail(f"its scales must be float tensors, got {s.type.dtype}")
    return ctx.emit("divide", [ctx.emit("multiply", [a, b]), y])


def _vector_scale(ctx: NodeContext, v: Value, rank: int, axis: int) -> Value:
    """A scale or zero point of one value, or one per entry of ``axis`` of a rank-``rank``
    result, made broadcastable."""
    shape = shape_of(v)
    if len(shape) == 0:
        return v
    if len(shape) == 1 and shape[0] == 1:
        return ctx.emit("reshape", [v], {"newshape": ()})
    if len(shape) != 1:
        raise ctx.fail(f"a scale of shape {tuple(shape)} is not supported here")
    dims: list[D.Dim] = [1] * rank
    dims[axis % rank] = shape[0]
    return ctx.emit("reshape", [v], {"newshape": tuple(dims)})


def convert_qlinear_matmul(ctx: NodeContext) -> list:
    a, sa, za = ctx.input(0, "a"), ctx.input(1, "a_scale"), ctx.optional(2)
    b, sb, zb = ctx.input(3, "b"), ctx.input(4, "b_scale"), ctx.optional(5)
    sy, zy = ctx.input(6, "y_scale"), ctx.optional(7)
    target = a.type.dtype if zy is None else zy.type.dtype
    if target not in ("u8", "i8"):
        raise ctx.fail(f"its result must be uint8 or int8, got {target}")
    centred = [
        _centred(ctx, a, za, -2),
        _centred(ctx, b, None if zb is None else _vector_or_scalar(ctx, zb), -1),
    ]
    inner = NodeContext(ctx.node, ctx.attrs, ctx.opset, ctx.builder, centred)
    (acc,) = convert_matmul(inner)
    rank = rank_of(acc)
    ratio = _scale_ratio(
        ctx, _vector_scale(ctx, sa, rank, -2), _vector_scale(ctx, sb, rank, -1), sy
    )
    return [_requantized(ctx, acc, ratio, zy, target)]


def _vector_or_scalar(ctx: NodeContext, v: Value) -> Value:
    return v if rank_of(v) <= 1 else ctx.emit("reshape", [v], {"newshape": (-1,)})


def convert_qlinear_conv(ctx: NodeContext) -> list:
    x, sx, zx = ctx.input(0, "x"), ctx.input(1, "x_scale"), ctx.optional(2)
    w, sw, zw = ctx.input(3, "w"), ctx.input(4, "w_scale"), ctx.optional(5)
    sy, zy, bias = ctx.input(6, "y_scale"), ctx.optional(7), ctx.optional(8)
    target = x.type.dtype if zy is None else zy.type.dtype
    if target not in ("u8", "i8"):
        raise ctx.fail(f"its result must be uint8 or int8, got {target}")
    centred = [_centred(ctx, x, zx, None), _centred(ctx, w, zw, 0)]
    if bias is not None:
        if bias.type.dtype != "i32":
            raise ctx.fail(f"its bias must be int32, got {bias.type.dtype}")
        centred.append(_cast(ctx, bias, "f64"))
    inner = NodeContext(ctx.node, ctx.attrs, ctx.opset, ctx.builder, centred)
    (acc,) = convert_conv(inner)
    ratio = _scale_ratio(ctx, sx, _vector_scale(ctx, sw, rank_of(acc), 1), sy)
    return [_requantized(ctx, acc, ratio, zy, target)]


def table() -> dict[str, Converter]:
    return {
        "QLinearMatMul": convert_qlinear_matmul,
        "QLinearConv": convert_qlinear_conv,
        # a's zero point is per row (its axis -2), b's per column (-1); x's per tensor,
        # w's per output channel (axis 0)
        "MatMulInteger": _integer_op(convert_matmul, (-2, -1)),
        "ConvInteger": _integer_op(convert_conv, (None, 0)),
        "QuantizeLinear": convert_quantize_linear,
        "DequantizeLinear": convert_dequantize_linear,
        "DynamicQuantizeLinear": convert_dynamic_quantize_linear,
    }

"""Converters of small operators (issue 30): BitCast and Det (the IR's bitcast and det), and
Swish, SwiGLU, EyeLike, HannWindow, HammingWindow, BlackmanWindow, ReverseSequence and
MaxUnpool, composed from existing IR ops.

Swish is ``silu`` (alpha 1) or ``x * sigmoid(alpha * x)``; SwiGLU is Swish of its first
input times its second. EyeLike compares two aranges (a constant where the shape is
static). The windows are constants of their size, which must be known at import (it is
their output's length), computed in double with onnx's formulas in their order of operations
and rounded once to the output type.
ReverseSequence gathers along the time axis with the indices ``L - 1 - t`` for ``t < L``
(``t`` elsewhere), ``L`` the sequence length of each batch entry (clipped to the time axis's
length). MaxUnpool scatters the values into zeros of the unpooled size (indices into the
flattened tensor, as MaxPool gives them), then pads the end to ``output_shape``.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType
from relaxc.ir.types import DTYPES, numpy_dtype

from .context import NodeContext, norm_axis, rank_of, shape_of
from .model import relax_dtype
from .values import Folded, Value

Converter = Callable[[NodeContext], list]


def _scalar_const(ctx: NodeContext, value: float | int, dtype: str, what: str) -> Folded:
    return Folded(np.array(value, dtype=numpy_dtype(dtype)), f"{ctx.hint()}_{what}")


def _float_input(ctx: NodeContext, v: Value) -> None:
    if DTYPES[v.type.dtype].kind != "float":
        raise ctx.fail(f"needs a float tensor, got {v.type.dtype}")


# -- BitCast / Det ---------------------------------------------------------------------------


def convert_bit_cast(ctx: NodeContext) -> list:
    x = ctx.input(0)
    to = relax_dtype(int(ctx.attr("to", 0)), "the target of the BitCast")
    src = x.type.dtype
    if DTYPES[src].nbytes != DTYPES[to].nbytes:
        raise ctx.fail(
            f"{src} ({8 * DTYPES[src].nbytes} bits) and {to} ({8 * DTYPES[to].nbytes} bits) "
            "differ in width; BitCast needs one width"
        )
    if to == "bool" and src != "bool":
        raise ctx.fail(
            f"a BitCast of {src} to bool is refused: a byte other than 0 and 1 is no bool"
        )
    if to == src:
        return [x]
    return [ctx.emit("bitcast", [x], {"dtype": DType(to)})]


def convert_det(ctx: NodeContext) -> list:
    x = ctx.input(0)
    _float_input(ctx, x)
    shape = shape_of(x)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ctx.fail(f"needs square matrices in the last two axes, got shape {shape}")
    return [ctx.emit("det", [x])]


# -- Swish / SwiGLU --------------------------------------------------------------------------


def _swish(ctx: NodeContext, x: Value, alpha: float) -> Value:
    if alpha == 1.0:
        return ctx.emit("silu", [x])
    scaled = ctx.emit("multiply", [x, _scalar_const(ctx, alpha, x.type.dtype, "alpha")])
    return ctx.emit("multiply", [x, ctx.emit("sigmoid", [scaled])])


def convert_swish(ctx: NodeContext) -> list:
    x = ctx.input(0)
    _float_input(ctx, x)
    return [_swish(ctx, x, float(ctx.attr("alpha", 1.0)))]


def convert_swiglu(ctx: NodeContext) -> list:
    a, b = ctx.input(0), ctx.input(1)
    _float_input(ctx, a)
    if shape_of(a) != shape_of(b) or a.type.dtype != b.type.dtype:
        raise ctx.fail(
            f"its inputs must have one shape and type (no broadcasting), got {a.type} and {b.type}"
        )
    return [ctx.emit("multiply", [_swish(ctx, a, float(ctx.attr("alpha", 1.0))), b])]


# -- EyeLike ---------------------------------------------------------------------------------


def convert_eye_like(ctx: NodeContext) -> list:
    x = ctx.input(0)
    shape = shape_of(x)
    if len(shape) not in (1, 2):
        raise ctx.fail(f"needs a 1-D or 2-D input, got rank {len(shape)}")
    rows, cols = (shape[0], shape[0]) if len(shape) == 1 else shape
    dt = ctx.attr("dtype")
    dtype = x.type.dtype if dt is None else relax_dtype(int(dt), "the dtype of EyeLike")
    k = int(ctx.attr("k", 0))
    if D.is_static(rows) and D.is_static(cols):
        eye = np.eye(int(rows), int(cols), k=k, dtype=numpy_dtype(dtype))  # type: ignore[arg-type]
        return [Folded(np.ascontiguousarray(eye), ctx.hint())]
    i64 = DType("i64")
    r = ctx.emit("arange", [], {"start": 0, "delta": 1, "length": rows, "dtype": i64})
    c = ctx.emit("arange", [], {"start": -k, "delta": 1, "length": cols, "dtype": i64})
    r = ctx.emit("reshape", [r], {"newshape": (rows, 1)})
    on = ctx.emit("equal", [r, c])  # column - k == row
    return [ctx.emit("cast", [on], {"dtype": DType(dtype)})]


# -- HannWindow / HammingWindow / BlackmanWindow ---------------------------------------------

_HAMMING_ALPHA = 25.0 / 46.0


def _hann(n: np.ndarray, span: int) -> np.ndarray:
    return np.sin(n * math.pi / span) ** 2


def _hamming(n: np.ndarray, span: int) -> np.ndarray:
    return _HAMMING_ALPHA - np.cos(n * math.pi * 2 / span) * (1 - _HAMMING_ALPHA)


def _blackman(n: np.ndarray, span: int) -> np.ndarray:
    return np.cos(n * (math.pi * 2) / span) * -0.5 + np.cos(n * (math.pi * 4) / span) * 0.08 + 0.42


_WINDOWS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
    # onnx's formulas in its order of operations (N: the size if periodic, else size - 1)
    "HannWindow": _hann,  # sin(pi n / N) ** 2
    "HammingWindow": _hamming,  # 25/46 - 21/46 cos(2 pi n / N)
    "BlackmanWindow": _blackman,  # 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)
}


def convert_window(ctx: NodeContext) -> list:
    size_in = ctx.input(0, "size")
    if DTYPES[size_in.type.dtype].kind not in ("int", "uint"):
        raise ctx.fail(f"the size must be an integer, got {size_in.type.dtype}")
    arr = ctx.folded(size_in, "the size input (the output's length)")
    if arr.size != 1:
        raise ctx.fail(f"the size must be a single value, got shape {arr.shape}")
    size = int(arr.reshape(-1)[0])
    if size < 0:
        raise ctx.fail(f"the size must not be negative, got {size}")
    dtype = relax_dtype(int(ctx.attr("output_datatype", 1)), "the output_datatype")
    periodic = bool(ctx.attr("periodic", 1))
    span = size if periodic else size - 1
    n = np.arange(size, dtype=np.float64)
    with np.errstate(all="ignore"):  # the symmetric window of 1: 0 / 0, as the reference
        values = _WINDOWS[ctx.op_type](n, span)
    if DTYPES[dtype].kind not in ("float", "int", "uint"):
        raise ctx.fail(f"the output_datatype must be a number type, got {dtype}")
    if DTYPES[dtype].kind != "float" and size > 0 and not span:
        raise ctx.fail(f"the symmetric window of size 1 is 0 / 0, which {dtype} cannot hold")
    return [Folded(np.ascontiguousarray(values.astype(numpy_dtype(dtype))), ctx.hint())]


# -- ReverseSequence -------------------------------------------------------------------------


def convert_reverse_sequence(ctx: NodeContext) -> list:
    x, lens = ctx.input(0), ctx.input(1, "sequence_lens")
    rank = rank_of(x)
    if rank < 2:
        raise ctx.fail(f"needs an input of rank 2 or more, got rank {rank}")
    if lens.type.dtype not in ("i32", "i64") or len(shape_of(lens)) != 1:
        raise ctx.fail(f"sequence_lens must be a 1-D integer tensor, got {lens.type}")
    time = norm_axis(int(ctx.attr("time_axis", 0)), rank, ctx, "time_axis")
    batch = norm_axis(int(ctx.attr("batch_axis", 1)), rank, ctx, "batch_axis")
    if {time, batch} != {0, 1}:
        raise ctx.fail(f"time_axis and batch_axis must be 0 and 1, got {time} and {batch}")
    shape = shape_of(x)
    steps = shape[time]
    i64 = DType("i64")
    lens = ctx.emit("cast", [lens], {"dtype": i64}) if lens.type.dtype != "i64" else lens
    lens = ctx.emit(
        "reshape", [lens], {"newshape": (1, shape[batch]) if time == 0 else (shape[batch], 1)}
    )
    t = ctx.emit("arange", [], {"start": 0, "delta": 1, "length": steps, "dtype": i64})
    t = ctx.emit("reshape", [t], {"newshape": (steps, 1) if time == 0 else (1, steps)})
    if isinstance(steps, int):
        limit: Value = _scalar_const(ctx, steps, "i64", "steps")
    else:  # the symbolic length as a run-time scalar: a sum of as many ones
        ones = ctx.emit("full", [], {"shape": (steps,), "fill_value": 1.0, "dtype": i64})
        limit = ctx.emit("sum", [ones], {"axes": (0,)})
    lens = ctx.emit("minimum", [lens, limit])
    one = _scalar_const(ctx, 1, "i64", "one")
    back = ctx.emit("subtract", [ctx.emit("subtract", [lens, one]), t])
    idx = ctx.emit("where", [ctx.emit("less", [t, lens]), back, t])
    if rank > 2:
        idx = ctx.emit("reshape", [idx], {"newshape": tuple(idx.type.shape) + (1,) * (rank - 2)})
        ones = ctx.emit("full", [], {"shape": shape, "fill_value": 1.0, "dtype": i64})
        idx = ctx.emit("multiply", [idx, ones])
    return [ctx.emit("gather_elements", [x, idx], {"axis": time})]


# -- MaxUnpool -------------------------------------------------------------------------------


def convert_max_unpool(ctx: NodeContext) -> list:
    x, idx = ctx.input(0), ctx.input(1, "indices")
    rank = rank_of(x)
    if rank < 3:
        raise ctx.fail(f"needs an input of rank 3 or more (N, C, spatial...), got rank {rank}")
    shape = shape_of(x)
    if not all(D.is_static(d) for d in shape):
        raise ctx.fail(
            f"needs a static input shape, got ({', '.join(D.dim_to_str(d) for d in shape)})"
        )
    if shape_of(idx) != shape or idx.type.dtype != "i64":
        raise ctx.fail(f"the indices must be int64 of X's shape {shape}, got {idx.type}")
    spatial = rank - 2
    kernel = ctx.attr("kernel_shape")
    if kernel is None or len(kernel) != spatial:
        raise ctx.fail(f"needs kernel_shape of {spatial} values")
    strides = list(ctx.attr("strides") or [1] * spatial)
    pads = list(ctx.attr("pads") or [0] * (2 * spatial))
    if len(strides) != spatial or len(pads) != 2 * spatial:
        raise ctx.fail(f"strides must have {spatial} values and pads {2 * spatial}")
    dims = [int(d) for d in shape]  # type: ignore[arg-type]
    inferred = dims[:2] + [
        (dims[2 + i] - 1) * int(strides[i]) - (int(pads[i]) + int(pads[spatial + i])) + int(k)
        for i, k in enumerate(kernel)
    ]
    if any(d < 1 for d in inferred):
        raise ctx.fail(f"the unpooled shape {tuple(inferred)} has an empty axis")
    total = int(np.prod(inferred))
    zeros = ctx.emit("zeros", [], {"shape": (total,), "dtype": DType(x.type.dtype)})
    flat_i = ctx.emit("reshape", [idx], {"newshape": (-1,)})
    flat_x = ctx.emit("reshape", [x], {"newshape": (-1,)})
    y = ctx.emit("scatter_elements", [zeros, flat_i, flat_x], {"axis": 0, "reduction": "none"})
    y = ctx.emit("reshape", [y], {"newshape": tuple(inferred)})
    out_in = ctx.optional(2)
    if out_in is None:
        return [y]
    out = ctx.ints(out_in, "the output_shape input")
    assert out is not None
    if len(out) != rank:
        raise ctx.fail(f"output_shape must have {rank} values, got {out}")
    if out[:2] != inferred[:2] or any(o < d for o, d in zip(out, inferred)):
        raise ctx.fail(
            f"output_shape {tuple(out)} must keep N and C and be no smaller than the unpooled "
            f"shape {tuple(inferred)}"
        )
    extra = [o - d for o, d in zip(out, inferred)]
    if not any(extra):
        return [y]
    return [ctx.emit("pad", [y], {"pads": tuple([0] * rank + extra)})]


def table() -> dict[str, Converter]:
    return {
        "BitCast": convert_bit_cast,
        "Det": convert_det,
        "Swish": convert_swish,
        "SwiGLU": convert_swiglu,
        "EyeLike": convert_eye_like,
        "HannWindow": convert_window,
        "HammingWindow": convert_window,
        "BlackmanWindow": convert_window,
        "ReverseSequence": convert_reverse_sequence,
        "MaxUnpool": convert_max_unpool,
    }

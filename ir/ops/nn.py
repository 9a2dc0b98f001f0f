"""Neural-network ops: matmul, dense, conv2d, pooling, normalizations, softmax and lrn.

Layouts are NCHW for activations and OIHW for convolution weights. matmul, dense and conv2d
sum their products in float32 for f16 and f32 inputs (BLAS ``sgemm``, in its blocked order, as
onnxruntime does), in float64 for f64, and integers in 64 bits, wrapped to the input dtype;
the other float kernels compute in float64 and round once to the input dtype.

The kernels are the reference interpreter's and the VM's (so the two agree bit for bit),
and they are written for speed on real models: matmul, dense and conv2d are matrix
products numpy hands to BLAS (conv2d over im2col columns: :mod:`.conv`), pooling makes one
pass per window tap over one-dimensional runs of the input's phase planes
(:class:`.windows.TapRuns`; strided views for a window about as large as the input). Each
returns a fresh array (never a view of an input) and only reads its inputs.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, cast

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import AttrSpec, InferFn, OpDef, OpError, Registry
from relaxc.ir.types import TensorType, Type

from .checks import (
    product_dtype,
    as_contiguous,
    pad4,
    positive_pair,
    quiet_mean,
    require_dims_equal,
    require_float_math,
    require_numeric,
    require_rank,
    sstr,
    window_out,
)
from .common import broadcast_shapes, norm_axes, norm_axis, same_dtype, tensors
from .conv import conv2d, conv2d_into, conv2d_prepare, conv_params
from .windows import pool_taps

# -- matmul / dense ----------------------------------------------------------------------


def _infer_matmul(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    a, b = tensors(inputs, "matmul")
    dtype = same_dtype([a, b], "matmul")
    require_numeric(dtype, "matmul")
    for name, t in (("a", a), ("b", b)):
        if t.ndim < 2:
            raise OpError(
                f"matmul: operand {name} has rank {t.ndim}, both operands need rank >= 2 "
                f"(use expand_dims for a vector)"
            )
    require_dims_equal(
        a.shape[-1], b.shape[-2], "matmul", f"inner dimensions of {sstr(a.shape)} @ {sstr(b.shape)}"
    )
    batch = broadcast_shapes([a.shape[:-2], b.shape[:-2]], "matmul")
    return TensorType(batch + (a.shape[-2], b.shape[-1]), dtype)


def _matmul(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    a, b = xs
    acc = product_dtype(a.dtype)
    return as_contiguous(np.matmul(a.astype(acc, copy=False), b.astype(acc, copy=False)), a.dtype)


def _matmul_into(xs: Sequence[np.ndarray], attrs: Mapping[str, Any], out: np.ndarray) -> bool:
    """matmul written into ``out`` where the product dtype is the operands' (f32, f64)."""
    a, b = xs
    if product_dtype(a.dtype) != a.dtype or out.dtype != a.dtype:
        return False
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    if out.shape != shape or np.may_share_memory(out, a) or np.may_share_memory(out, b):
        return False
    np.matmul(a, b, out=out)
    return True


def _infer_dense(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    ts = tensors(inputs, "dense")
    x, w = ts[0], ts[1]
    dtype = same_dtype(ts, "dense")
    require_numeric(dtype, "dense")
    if x.ndim < 1:
        raise OpError("dense: x must have rank at least 1")
    require_rank(w, 2, "dense", "weight (N, K)")
    require_dims_equal(
        x.shape[-1], w.shape[1], "dense", f"K of x {sstr(x.shape)} and weight {sstr(w.shape)}"
    )
    if len(ts) == 3:
        require_rank(ts[2], 1, "dense", "bias")
        require_dims_equal(ts[2].shape[0], w.shape[0], "dense", "bias length and N")
    return TensorType(x.shape[:-1] + (w.shape[0],), dtype)


def _dense(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, w = xs[0], xs[1]
    acc = product_dtype(x.dtype)
    out = np.matmul(x.astype(acc, copy=False), w.astype(acc, copy=False).T)
    if len(xs) == 3:
        out = out + xs[2].astype(acc)
    return as_contiguous(out, x.dtype)


def _dense_into(xs: Sequence[np.ndarray], attrs: Mapping[str, Any], out: np.ndarray) -> bool:
    """dense written into ``out`` where the product dtype is the operands' (f32, f64)."""
    x, w = xs[0], xs[1]
    if product_dtype(x.dtype) != x.dtype or out.dtype != x.dtype:
        return False
    if out.shape != x.shape[:-1] + (w.shape[0],) or any(np.may_share_memory(out, v) for v in xs):
        return False
    np.matmul(x, w.T, out=out)
    if len(xs) == 3:
        np.add(out, xs[2], out=out)
    return True


# -- conv2d (kernels: conv.py) ----------------------------------------------------------


def _infer_conv2d(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    ts = tensors(inputs, "conv2d")
    x, w = ts[0], ts[1]
    dtype = same_dtype(ts, "conv2d")
    require_numeric(dtype, "conv2d")
    require_rank(x, 4, "conv2d", "data (NCHW)")
    require_rank(w, 4, "conv2d", "weight (OIHW)")
    (sh, sw), (pt, pl, pb, pr), (dh, dw), groups = conv_params(attrs)
    n, c, h, wd = x.shape
    o, i, kh, kw = w.shape
    require_dims_equal(
        c,
        D.mul(i, groups),
        "conv2d",
        f"input channels vs weight {sstr(w.shape)} in-channels * groups={groups}",
    )
    if isinstance(o, int) and o % groups:
        raise OpError(f"conv2d: {o} output channels are not divisible by groups={groups}")
    if len(ts) == 3:
        require_rank(ts[2], 1, "conv2d", "bias")
        require_dims_equal(ts[2].shape[0], o, "conv2d", "bias length and output channels")
    oh = window_out(h, pt, pb, kh, dh, sh, "conv2d", "height")
    ow = window_out(wd, pl, pr, kw, dw, sw, "conv2d", "width")
    return TensorType((n, o, oh, ow), dtype)


# -- pooling -----------------------------------------------------------------------------


Pair = tuple[int, int]


def _pool_params(
    op: str, attrs: Mapping[str, Any]
) -> tuple[Pair, Pair, tuple[int, int, int, int], Pair]:
    """(pool_size, strides, padding, dilation), checked."""
    pool = positive_pair(attrs["pool_size"], op, "pool_size")
    strides = positive_pair(attrs["strides"], op, "strides")
    padding = pad4(attrs["padding"], op)
    dilation = positive_pair(attrs["dilation"], op, "dilation")
    for axis, (k, d, lo, hi) in (
        ("height", (pool[0], dilation[0], padding[0], padding[2])),
        ("width", (pool[1], dilation[1], padding[1], padding[3])),
    ):
        extent = d * (k - 1) + 1
        if max(lo, hi) >= extent:
            raise OpError(
                f"{op}: {axis} padding {max(lo, hi)} is not smaller than the window "
                f"extent {extent}, a window would lie entirely in the padding"
            )
    return pool, strides, padding, dilation


def _pool_out(op: str, h: D.Dim, w: D.Dim, attrs: Mapping[str, Any]) -> tuple[D.Dim, D.Dim]:
    (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw) = _pool_params(op, attrs)
    ceil = attrs["ceil_mode"]
    return (
        window_out(h, pt, pb, kh, dh, sh, op, "height", ceil),
        window_out(w, pl, pr, kw, dw, sw, op, "width", ceil),
    )


def _pool_infer(op: str) -> InferFn:
    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        (x,) = tensors(inputs, op)
        if op == "max_pool2d":
            require_numeric(x.dtype, op)
        else:
            require_float_math(x.dtype, op)
        require_rank(x, 4, op, "data (NCHW)")
        n, c, h, w = x.shape
        oh, ow = _pool_out(op, h, w, attrs)
        return TensorType((n, c, oh, ow), x.dtype)

    return infer


def _pool_geometry(op: str, x: np.ndarray, attrs: Mapping[str, Any]) -> tuple[Any, ...]:
    """(pool_size, strides, dilation, (OH, OW), padding, padding with the extra bottom/right
    cells ceil_mode may need) of pooling ``x``."""
    (kh, kw), st, (pt, pl, pb, pr), dil = _pool_params(op, attrs)
    h, w = x.shape[2], x.shape[3]
    oh, ow = (int(cast(int, v)) for v in _pool_out(op, h, w, attrs))  # concrete: ints
    extra_h = max(0, (oh - 1) * st[0] + dil[0] * (kh - 1) + 1 - (h + pt + pb))
    extra_w = max(0, (ow - 1) * st[1] + dil[1] * (kw - 1) + 1 - (w + pl + pr))
    return (kh, kw), st, dil, (oh, ow), (pt, pl, pb, pr), (pt, pl, pb + extra_h, pr + extra_w)


def _max_pool2d(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """The running maximum, in tap order, of the window taps' strided views of the input
    padded with -inf (integers: their minimum)."""
    x = xs[0]
    out = _pool_geometry("max_pool2d", x, attrs)[3]
    res = np.empty(x.shape[:2] + out, dtype=x.dtype)
    _max_pool2d_into(xs, attrs, res)
    return res


def _max_pool2d_into(xs: Sequence[np.ndarray], attrs: Mapping[str, Any], res: np.ndarray) -> bool:
    x = xs[0]
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    k, st, dil, out, _, pads = _pool_geometry("max_pool2d", x, attrs)
    if res.shape != x.shape[:2] + out or res.dtype != x.dtype or np.may_share_memory(res, x):
        return False
    if x.shape[0] * x.shape[1] * out[0] * out[1] == 0:
        res.fill(fill)
        return True
    taps = pool_taps(x, pads, st, out, fill, x.dtype)
    buf, acc = taps.buffer(x.dtype)
    acc[...] = taps.tap(0, 0, dil)  # = maximum(fill, tap 0)
    for i in range(k[0]):
        for j in range(k[1]):
            if i or j:
                np.maximum(acc, taps.tap(i, j, dil), out=acc)
    res[...] = taps.rows(buf)
    return True


def _avg_pool2d(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    out = _pool_geometry("avg_pool2d", x, attrs)[3]
    res = np.empty(x.shape[:2] + out, dtype=x.dtype)
    _avg_pool2d_into(xs, attrs, res)
    return res


def _avg_pool2d_into(xs: Sequence[np.ndarray], attrs: Mapping[str, Any], res: np.ndarray) -> bool:
    """The float64 sum, in tap order, of the window taps of the input padded with zeros
    (widened to float64 by the padding copy, so every tap adds float64 to float64), divided
    by the number of cells each window counts, rounded once into ``res``."""
    x = xs[0]
    k, st, dil, out, (pt, pl, pb, pr), pads = _pool_geometry("avg_pool2d", x, attrs)
    if res.shape != x.shape[:2] + out or res.dtype != x.dtype or np.may_share_memory(res, x):
        return False
    h, w = x.shape[2], x.shape[3]
    if x.shape[0] * x.shape[1] * out[0] * out[1] == 0:
        res.fill(0)
        return True
    if attrs["count_include_pad"]:  # the counted cells: the input and its padding (not
        rows, cols = (0, pt + h + pb), (0, pl + w + pr)  # ceil_mode's extra cells) ...
    else:
        rows, cols = (pt, pt + h), (pl, pl + w)  # ... or the input alone
    count = np.multiply.outer(
        _counted_taps(out[0], k[0], st[0], dil[0], rows),
        _counted_taps(out[1], k[1], st[1], dil[1], cols),
    ).astype(np.float64)
    if out == (1, 1) and k == (h, w) and dil == (1, 1) and not any(pads):
        # One window over the whole input (a global pool): its taps in order are the input's
        # cells in order; as rows of a (taps, N * C) array, each tap is one contiguous add.
        cells = np.ascontiguousarray(x.reshape(-1, h * w).T, dtype=np.float64)
        total = np.add(cells[0], 0.0)  # 0 + tap 0, as a sum from 0
        for t in range(1, h * w):
            np.add(total, cells[t], out=total)
        with np.errstate(all="ignore"):
            np.divide(total.reshape(res.shape), count, out=res, casting="unsafe")
        return True
    taps = pool_taps(x, pads, st, out, 0, np.dtype(np.float64))
    buf, total = taps.buffer(np.dtype(np.float64))
    np.add(taps.tap(0, 0, dil), 0.0, out=total)  # 0 + tap 0, as a sum from 0
    for i in range(k[0]):
        for j in range(k[1]):
            if i or j:
                np.add(total, taps.tap(i, j, dil), out=total)
    with np.errstate(all="ignore"):  # divided in float64, rounded once into res
        np.divide(taps.rows(buf), np.maximum(count, 1.0), out=res, casting="unsafe")
    if not count.all():
        res[..., count == 0] = 0
    return True


def _counted_taps(n: int, k: int, stride: int, dilation: int, span: tuple[int, int]) -> np.ndarray:
    """For each of ``n`` windows along an axis of the padded input, how many of its ``k``
    taps fall in the cells [span[0], span[1]) (the counted cells are a rectangle: a window's
    count is the product of its counts along the two axes)."""
    pos = np.arange(n)[:, None] * stride + np.arange(k)[None, :] * dilation
    return ((pos >= span[0]) & (pos < span[1])).sum(axis=1)


def _infer_global_avg_pool2d(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "global_avg_pool2d")
    require_float_math(x.dtype, "global_avg_pool2d")
    require_rank(x, 4, "global_avg_pool2d", "data (NCHW)")
    return TensorType((x.shape[0], x.shape[1], 1, 1), x.dtype)


def _global_avg_pool2d(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    with np.errstate(all="ignore"):
        return as_contiguous(quiet_mean(x.astype(np.float64), (2, 3), True), x.dtype)


# -- normalizations ----------------------------------------------------------------------


def _infer_batch_norm(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    ts = tensors(inputs, "batch_norm")
    x = ts[0]
    dtype = same_dtype(ts, "batch_norm")
    require_float_math(dtype, "batch_norm")
    axis = norm_axis(attrs["axis"], x.ndim, "batch_norm")
    for name, t in zip(("gamma", "beta", "mean", "var"), ts[1:]):
        require_rank(t, 1, "batch_norm", name)
        require_dims_equal(
            t.shape[0], x.shape[axis], "batch_norm", f"length of {name} and axis {axis} of x"
        )
    return x


def _channel(v: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return v.astype(np.float64).reshape(shape)


def _batch_norm(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    out = np.empty(xs[0].shape, dtype=xs[0].dtype)
    _batch_norm_into(xs, attrs, out)
    return out


def _batch_norm_into(xs: Sequence[np.ndarray], attrs: Mapping[str, Any], out: np.ndarray) -> bool:
    x, gamma, beta, mean, var = xs
    if out.shape != x.shape or out.dtype != x.dtype:
        return False
    axis = norm_axis(attrs["axis"], x.ndim, "batch_norm")
    g, b, m, v = (_channel(t, x.ndim, axis) for t in (gamma, beta, mean, var))
    with np.errstate(all="ignore"):
        # (x - mean) / sqrt(var + eps) * gamma + beta as x * scale + shift, per channel in
        # float64: two passes over x instead of four (a few float64 ulps from the formula).
        # x is read whole before out is written: out may be x's storage (in place).
        scale = g / np.sqrt(v + attrs["epsilon"])
        shift = b - m * scale
        np.add(np.multiply(x, scale, dtype=np.float64), shift, out=out, casting="unsafe")
    return True


def _norm_infer(op: str, params: tuple[str, ...]) -> InferFn:
    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        ts = tensors(inputs, op)
        x = ts[0]
        dtype = same_dtype(ts, op)
        require_float_math(dtype, op)
        axes = norm_axes(attrs["axes"], x.ndim, op)
        want = tuple(x.shape[a] for a in axes)
        for name, t in zip(params, ts[1:]):
            if t.ndim != len(want) or not all(D.dims_equal(p, q) for p, q in zip(t.shape, want)):
                raise OpError(
                    f"{op}: {name} has shape {sstr(t.shape)}, expected {sstr(want)} (x's "
                    "normalized axes)"
                )
        return x

    return infer


def _param(v: np.ndarray, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    shape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    return v.astype(np.float64).reshape(shape)


def _layer_norm(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, gamma, beta = xs
    axes = norm_axes(attrs["axes"], x.ndim, "layer_norm")
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        mean = quiet_mean(x64, axes, True)
        var = quiet_mean((x64 - mean) ** 2, axes, True)
        y = (x64 - mean) / np.sqrt(var + attrs["epsilon"]) * _param(gamma, x, axes) + _param(
            beta, x, axes
        )
    return as_contiguous(y, x.dtype)


def _rms_norm(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, weight = xs
    axes = norm_axes(attrs["axes"], x.ndim, "rms_norm")
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        ms = quiet_mean(x64**2, axes, True)
        y = x64 / np.sqrt(ms + attrs["epsilon"]) * _param(weight, x, axes)
    return as_contiguous(y, x.dtype)


# -- softmax / lrn -----------------------------------------------------------------------


def _axis_float_infer(op: str) -> InferFn:
    """Inference for float ops along one axis that keep x's type (softmax, log_softmax,
    lrn)."""

    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        (x,) = tensors(inputs, op)
        require_float_math(x.dtype, op)
        if x.ndim == 0:
            raise OpError(f"{op}: input must have rank at least 1")
        norm_axis(attrs["axis"], x.ndim, op)
        return x

    return infer


def _infer_lrn(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    if attrs["size"] < 1:
        raise OpError(f"lrn: size must be positive, got {attrs['size']}")
    return _axis_float_infer("lrn")(inputs, attrs)


def _softmax(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    if x.size == 0:  # an axis of symbolic length 0 in this run: nothing to normalize
        return np.empty_like(x)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(x64 - np.max(x64, axis=attrs["axis"], keepdims=True))
        y = e / np.sum(e, axis=attrs["axis"], keepdims=True)
    return as_contiguous(y, x.dtype)


def _log_softmax(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """x - max - log(sum(exp(x - max))) along axis, in float64, rounded once."""
    x = xs[0]
    if x.size == 0:  # an axis of symbolic length 0 in this run: nothing to normalize
        return np.empty_like(x)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        shifted = x64 - np.max(x64, axis=attrs["axis"], keepdims=True)
        y = shifted - np.log(np.sum(np.exp(shifted), axis=attrs["axis"], keepdims=True))
    return as_contiguous(y, x.dtype)


def _lrn(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    size = attrs["size"]
    axis = norm_axis(attrs["axis"], x.ndim, "lrn")
    x64 = x.astype(np.float64)
    before = (size - 1) // 2
    widths = [(0, 0)] * x.ndim
    widths[axis] = (before, size - 1 - before)
    sq = np.pad(x64**2, widths)
    c = x.shape[axis]
    index = [slice(None)] * x.ndim
    square_sum = np.zeros_like(x64)
    for k in range(size):  # the window sum over channels, from 0 in window order
        index[axis] = slice(k, k + c)
        square_sum += sq[tuple(index)]
    with np.errstate(all="ignore"):  # x / (bias + alpha / size * square_sum) ** beta
        square_sum *= attrs["alpha"] / size
        square_sum += attrs["bias"]
        square_sum **= attrs["beta"]  # numpy's scalar powers, as ``a ** beta`` computes them
        x64 /= square_sum
    return as_contiguous(x64, x.dtype)


def _reg_pool(
    reg: Registry,
    name: str,
    summary: str,
    kernel: Any,
    extra: tuple[AttrSpec, ...] = (),
    float_only: bool = False,
    into: Any = None,
) -> None:
    reg.register(
        OpDef(
            name,
            summary,
            "kernel",
            _pool_infer(name),
            family="pooling",
            kernel=kernel,
            kernel_into=into,
            input_names=("data",),
            float_only=float_only,
            attrs=(
                AttrSpec("pool_size", "ints", doc="window (kh, kw) or one int for both"),
                AttrSpec("strides", "ints", (1, 1), "(sh, sw) or one int"),
                AttrSpec(
                    "padding", "pad", (0, 0, 0, 0), "all / (h, w) / (top, left, bottom, right)"
                ),
                AttrSpec("dilation", "ints", (1, 1), "(dh, dw) or one int"),
                AttrSpec("ceil_mode", "bool", False, "round the output size up (PyTorch rule)"),
                *extra,
            ),
        )
    )


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "matmul",
            "batched a @ b, numpy semantics (batch dims broadcast; both ranks >= 2)",
            "kernel",
            _infer_matmul,
            family="matmul",
            min_inputs=2,
            max_inputs=2,
            kernel=_matmul,
            kernel_into=_matmul_into,
            input_names=("a", "b"),
        )
    )
    reg.register(
        OpDef(
            "dense",
            "x @ w.T (+ bias): x (..., K), w (N, K) -> (..., N)",
            "kernel",
            _infer_dense,
            family="matmul",
            min_inputs=2,
            max_inputs=3,
            kernel=_dense,
            kernel_into=_dense_into,
            input_names=("x", "weight", "bias"),
        )
    )
    reg.register(
        OpDef(
            "conv2d",
            "2-D convolution, NCHW data and OIHW weight (+ bias (O,))",
            "kernel",
            _infer_conv2d,
            family="matmul",
            min_inputs=2,
            max_inputs=3,
            kernel=conv2d,
            kernel_into=conv2d_into,
            prepare_into=conv2d_prepare,
            input_names=("data", "weight", "bias"),
            attrs=(
                AttrSpec("strides", "ints", (1, 1), "(sh, sw) or one int"),
                AttrSpec(
                    "padding", "pad", (0, 0, 0, 0), "all / (h, w) / (top, left, bottom, right)"
                ),
                AttrSpec("dilation", "ints", (1, 1), "(dh, dw) or one int"),
                AttrSpec("groups", "int", 1, "channel groups (C = I * groups)"),
            ),
        )
    )
    _reg_pool(
        reg,
        "max_pool2d",
        "2-D max pooling over NCHW (padding is -inf)",
        _max_pool2d,
        into=_max_pool2d_into,
    )
    _reg_pool(
        reg,
        "avg_pool2d",
        "2-D average pooling over NCHW",
        _avg_pool2d,
        (AttrSpec("count_include_pad", "bool", False, "count padding cells in the divisor"),),
        float_only=True,
        into=_avg_pool2d_into,
    )
    reg.register(
        OpDef(
            "global_avg_pool2d",
            "mean over H and W: (N, C, H, W) -> (N, C, 1, 1)",
            "kernel",
            _infer_global_avg_pool2d,
            family="pooling",
            kernel=_global_avg_pool2d,
            input_names=("data",),
            float_only=True,
        )
    )
    reg.register(
        OpDef(
            "batch_norm",
            "inference batch norm: (x - mean) / sqrt(var + eps) * gamma + beta",
            "kernel",
            _infer_batch_norm,
            family="normalization",
            min_inputs=5,
            max_inputs=5,
            kernel=_batch_norm,
            kernel_into=_batch_norm_into,
            input_names=("x", "gamma", "beta", "mean", "var"),
            inplace=(0, 1, 2, 3, 4),
            float_only=True,
            attrs=(
                AttrSpec("axis", "int", 1, "the channel axis"),
                AttrSpec("epsilon", "float", 1e-5, "added to var"),
            ),
        )
    )
    reg.register(
        OpDef(
            "layer_norm",
            "normalize over axes to zero mean, unit variance, then * gamma + beta",
            "kernel",
            _norm_infer("layer_norm", ("gamma", "beta")),
            family="normalization",
            min_inputs=3,
            max_inputs=3,
            kernel=_layer_norm,
            input_names=("x", "gamma", "beta"),
            inplace=(0, 1, 2),
            float_only=True,
            attrs=(
                AttrSpec(
                    "axes", "axes", (-1,), "normalized axes (gamma's shape is x's dims there)"
                ),
                AttrSpec("epsilon", "float", 1e-5, "added to the variance"),
            ),
        )
    )
    reg.register(
        OpDef(
            "rms_norm",
            "x / sqrt(mean(x ** 2 over axes) + eps) * weight",
            "kernel",
            _norm_infer("rms_norm", ("weight",)),
            family="normalization",
            min_inputs=2,
            max_inputs=2,
            kernel=_rms_norm,
            input_names=("x", "weight"),
            inplace=(0, 1),
            float_only=True,
            attrs=(
                AttrSpec(
                    "axes", "axes", (-1,), "normalized axes (weight's shape is x's dims there)"
                ),
                AttrSpec("epsilon", "float", 1e-5, "added to the mean square"),
            ),
        )
    )
    reg.register(
        OpDef(
            "softmax",
            "exp(x) / sum(exp(x)) along axis",
            "kernel",
            _axis_float_infer("softmax"),
            family="normalization",
            kernel=_softmax,
            input_names=("x",),
            inplace=(0,),
            float_only=True,
            attrs=(AttrSpec("axis", "int", -1, "the normalized axis"),),
        )
    )
    reg.register(
        OpDef(
            "log_softmax",
            "x - max(x) - log(sum(exp(x - max(x)))) along axis",
            "kernel",
            _axis_float_infer("log_softmax"),
            family="normalization",
            kernel=_log_softmax,
            input_names=("x",),
            inplace=(0,),
            float_only=True,
            attrs=(AttrSpec("axis", "int", -1, "the normalized axis"),),
        )
    )
    reg.register(
        OpDef(
            "lrn",
            "local response norm: x / (bias + alpha/size * sum of x**2 over size channels) ** beta",
            "kernel",
            _infer_lrn,
            family="normalization",
            kernel=_lrn,
            input_names=("x",),
            float_only=True,
            attrs=(
                AttrSpec("size", "int", 5, "channels in the window (centered)"),
                AttrSpec("axis", "int", 1, "the channel axis"),
                AttrSpec("bias", "float", 1.0),
                AttrSpec("alpha", "float", 1e-4),
                AttrSpec("beta", "float", 0.75),
            ),
        )
    )


__all__ = ["register_all"]

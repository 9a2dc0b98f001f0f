"""The nn kernels as they were before they went through im2col, BLAS and strided views:
straightforward loops over kernel taps (and np.pad, np.take, fresh temporaries), kept as the
reference the fast kernels of ``relaxc.ir.ops.nn`` are tested against
(tests/ir/test_fast_kernels.py) and as the "before" of ``benchmarks/vm_zoo.py``.

Same signatures as the registry's kernels (``kernel(inputs, attrs)``), same attribute
checks (the op's own parameter helpers).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir.ops.checks import accumulate_dtype, as_contiguous, window_out
from relaxc.ir.ops.common import norm_axis
from relaxc.ir.ops.conv import conv_params as _conv_params
from relaxc.ir.ops.nn import _pool_out, _pool_params


def _patches(
    xp: np.ndarray, i: int, j: int, dil: tuple[int, int], st: tuple[int, int], out: tuple[int, int]
) -> np.ndarray:
    """The (..., OH, OW) input values kernel position (i, j) meets, from padded ``xp``."""
    hi, wi = i * dil[0], j * dil[1]
    return xp[
        ..., hi : hi + st[0] * (out[0] - 1) + 1 : st[0], wi : wi + st[1] * (out[1] - 1) + 1 : st[1]
    ]


def conv2d(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, w = xs[0], xs[1]
    strides, (pt, pl, pb, pr), dilation, g = _conv_params(attrs)
    acc = accumulate_dtype(x.dtype)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = int(window_out(h, pt, pb, kh, dilation[0], strides[0], "conv2d", "height"))
    ow = int(window_out(wd, pl, pr, kw, dilation[1], strides[1], "conv2d", "width"))
    xp = np.pad(x.astype(acc), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    xg = xp.reshape(n, g, cg, xp.shape[2], xp.shape[3])
    wg = w.astype(acc).reshape(g, o // g, cg, kh, kw)
    out = np.zeros((n, g, o // g, oh, ow), dtype=acc)
    for i in range(kh):
        for j in range(kw):
            patch = _patches(xg, i, j, dilation, strides, (oh, ow))
            out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j])
    res = out.reshape(n, o, oh, ow)
    if len(xs) == 3:
        res = res + xs[2].astype(acc).reshape(1, o, 1, 1)
    return as_contiguous(res, x.dtype)


def _pool_padded(op: str, x: np.ndarray, attrs: Mapping[str, Any], fill: Any):
    (kh, kw), st, (pt, pl, pb, pr), dil = _pool_params(op, attrs)
    h, w = x.shape[2], x.shape[3]
    oh, ow = (int(v) for v in _pool_out(op, h, w, attrs))
    extra_h = max(0, (oh - 1) * st[0] + dil[0] * (kh - 1) + 1 - (h + pt + pb))
    extra_w = max(0, (ow - 1) * st[1] + dil[1] * (kw - 1) + 1 - (w + pl + pr))
    widths = ((0, 0), (0, 0), (pt, pb + extra_h), (pl, pr + extra_w))
    xp = np.pad(x, widths, constant_values=fill)
    return xp, (kh, kw), st, dil, (oh, ow), (pt, pl, pb, pr)


def max_pool2d(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp, (kh, kw), st, dil, out, _ = _pool_padded("max_pool2d", x, attrs, fill)
    res = np.full(x.shape[:2] + out, fill, dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            res = np.maximum(res, _patches(xp, i, j, dil, st, out))
    return as_contiguous(res, x.dtype)


def avg_pool2d(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    xp, (kh, kw), st, dil, out, (pt, pl, pb, pr) = _pool_padded(
        "avg_pool2d", x.astype(np.float64), attrs, 0.0
    )
    h, w = x.shape[2], x.shape[3]
    counted = np.zeros(xp.shape[2:], dtype=np.float64)
    if attrs["count_include_pad"]:
        counted[: pt + h + pb, : pl + w + pr] = 1.0
    else:
        counted[pt : pt + h, pl : pl + w] = 1.0
    total = np.zeros(x.shape[:2] + out, dtype=np.float64)
    count = np.zeros(out, dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            total += _patches(xp, i, j, dil, st, out)
            count += _patches(counted, i, j, dil, st, out)
    with np.errstate(all="ignore"):
        res = np.where(count > 0, total / np.maximum(count, 1.0), 0.0)
    return as_contiguous(res, x.dtype)


def _channel(v: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return v.astype(np.float64).reshape(shape)


def batch_norm(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, gamma, beta, mean, var = xs
    axis = norm_axis(attrs["axis"], x.ndim, "batch_norm")
    g, b, m, v = (_channel(t, x.ndim, axis) for t in (gamma, beta, mean, var))
    with np.errstate(all="ignore"):
        y = (x.astype(np.float64) - m) / np.sqrt(v + attrs["epsilon"]) * g + b
    return as_contiguous(y, x.dtype)


def lrn(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    size = attrs["size"]
    axis = norm_axis(attrs["axis"], x.ndim, "lrn")
    x64 = x.astype(np.float64)
    before = (size - 1) // 2
    widths = [(0, 0)] * x.ndim
    widths[axis] = (before, size - 1 - before)
    sq = np.pad(x64**2, widths)
    c = x.shape[axis]
    square_sum = sum(np.take(sq, np.arange(k, k + c), axis=axis) for k in range(size))
    with np.errstate(all="ignore"):
        y = x64 / (attrs["bias"] + attrs["alpha"] / size * square_sum) ** attrs["beta"]
    return as_contiguous(y, x.dtype)


KERNELS = {
    "conv2d": conv2d,
    "max_pool2d": max_pool2d,
    "avg_pool2d": avg_pool2d,
    "batch_norm": batch_norm,
    "lrn": lrn,
}
"""op name -> the kernel it had before (the "before" of benchmarks/vm_zoo.py)."""

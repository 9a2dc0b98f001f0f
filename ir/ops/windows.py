"""Sliding windows over NCHW arrays, for the conv2d and pooling kernels: padding, the strided
views of the window taps, and the output length of a window in plain integers (the kernels
see concrete shapes; :func:`relaxc.ir.ops.checks.window_out` is the symbolic form, used for
inference and for its error messages)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .checks import window_out

Pair = tuple[int, int]
Pads = tuple[int, int, int, int]


def window_len(
    size: int, before: int, after: int, k: int, dilation: int, stride: int, op: str, axis: str
) -> int:
    """How many windows of ``k`` taps (``dilation`` apart) fit in ``size`` padded with
    ``before`` and ``after`` cells, one every ``stride`` (no ceil mode): ``window_out`` on
    integers (which raises its OpError, naming ``op`` and ``axis``, when not even one fits)."""
    span = size + before + after - dilation * (k - 1) - 1
    if span < 0:
        window_out(size, before, after, k, dilation, stride, op, axis)  # raises
    return span // stride + 1


def padded(x: np.ndarray, pads: Pads, fill: Any = 0, dtype: np.dtype | None = None) -> np.ndarray:
    """``x`` (NCHW) with ``pads`` (top, left, bottom, right) cells of ``fill`` around H and W,
    as a C-contiguous array of ``dtype`` (default: ``x``'s; the copy converts on the way);
    ``x`` itself when there is nothing to pad or convert (callers only read it)."""
    dt = x.dtype if dtype is None else np.dtype(dtype)
    pt, pl, pb, pr = pads
    if not (pt or pl or pb or pr):
        return x if dt == x.dtype else x.astype(dt)
    n, c, h, w = x.shape
    if fill == 0:
        xp = np.zeros((n, c, h + pt + pb, w + pl + pr), dtype=dt)
    else:
        xp = np.full((n, c, h + pt + pb, w + pl + pr), fill, dtype=dt)
    xp[:, :, pt : pt + h, pl : pl + w] = x
    return xp


def tap_windows(xp: np.ndarray, groups: int, k: Pair, dil: Pair, st: Pair, out: Pair) -> np.ndarray:
    """The read-only strided view (N, G, C/G, KH, KW, OH, OW) of padded ``xp`` (N, C, H, W):
    element [n, g, c, i, j, y, x] is the input kernel tap (i, j) of channel g*C/G + c meets at
    output (y, x). Nothing is copied."""
    n, c = xp.shape[0], xp.shape[1]
    s0, s1, s2, s3 = xp.strides
    return np.lib.stride_tricks.as_strided(
        xp,
        (n, groups, c // groups, k[0], k[1], out[0], out[1]),
        (s0, s1 * (c // groups), s1, s2 * dil[0], s3 * dil[1], s2 * st[0], s3 * st[1]),
        writeable=False,
    )


def tap_runs(xp: np.ndarray, groups: int, k: Pair, dil: Pair, run: int) -> np.ndarray:
    """For a unit-stride window over C-contiguous ``xp`` (N, C, Hp, Wp): the read-only view
    (N, G, C/G, KH, KW, run) of, per channel and tap, ``run`` consecutive cells of the
    flattened padded rows from the tap's first cell: output (y, x) is cell y * Wp + x of a
    run (the "row-padded" layout; the Wp - OW cells past each row's end are computed and
    dropped). Nothing is copied."""
    n, c = xp.shape[0], xp.shape[1]
    s0, s1, s2, s3 = xp.strides
    return np.lib.stride_tricks.as_strided(
        xp,
        (n, groups, c // groups, k[0], k[1], run),
        (s0, s1 * (c // groups), s1, s2 * dil[0], s3 * dil[1], s3),
        writeable=False,
    )


__all__ = ["Pads", "Pair", "padded", "tap_runs", "tap_windows", "window_len"]

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


class TapRuns:
    """The input of a pooling window as one contiguous run per tap, over its phase planes.

    A window with strides (SH, SW) reads padded cell (y * SH + i * DH, x * SW + j * DW) at
    output (y, x) and tap (i, j): the cell (y + qi, x + qj) of phase plane (a, b), where
    (qi, a) = divmod(i * DH, SH) and (qj, b) = divmod(j * DW, SW), and plane (a, b) holds the
    padded cells (r * SH + a, s * SW + b) (unit strides: one plane, the padded input). The
    planes are stored phase-major, (SH, SW, N, C, HQ, WQ): a tap is one run of consecutive
    cells of its plane, from (qi, qj) of the first channel to the last output of the last,
    and output (y, x) of channel m is cell (m * HQ + y) * WQ + x of the run. Sums and maxima
    over the runs are then one-dimensional loops (numpy's ufuncs pay per row of a strided
    view, which the N * C * OH rows of OW cells of the window views made dear); the cells
    between outputs are computed and dropped (:meth:`rows`).
    """

    def __init__(
        self, x: np.ndarray, pads: Pads, strides: Pair, out: Pair, fill: Any, dtype: np.dtype
    ):
        n, c, h, w = x.shape
        pt, pl, pb, pr = pads
        sh, sw = strides
        self.strides = strides
        self.shape = (n, c, -(-(h + pt + pb) // sh), -(-(w + pl + pr) // sw))  # N, C, HQ, WQ
        self.out = out
        hq, wq = self.shape[2], self.shape[3]
        self.length = (n * c - 1) * hq * wq + (out[0] - 1) * wq + out[1]
        planes = np.full((sh, sw, n, c, hq, wq), fill, dtype=dtype)
        for a in range(sh):
            r0 = -((a - pt) // sh)  # the first plane row inside the input: r0 * SH + a >= pt
            y0 = r0 * sh + a - pt
            rows = len(range(y0, h, sh))
            for b in range(sw):
                c0 = -((b - pl) // sw)
                x0 = c0 * sw + b - pl
                cols = len(range(x0, w, sw))
                planes[a, b, :, :, r0 : r0 + rows, c0 : c0 + cols] = x[:, :, y0::sh, x0::sw]
        self.flat = planes.reshape(sh, sw, -1)

    def tap(self, i: int, j: int, dilation: Pair) -> np.ndarray:
        """The run of cells tap (i, j) reads (a one-dimensional view)."""
        qi, a = divmod(i * dilation[0], self.strides[0])
        qj, b = divmod(j * dilation[1], self.strides[1])
        start = qi * self.shape[3] + qj
        return self.flat[a, b, start : start + self.length]

    def buffer(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """A fresh array for results in the runs' layout, and its part the runs fill."""
        buf = np.empty(self.shape, dtype=dtype)
        return buf, buf.reshape(-1)[: self.length]

    def rows(self, buf: np.ndarray) -> np.ndarray:
        """The (N, C, OH, OW) results of a :meth:`buffer` (a view)."""
        return buf[:, :, : self.out[0], : self.out[1]]


class WindowTaps:
    """The input of a pooling window as the window taps' strided views of the padded input
    (N, C, OH, OW each): no cell computed but the outputs, at the price of N * C * OH rows
    per tap. The same interface as :class:`TapRuns`."""

    def __init__(
        self, x: np.ndarray, pads: Pads, strides: Pair, out: Pair, fill: Any, dtype: np.dtype
    ):
        self.xp = padded(x, pads, fill, dtype)
        self.strides = strides
        self.out = out

    def tap(self, i: int, j: int, dilation: Pair) -> np.ndarray:
        y, x = i * dilation[0], j * dilation[1]
        (sh, sw), (oh, ow) = self.strides, self.out
        return self.xp[:, :, y : y + sh * (oh - 1) + 1 : sh, x : x + sw * (ow - 1) + 1 : sw]

    def buffer(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        buf = np.empty(self.xp.shape[:2] + self.out, dtype=dtype)
        return buf, buf

    def rows(self, buf: np.ndarray) -> np.ndarray:
        return buf


def pool_taps(
    x: np.ndarray, pads: Pads, strides: Pair, out: Pair, fill: Any, dtype: np.dtype
) -> TapRuns | WindowTaps:
    """The taps of a pooling window over ``x`` padded with ``fill``, in ``dtype``: as runs
    (:class:`TapRuns`) unless they would compute more than twice the outputs (a window
    about as large as the input: a global pool), else as strided views."""
    n, c, h, w = x.shape
    sh, sw = strides
    cells = -(-(h + pads[0] + pads[2]) // sh) * -(-(w + pads[1] + pads[3]) // sw)
    if cells <= 2 * out[0] * out[1]:
        return TapRuns(x, pads, strides, out, fill, dtype)
    return WindowTaps(x, pads, strides, out, fill, dtype)


__all__ = [
    "Pads",
    "Pair",
    "TapRuns",
    "WindowTaps",
    "padded",
    "pool_taps",
    "tap_runs",
    "tap_windows",
    "window_len",
]

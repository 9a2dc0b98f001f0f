"""conv2d's numpy kernels: im2col columns and BLAS matrix products, one per group.

The columns (N, G, C/G*KH*KW, positions) are copied from a strided view of the input, padded
(and widened to the product dtype: float32 for f16/f32, float64, int64/uint64) in one copy
first. Five ways to the sums, chosen from the geometry (:class:`ConvGeometry`, derived once per
call in plain integers):

* ``direct``: a 1x1 convolution with unit strides and no padding multiplies the input
  itself (no copy);
* ``rows``: a unit-stride convolution whose output is as wide as its input ("same"
  horizontal padding: the window's width less one) pads with zero rows only and copies,
  per channel and tap, one run of OH * W cells of the flattened rows (a run wraps around
  a row's end where the tap reads the horizontal padding: those column cells are set to
  zero); the products land in the output as they are;
* ``runs``: any other unit-stride convolution whose padded rows are at most a third wider
  than its output rows copies, per channel and tap, one contiguous run of the flattened padded rows
  (OH * Wp - (Wp - OW) positions; the products past a row's end are computed and dropped
  when the rows are copied out);
* ``windows``: any other copies the strided view of the window taps (runs of OW);
* ``taps``: a unit-stride convolution of many input channels into few (C/G >= 64 and at
  least twice O/G, as densenet's 3x3 bottleneck outputs) over long runs makes no columns:
  per tap, one product of the tap's (O/G, C/G) weights with the runs of the padded input
  themselves (a strided view BLAS reads in place), added to the sum in tap order. The
  columns would copy 9 * C/G values per position where the sums add 8 * O/G.

Each group's (O/G, C/G*KH*KW) weight matrix multiplies its columns in one batched
``np.matmul`` (a depthwise convolution makes one small product per channel: at these sizes
still cheaper in numpy than summing its taps over strided views, whose short rows cost more
than BLAS's calls). Sums are in BLAS's (blocked) order in the product dtype, the bias added
to them there, then rounded once to the input dtype.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from relaxc.ir.registry import OpError, PreparedIntoFn

from .checks import as_contiguous, pad4, positive_pair, product_dtype
from .windows import Pads, Pair, padded, tap_runs, tap_windows, window_len


def conv_params(attrs: Mapping[str, Any]) -> tuple[Pair, Pads, Pair, int]:
    """(strides, padding (top, left, bottom, right), dilation, groups), checked."""
    strides = positive_pair(attrs["strides"], "conv2d", "strides")
    padding = pad4(attrs["padding"], "conv2d")
    dilation = positive_pair(attrs["dilation"], "conv2d", "dilation")
    groups = attrs["groups"]
    if groups < 1:
        raise OpError(f"conv2d: groups must be positive, got {groups}")
    return strides, padding, dilation, groups


class ConvGeometry(NamedTuple):
    """The sizes of one conv2d of data (N, C, H, W) and weight (O, C/G, KH, KW) (a named
    tuple: made on every call, it must be cheap)."""

    n: int
    o: int
    cg: int
    kh: int
    kw: int
    oh: int
    ow: int
    hp: int
    wp: int
    """the padded input's height and width"""
    strides: Pair
    pads: Pads
    dilation: Pair
    groups: int

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The result's shape (N, O, OH, OW)."""
        return (self.n, self.o, self.oh, self.ow)

    @property
    def k(self) -> int:
        """The number of products in each sum (C/G * KH * KW)."""
        return self.cg * self.kh * self.kw

    @property
    def empty(self) -> bool:
        """Nothing to compute: no output element, or sums of no products."""
        return self.n * self.o * self.oh * self.ow == 0 or self.k == 0

    @property
    def path(self) -> str:
        """How the sums are made: ``direct``, ``rows``, ``runs``, ``taps`` or ``windows``
        (module docstring)."""
        if self.kh == self.kw == 1 and self.strides == (1, 1) and not any(self.pads):
            return "direct"
        if self.strides != (1, 1) or self.kh * self.kw == 1:
            return "windows"
        og = self.o // self.groups
        wide = 3 * self.wp <= 4 * self.ow
        if wide and self.cg >= max(64, 2 * og) and (self.oh - 1) * self.wp + self.ow >= 512:
            return "taps"
        if self.wp - self.ow == self.pads[1] + self.pads[3]:  # as wide as its input
            return "rows"
        return "runs" if wide else "windows"


def conv_geometry(
    xshape: tuple[int, ...], wshape: tuple[int, ...], attrs: Mapping[str, Any]
) -> ConvGeometry:
    strides, pads, dilation, groups = conv_params(attrs)
    n, _, h, w = xshape
    o, cg, kh, kw = wshape
    oh = window_len(h, pads[0], pads[2], kh, dilation[0], strides[0], "conv2d", "height")
    ow = window_len(w, pads[1], pads[3], kw, dilation[1], strides[1], "conv2d", "width")
    hp, wp = h + pads[0] + pads[2], w + pads[1] + pads[3]
    return ConvGeometry(n, o, cg, kh, kw, oh, ow, hp, wp, strides, pads, dilation, groups)


def conv2d(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """The convolution (+ bias) summed in the product dtype, rounded once to the input's."""
    x, w = xs[0], xs[1]
    acc = product_dtype(x.dtype)
    g = conv_geometry(x.shape, w.shape, attrs)
    sums = np.empty(g.shape, dtype=acc)
    if acc == x.dtype:
        _write_sums(g, xs, sums)
        return sums
    conv_sums(x, w, xs[2] if len(xs) == 3 else None, g, sums)
    return as_contiguous(sums, x.dtype)


def conv2d_prepare(
    shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype], attrs: Mapping[str, Any]
) -> PreparedIntoFn | None:
    """conv2d written into a separate ``out`` of the result's shape, for inputs of these
    shapes and dtypes (the geometry derived once), where the product dtype is the input's
    (else None: :func:`conv2d` computes and rounds the sums)."""
    if product_dtype(dtypes[0]) != dtypes[0]:
        return None
    g = conv_geometry(shapes[0], shapes[1], attrs)
    dt = np.dtype(dtypes[0])

    def into(xs: Sequence[np.ndarray], out: np.ndarray) -> bool:
        if out.dtype != dt or out.shape != g.shape:
            return False
        if any(np.may_share_memory(out, v) for v in xs):
            return False
        _write_sums(g, xs, out)
        return True

    return into


def conv2d_into(xs: Sequence[np.ndarray], attrs: Mapping[str, Any], out: np.ndarray) -> bool:
    """:func:`conv2d_prepare` for ``xs``, run on them."""
    into = conv2d_prepare([x.shape for x in xs], [x.dtype for x in xs], attrs)
    return into is not None and into(xs, out)


def _write_sums(g: ConvGeometry, xs: Sequence[np.ndarray], out: np.ndarray) -> None:
    conv_sums(xs[0], xs[1], xs[2] if len(xs) == 3 else None, g, out)


def conv_sums(
    x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, g: ConvGeometry, out: np.ndarray
) -> None:
    """The sums of products plus ``bias`` (O,), in ``out``'s dtype (the product dtype),
    written into ``out`` (a C-contiguous (N, O, OH, OW) array sharing no memory with the
    inputs)."""
    acc = out.dtype
    b4 = None if bias is None else bias.astype(acc, copy=False).reshape(1, g.o, 1, 1)
    if g.empty:
        out[...] = 0 if b4 is None else b4
        return
    groups, og = g.groups, g.o // g.groups
    wg = w.astype(acc, copy=False).reshape(groups, og, g.k)
    path = g.path
    if path == "rows":
        _row_sums(x, wg, b4, g, out)
        return
    if path == "runs":
        _run_sums(x, wg, b4, g, out)
        return
    if path == "taps":
        _tap_sums(x, w, b4, g, out)
        return
    positions = g.oh * g.ow
    if path == "direct":
        cols = x.astype(acc, copy=False).reshape(g.n, groups, g.k, positions)
    else:
        xp = padded(x, g.pads, 0, acc)
        cols = np.empty((g.n, groups, g.cg, g.kh, g.kw, g.oh, g.ow), dtype=acc)
        cols[...] = tap_windows(xp, groups, (g.kh, g.kw), g.dilation, g.strides, (g.oh, g.ow))
        cols = cols.reshape(g.n, groups, g.k, positions)
    np.matmul(wg, cols, out=out.reshape(g.n, groups, og, positions))
    if b4 is not None:
        np.add(out, b4, out=out)


def _row_sums(
    x: np.ndarray, wg: np.ndarray, b4: np.ndarray | None, g: ConvGeometry, out: np.ndarray
) -> None:
    """The ``rows`` path (unit strides, an output as wide as the input: the horizontal
    padding is the window's width less one, "same"): the input padded with zero rows only,
    each channel's rows one flat run (with the left padding's cells before it and the
    right's after it); per channel and tap, one run of OH * W cells copied into the
    columns, output (y, x) at cell y * W + x, so the products land in ``out`` as they are.
    A tap's run wraps around a row's end where the tap reads the horizontal padding: those
    cells of the columns are set to zero (the padding's value)."""
    acc = out.dtype
    groups, og = g.groups, g.o // g.groups
    n, c, h, w = x.shape
    pt, pl, pb, pr = g.pads
    flat = np.zeros((n, c, (pt + h + pb) * w + pl + pr), dtype=acc)
    flat[:, :, pl + pt * w : pl + (pt + h) * w] = x.reshape(n, c, h * w)
    run = g.oh * w
    dh, dw = g.dilation
    s0, s1, s2 = flat.strides
    cols = np.empty((n, groups, g.cg, g.kh, g.kw, g.oh, w), dtype=acc)
    cols.reshape(n, groups, g.cg, g.kh, g.kw, run)[...] = np.lib.stride_tricks.as_strided(
        flat,
        (n, groups, g.cg, g.kh, g.kw, run),
        (s0, s1 * g.cg, s1, s2 * dh * w, s2 * dw, s2),
        writeable=False,
    )
    for j in range(g.kw):
        # tap column j reads input column x + j * DW - PL: before 0 for the first x, past
        # W - 1 for the last (the cells it read there belong to the neighbouring row)
        left = min(w, max(0, pl - j * dw))
        right = min(w, max(0, j * dw - pl))
        if left:
            cols[..., j, :, :left] = 0
        if right:
            cols[..., j, :, w - right :] = 0
    np.matmul(wg, cols.reshape(n, groups, g.k, run), out=out.reshape(n, groups, og, run))
    if b4 is not None:
        np.add(out, b4, out=out)


def _run_sums(
    x: np.ndarray, wg: np.ndarray, b4: np.ndarray | None, g: ConvGeometry, out: np.ndarray
) -> None:
    """The ``runs`` path (unit strides): per channel and tap, one run of the flattened
    padded rows copied into the columns; the products in the same row-padded layout, their
    rows copied out without the cells past each row's end, then the bias added (two passes:
    one that adds a broadcast bias while copying the strided rows is slower)."""
    acc = out.dtype
    groups, og = g.groups, g.o // g.groups
    xp = np.ascontiguousarray(padded(x, g.pads, 0, acc))
    run = (g.oh - 1) * g.wp + g.ow  # from output (0, 0) to (OH-1, OW-1) in padded rows
    cols = np.empty((g.n, groups, g.cg, g.kh, g.kw, run), dtype=acc)
    cols[...] = tap_runs(xp, groups, (g.kh, g.kw), g.dilation, run)
    rows = np.empty((g.n, g.o, g.oh, g.wp), dtype=acc)
    flat = rows.reshape(g.n, groups, og, g.oh * g.wp)[..., :run]
    np.matmul(wg, cols.reshape(g.n, groups, g.k, run), out=flat)
    out[...] = rows[..., : g.ow]
    if b4 is not None:
        np.add(out, b4, out=out)


def _tap_sums(
    x: np.ndarray, w: np.ndarray, b4: np.ndarray | None, g: ConvGeometry, out: np.ndarray
) -> None:
    """The ``taps`` path (unit strides): the sums in the row-padded layout of ``runs``, one
    batched product per tap of its weights with the tap's runs of the padded input (read in
    place: per channel, a run starts a row of the matrix BLAS reads, one padded channel
    apart), added in tap order; then the rows copied out and the bias added."""
    acc = out.dtype
    groups, og, cg = g.groups, g.o // g.groups, g.cg
    xp = np.ascontiguousarray(padded(x, g.pads, 0, acc))
    flat = xp.reshape(g.n, groups, cg, g.hp * g.wp)
    run = (g.oh - 1) * g.wp + g.ow
    # (KH, KW, G, O/G, C/G): each tap's weight matrices, contiguous
    wt = np.ascontiguousarray(
        w.astype(acc, copy=False).reshape(groups, og, cg, g.kh, g.kw).transpose(3, 4, 0, 1, 2)
    )
    rows = np.empty((g.n, g.o, g.oh, g.wp), dtype=acc)
    total = rows.reshape(g.n, groups, og, g.oh * g.wp)[..., :run]
    term = np.empty((g.n, groups, og, run), dtype=acc)
    dh, dw = g.dilation
    for i in range(g.kh):
        for j in range(g.kw):
            start = i * dh * g.wp + j * dw
            part = flat[..., start : start + run]
            if i == j == 0:
                np.matmul(wt[0, 0], part, out=total)
            else:
                np.matmul(wt[i, j], part, out=term)
                np.add(total, term, out=total)
    out[...] = rows[..., : g.ow]
    if b4 is not None:
        np.add(out, b4, out=out)


__all__ = [
    "ConvGeometry",
    "conv2d",
    "conv2d_into",
    "conv2d_prepare",
    "conv_geometry",
    "conv_params",
    "conv_sums",
]

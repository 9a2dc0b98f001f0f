"""Converters of the spectral operators, DFT (opsets 17 and 20) and STFT (17), as matrix
products with constant Fourier matrices: the interpreter, the VM and C run them with the
matmul they already have, and the memory they hold is planned like any other.

A transform of length N along one axis is, for real and imaginary parts (xr, xi),

    yr = xr @ C + xi @ S        yi = xi @ C - xr @ S        (forward)
    yr = (xr @ C - xi @ S) / N  yi = (xi @ C + xr @ S) / N  (inverse)

with ``C[n, k] = cos(2 pi k n / N)`` and ``S[n, k] = sin(2 pi k n / N)``. The matrices fold
what ONNX states as separate steps: rows past N (the input cropped to ``dft_length``) are
left out, missing rows (zero padding) cost nothing, and a one-sided spectrum keeps the
columns 0 .. N//2. The inverse of a one-sided spectrum (IRFFT) weighs each bin by the
number of times it stands in the full spectrum (1 for the first and, for even N, the
Nyquist bin; 2 for the others), and reads only the real part of those two, as numpy's
irfft does. The matrices are computed in float64 and a float32 or float16 input is
widened to float64 for the products, as the ONNX reference (numpy's FFT) computes: the
float32 result is then the exact transform rounded once, not a sum of N rounded terms.

The transform costs O(N^2) multiplications where an FFT costs O(N log N): what ONNX models
carry (audio frames of a few hundred samples) is small enough for that.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType

from relaxc.ir.types import numpy_dtype

from .context import NodeContext, norm_axis, rank_of, shape_of
from .model import relax_dtype
from .values import Folded, Value

Converter = Callable[[NodeContext], list]

_FLOATS = ("f16", "f32", "f64")


def fourier_matrices(
    length: int, bins: int, inverse: bool, half_spectrum: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(C, S) of shape (length, bins): the cosine and sine of 2 pi k n / N for the first
    ``length`` samples n and ``bins`` frequencies k, where N is ``length`` forward and
    ``bins`` inverse. ``half_spectrum`` (IRFFT): the rows are the one-sided bins k, each
    weighted by its multiplicity in the full spectrum, the columns the N samples."""
    if not inverse:
        n = np.arange(length, dtype=np.float64)[:, None]
        k = np.arange(bins, dtype=np.float64)[None, :]
        angle = 2.0 * np.pi * np.mod(n * k, length) / length
        return np.cos(angle), np.sin(angle)
    k = np.arange(length, dtype=np.float64)[:, None]  # rows: input bins
    n = np.arange(bins, dtype=np.float64)[None, :]  # columns: output samples
    angle = 2.0 * np.pi * np.mod(k * n, bins) / bins
    c, s = np.cos(angle) / bins, np.sin(angle) / bins
    if half_spectrum:
        weight = np.full((length, 1), 2.0)
        weight[0] = 1.0
        if bins % 2 == 0 and bins // 2 < length:
            weight[bins // 2] = 1.0
        c, s = c * weight, s * weight
        s[0] = 0.0  # the imaginary parts of the first and Nyquist bins are not read
        if bins % 2 == 0 and bins // 2 < length:
            s[bins // 2] = 0.0
    return c, s


def _static_len(ctx: NodeContext, d: D.Dim, what: str) -> int:
    if not isinstance(d, int):
        raise ctx.fail(f"{what} ({D.dim_to_str(d)}) must be known when the model is imported")
    return d


def _const(ctx: NodeContext, array: np.ndarray, name: str) -> Folded:
    return Folded(np.ascontiguousarray(array), f"{ctx.hint()}_{name}")


def _parts(ctx: NodeContext, x: Value) -> tuple[Value, Value | None]:
    """(real, imaginary or None) of a (..., 1) or (..., 2) tensor, without the last axis."""
    rank = rank_of(x)
    last = shape_of(x)[-1]
    if last not in (1, 2):
        raise ctx.fail(
            f"the last axis of its input holds the real and imaginary parts (1 or 2 values), "
            f"got {D.dim_to_str(last)}"
        )
    if last == 1:
        return ctx.emit("squeeze", [x], {"axes": (rank - 1,)}), None

    def part(i: int) -> Value:
        v = ctx.emit("strided_slice", [x], {"begin": (i,), "end": (i + 1,), "axes": (rank - 1,)})
        return ctx.emit("squeeze", [v], {"axes": (rank - 1,)})

    return part(0), part(1)


def _matmul_sum(ctx: NodeContext, terms: list[tuple[Value, np.ndarray, float]]) -> Value:
    """sum of sign * (x @ M) over ``terms``; constant matrices made once per product."""
    out: Value | None = None
    for i, (x, m, sign) in enumerate(terms):
        p = ctx.emit("matmul", [x, _const(ctx, m, f"fourier{i}")])
        if out is None:
            out = p if sign > 0 else ctx.emit("negative", [p])
        else:
            out = ctx.emit("add" if sign > 0 else "subtract", [out, p])
    assert out is not None
    return out


def _transform_last(
    ctx: NodeContext,
    xr: Value,
    xi: Value | None,
    n_fft: int,
    inverse: bool,
    onesided: bool,
) -> list[Value]:
    """The DFT of (xr, xi) along their last axis: [yr, yi] (or [yr] for an IRFFT)."""
    length = _static_len(ctx, shape_of(xr)[-1], "the length of the transformed axis")
    if inverse and onesided:  # IRFFT: bins 0 .. n_fft // 2 of the input are read
        used = min(length, n_fft // 2 + 1)
        c, s = fourier_matrices(used, n_fft, inverse=True, half_spectrum=True)
    elif inverse:
        used = min(length, n_fft)
        c, s = fourier_matrices(used, n_fft, inverse=True, half_spectrum=False)
    else:
        used = min(length, n_fft)
        bins = n_fft // 2 + 1 if onesided else n_fft
        c, s = fourier_matrices(n_fft, bins, inverse=False, half_spectrum=False)
        c, s = c[:used], s[:used]
    if used < length:  # samples (or bins) past those the transform reads
        rank = rank_of(xr)
        crop = {"begin": (0,), "end": (used,), "axes": (rank - 1,)}
        xr = ctx.emit("strided_slice", [xr], crop)
        xi = None if xi is None else ctx.emit("strided_slice", [xi], crop)
    if inverse and onesided:
        terms = [(xr, c, 1.0)] + ([] if xi is None else [(xi, s, -1.0)])
        return [_matmul_sum(ctx, terms)]
    if inverse:
        yr_terms = [(xr, c, 1.0)] + ([] if xi is None else [(xi, s, -1.0)])
        yi_terms = [(xr, s, 1.0)] + ([] if xi is None else [(xi, c, 1.0)])
    else:
        yr_terms = [(xr, c, 1.0)] + ([] if xi is None else [(xi, s, 1.0)])
        yi_terms = ([] if xi is None else [(xi, c, 1.0)]) + [(xr, s, -1.0)]
    return [_matmul_sum(ctx, yr_terms), _matmul_sum(ctx, yi_terms)]


def _complex_out(ctx: NodeContext, parts: list[Value]) -> Value:
    """(..., 2) from [real, imaginary], or (..., 1) from [real]."""
    rank = rank_of(parts[0])
    stacked = [ctx.emit("expand_dims", [p], {"axis": rank}) for p in parts]
    return stacked[0] if len(stacked) == 1 else ctx.emit("concat", stacked, {"axis": rank})


def _widened(ctx: NodeContext, v: Value) -> Value:
    return v if v.type.dtype == "f64" else ctx.emit("cast", [v], {"dtype": DType("f64")})


def _narrowed(ctx: NodeContext, v: Value, dtype: str) -> Value:
    return v if dtype == "f64" else ctx.emit("cast", [v], {"dtype": DType(dtype)})


def convert_dft(ctx: NodeContext) -> list:
    x = ctx.input(0)
    dtype = x.type.dtype
    if dtype not in _FLOATS:
        raise ctx.fail(f"its input must be float16, float32 or float64, got {dtype}")
    rank = rank_of(x)
    if rank < 2:
        raise ctx.fail(
            f"its input has rank {rank}; it needs a signal axis and a last axis of parts"
        )
    if ctx.opset >= 20:
        axis_in = ctx.ints(ctx.optional(2), "the axis input")
        axis = -2 if axis_in is None else int(np.asarray(axis_in).reshape(-1)[0])
    else:
        axis = int(ctx.attr("axis", 1))
    axis = norm_axis(axis, rank, ctx)
    if axis == rank - 1:
        raise ctx.fail("its axis is the last one, which holds the real and imaginary parts")
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    if onesided and not inverse and shape_of(x)[-1] == 2:
        raise ctx.fail("a one-sided forward DFT takes a real input (last axis of 1)")
    length = _static_len(ctx, shape_of(x)[axis], "the length of the transformed axis")
    given = ctx.ints(ctx.optional(1), "the dft_length input")
    if given is not None:
        n_fft = int(np.asarray(given).reshape(-1)[0])
    else:
        n_fft = 2 * (length - 1) if inverse and onesided else length
    if n_fft < 1:
        raise ctx.fail(f"its dft_length is {n_fft}; it must be at least 1")
    xr, xi = _parts(ctx, x)
    signal_rank = rank - 1
    order = [a for a in range(signal_rank) if a != axis] + [axis]
    back = tuple(int(i) for i in np.argsort(order))
    if axis != signal_rank - 1:
        xr = ctx.emit("transpose", [xr], {"axes": tuple(order)})
        xi = None if xi is None else ctx.emit("transpose", [xi], {"axes": tuple(order)})
    wide_i = None if xi is None else _widened(ctx, xi)
    parts = _transform_last(ctx, _widened(ctx, xr), wide_i, n_fft, inverse, onesided)
    if axis != signal_rank - 1:
        parts = [ctx.emit("transpose", [p], {"axes": back}) for p in parts]
    return [_complex_out(ctx, [_narrowed(ctx, p, dtype) for p in parts])]


def convert_stft(ctx: NodeContext) -> list:
    """STFT: frames of frame_length samples every frame_step, each multiplied by the
    window, then the DFT of each frame (one-sided by default): frames gathered with a
    constant index matrix (frames, frame_length), so the framed signal is one planned
    tensor."""
    x = ctx.input(0, "signal")
    dtype = x.type.dtype
    if dtype not in _FLOATS:
        raise ctx.fail(f"its signal must be float16, float32 or float64, got {dtype}")
    if rank_of(x) != 3:
        raise ctx.fail(f"its signal has rank {rank_of(x)}; it needs (batch, length, 1 or 2)")
    step = ctx.ints(ctx.input(1, "frame_step"), "the frame_step input")
    assert step is not None
    step_n = int(np.asarray(step).reshape(-1)[0])
    window = ctx.optional(2)
    frame_len = ctx.ints(ctx.optional(3), "the frame_length input")
    if window is not None:
        win_len = _static_len(ctx, shape_of(window)[0], "the window length")
        if frame_len is not None and int(np.asarray(frame_len).reshape(-1)[0]) != win_len:
            raise ctx.fail("its frame_length differs from its window's length")
        n = win_len
    elif frame_len is not None:
        n = int(np.asarray(frame_len).reshape(-1)[0])
    else:
        raise ctx.fail("it needs a window or a frame_length")
    length = _static_len(ctx, shape_of(x)[1], "the signal length")
    if step_n < 1 or n < 1 or n > length:
        raise ctx.fail(
            f"frame_step {step_n} and frame length {n} do not fit a signal of {length} samples"
        )
    onesided = bool(ctx.attr("onesided", 1))
    if onesided and shape_of(x)[-1] == 2:
        raise ctx.fail("a one-sided STFT takes a real signal (last axis of 1)")
    frames = (length - n) // step_n + 1
    index = np.arange(frames)[:, None] * step_n + np.arange(n)[None, :]
    xr, xi = _parts(ctx, x)
    idx = _const(ctx, index.astype(np.int64), "frames")
    xr = ctx.emit("take", [_widened(ctx, xr), idx], {"axis": 1})  # (batch, frames, n)
    xi = None if xi is None else ctx.emit("take", [_widened(ctx, xi), idx], {"axis": 1})
    if window is not None:
        w = _widened(ctx, window)
        xr = ctx.emit("multiply", [xr, w])
        xi = None if xi is None else ctx.emit("multiply", [xi, w])
    parts = _transform_last(ctx, xr, xi, n, inverse=False, onesided=onesided)
    return [_complex_out(ctx, [_narrowed(ctx, p, dtype) for p in parts])]


def mel_weight_matrix(
    num_mel_bins: int, dft_length: int, sample_rate: float, low_hz: float, high_hz: float
) -> np.ndarray:
    """The (dft_length // 2 + 1, num_mel_bins) triangular filter bank of ONNX's
    MelWeightMatrix: num_mel_bins + 2 edges evenly spaced on the mel scale
    (mel(f) = 2595 log10(1 + f / 700)) by a step of the span over num_mel_bins + 2, as ONNX's
    reference and onnxruntime space them; each edge the DFT bin floor((N + 1) f / rate);
    each band rises from 0 at its left edge to 1 at its centre and falls to 0 at its right
    edge (a band whose left edge is its centre is 1 there)."""
    edges_mel = np.arange(num_mel_bins + 2, dtype=np.float64)
    low_mel = 2595.0 * np.log1p(low_hz / 700.0) / np.log(10.0)
    high_mel = 2595.0 * np.log1p(high_hz / 700.0) / np.log(10.0)
    edges_mel = edges_mel * ((high_mel - low_mel) / (num_mel_bins + 2)) + low_mel
    edges_hz = 700.0 * np.expm1(edges_mel / 2595.0 * np.log(10.0))
    edges = (((dft_length + 1) * edges_hz) // sample_rate).astype(np.int64)
    rows = dft_length // 2 + 1
    if edges[:-1].max() >= rows or edges[-1] > rows or edges.min() < 0:
        raise ValueError(f"the bands' edges reach DFT bin {int(edges.max())} of {rows}")
    out = np.zeros((rows, num_mel_bins), np.float64)
    for band in range(num_mel_bins):
        left, centre, right = (int(e) for e in edges[band : band + 3])
        if centre == left:
            out[centre, band] = 1.0
        else:
            j = np.arange(left, centre + 1)
            out[j, band] = (j - left) / (centre - left)
        if right > centre:
            j = np.arange(centre, right)
            out[j, band] = (right - j) / (right - centre)
    return out


def convert_mel_weight_matrix(ctx: NodeContext) -> list:
    """MelWeightMatrix: a constant, computed at import from its five scalar inputs (each
    must be known then)."""
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    values = [ctx.scalar(ctx.input(i, n), f"the {n} input") for i, n in enumerate(names)]
    bins, n_fft, rate, low, high = (float(v) for v in values)  # type: ignore[arg-type]
    if bins < 1 or n_fft < 1 or rate <= 0 or not 0 <= low <= high:
        raise ctx.fail(
            f"num_mel_bins {bins:g}, dft_length {n_fft:g}, sample_rate {rate:g} and the edges "
            f"{low:g} .. {high:g} Hz do not make a filter bank"
        )
    try:
        matrix = mel_weight_matrix(int(bins), int(n_fft), rate, low, high)
    except ValueError as e:
        raise ctx.fail(f"its upper edge lies beyond the one-sided spectrum: {e}") from None
    dtype = relax_dtype(int(ctx.attr("output_datatype", 1)), "its output_datatype")
    return [Folded(matrix.astype(numpy_dtype(dtype)), ctx.hint())]


def table() -> dict[str, Converter]:
    return {"DFT": convert_dft, "STFT": convert_stft, "MelWeightMatrix": convert_mel_weight_matrix}

"""grid_sample: ONNX GridSample, sampling a tensor at the positions a grid gives.

``x`` is ``(N, C, D1, ..., Dr)`` and ``grid`` ``(N, O1, ..., Or, r)``: the output
``(N, C, O1, ..., Or)`` holds, for every output position, ``x`` sampled at the normalized
coordinates ``grid[n, o, :]`` in [-1, 1], the last spatial axis's first (``grid[..., 0]``
is the x of an image, ``grid[..., 1]`` its y). Each axis of length ``d`` maps its
coordinate ``g`` (float64) to an input position

    align_corners:  (g + 1) / 2 * (d - 1)       (-1 and 1 the centres of the end elements)
    otherwise:      ((g + 1) * d - 1) / 2       (-1 and 1 the outer edges of the ends)

``nearest`` rounds it half to even (as onnx's reference and PyTorch do). Under
``reflection`` a position outside the border ([0, d - 1] with align_corners, else
[-0.5, d - 0.5]) is reflected at the border until it is inside; ``zeros`` and ``border``
leave it. Then each axis has taps: nearest one (the position, truncated), linear two (floor
and floor + 1, weights 1 - t and t), cubic four (floor - 1 .. floor + 2, Keys' kernel with
a = -0.75). A tap outside the axis reads zero (``zeros``), the clamped index (``border``:
the input padded with its edge values, as the specification words it and onnxruntime and
PyTorch compute; onnx's reference implementation clamps the position before it takes the
taps, which gives other values for cubic near the border) or the reflected index
(``reflection``). The output is the sum over one tap per axis (row-major, the first spatial
axis outermost) of the product of their weights (multiplied in axis order) times ``x`` at
their indices, summed in float64 and rounded once to the dtype; ``nearest`` copies the
element (any dtype, bits exact). A grid position with a non-finite coordinate gives NaN (0
for an integer ``x``). The C kernel computes the same, in the same order.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import AttrSpec, OpDef, OpError, Registry
from relaxc.ir.types import DTYPES, TensorType, Type

from .common import require_computable, require_float, tensors

MODES = ("nearest", "linear", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
CUBIC_A = -0.75
"""The coefficient of GridSample's cubic kernel (fixed by ONNX and PyTorch)."""
TAPS = {"nearest": 0, "linear": 0, "cubic": -1}
"""The offset of each mode's first tap from floor(position)."""
N_TAPS = {"nearest": 1, "linear": 2, "cubic": 4}


class AxisTaps(NamedTuple):
    """One spatial axis's taps at every (n, output position): indices into the axis (already
    clamped or reflected into it), float64 weights, and whether each tap reads the input
    (False: outside the axis under ``zeros`` padding, which reads zero)."""

    source: np.ndarray  # (..., k) int64
    weight: np.ndarray  # (..., k) float64
    valid: np.ndarray  # (..., k) bool


def borders(d: int, align_corners: bool) -> tuple[float, float]:
    """The interval a position is clamped or reflected into."""
    return (0.0, float(d - 1)) if align_corners else (-0.5, d - 0.5)


def reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``x`` reflected at ``lo`` and ``hi`` until inside [lo, hi] (float64)."""
    span = hi - lo
    below, above = x < lo, x > hi
    if span == 0:
        return np.where(below | above, lo, x)
    dx = np.where(below, lo - x, np.where(above, x - hi, 0.0))
    n = np.trunc(dx / span)
    r = dx - n * span
    odd = np.fmod(n, 2.0) != 0
    from_lo, from_hi = lo + r, hi - r
    out = np.where(below, np.where(odd, from_hi, from_lo), np.where(odd, from_lo, from_hi))
    return np.clip(np.where(below | above, out, x), lo, hi)


def cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Keys' cubic kernel at distances t + 1, t, 1 - t, 2 - t (t in [0, 1))."""
    a = CUBIC_A
    u, v, w = t + 1, 1 - t, 2 - t
    return [
        ((a * u - 5 * a) * u + 8 * a) * u - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * v - (a + 3)) * v * v + 1,
        ((a * w - 5 * a) * w + 8 * a) * w - 4 * a,
    ]


def axis_taps(g: np.ndarray, d: int, attrs: Mapping[str, Any]) -> AxisTaps:
    """The taps of an axis of length ``d`` at the normalized coordinates ``g`` (float64,
    finite)."""
    mode, padding = attrs["mode"], attrs["padding_mode"]
    align = bool(attrs["align_corners"])
    x = (g + 1) / 2 * (d - 1) if align else ((g + 1) * d - 1) / 2
    if mode == "nearest":
        x = np.rint(x)
    lo, hi = borders(d, align)
    if padding == "reflection":
        x = reflect(x, lo, hi)
    x = np.clip(x, -3.0, d + 2.0)  # every tap of a position beyond stays outside the axis
    if mode == "nearest":
        index = np.trunc(x).astype(np.int64)[..., None]
        weight = np.ones(index.shape)
    else:
        base = np.floor(x)
        t = x - base
        first = base.astype(np.int64) + TAPS[mode]
        index = first[..., None] + np.arange(N_TAPS[mode], dtype=np.int64)
        weight = np.stack([1 - t, t] if mode == "linear" else cubic_weights(t), axis=-1)
    valid = np.ones(index.shape, bool)
    if padding == "zeros":
        valid = (index >= 0) & (index < d)
    elif padding == "reflection":
        index = np.trunc(reflect(index.astype(np.float64), lo, hi)).astype(np.int64)
    return AxisTaps(np.clip(index, 0, d - 1), weight, valid)


def _check_attrs(attrs: Mapping[str, Any]) -> None:
    for name, allowed in (("mode", MODES), ("padding_mode", PADDING_MODES)):
        if attrs[name] not in allowed:
            raise OpError(
                f"grid_sample: {name} must be one of {', '.join(allowed)}, got {attrs[name]!r}"
            )


def _infer_grid_sample(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    x, grid = tensors(inputs, "grid_sample")
    require_computable(x.dtype, "grid_sample")
    _check_attrs(attrs)
    if attrs["mode"] != "nearest":
        require_float(x.dtype, "grid_sample")
    if DTYPES[grid.dtype].kind != "float":
        raise OpError(f"grid_sample: the grid must be floating-point, got {grid.dtype}")
    require_computable(grid.dtype, "grid_sample")
    r = len(x.shape) - 2
    if r < 1:
        raise OpError(f"grid_sample: x must have rank 3 or more (N, C, spatial...), got {x}")
    if len(grid.shape) != r + 2:
        raise OpError(f"grid_sample: the grid must have rank {r + 2} for {r} spatial axes")
    if grid.shape[-1] != r:
        raise OpError(
            f"grid_sample: the grid's last axis must be {r} (one coordinate per spatial axis), "
            f"got {D.dim_to_str(grid.shape[-1])}"
        )
    if not D.dims_equal(x.shape[0], grid.shape[0]):
        raise OpError(
            f"grid_sample: x and the grid have different batches ({D.dim_to_str(x.shape[0])} "
            f"and {D.dim_to_str(grid.shape[0])})"
        )
    for a, d in enumerate(x.shape[2:]):
        if not D.is_static(d) or int(d) < 1:  # type: ignore[arg-type]
            raise OpError(
                f"grid_sample: spatial axis {a + 2} of x must have a static non-zero length, "
                f"got {D.dim_to_str(d)}"
            )
    return TensorType((x.shape[0], x.shape[1], *grid.shape[1:-1]), x.dtype)


def _grid_sample(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, grid = xs
    out_shape = (x.shape[0], x.shape[1], *grid.shape[1:-1])
    if 0 in out_shape:
        return np.zeros(out_shape, x.dtype)
    dims = x.shape[2:]
    r = len(dims)
    g = grid.astype(np.float64)
    finite = np.isfinite(g)
    bad = np.asarray(~finite.all(axis=-1))  # (N, O...)
    g = np.where(finite, g, 0.0)
    taps = [axis_taps(g[..., r - 1 - a], int(d), attrs) for a, d in enumerate(dims)]
    xt = np.moveaxis(x, 1, -1)  # (N, D..., C)
    batch = np.arange(x.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))
    if attrs["mode"] == "nearest":
        at = (batch,) + tuple(t.source[..., 0] for t in taps)
        vals = xt[at]  # (N, O..., C)
        valid = np.asarray(np.logical_and.reduce([t.valid[..., 0] for t in taps]))
        y = np.where(valid[..., None], vals, np.zeros((), x.dtype))
    else:
        acc = np.zeros(grid.shape[:-1] + (x.shape[1],))
        x64 = xt.astype(np.float64)
        for combo in itertools.product(*(range(t.source.shape[-1]) for t in taps)):
            w = taps[0].weight[..., combo[0]]
            for t, k in zip(taps[1:], combo[1:]):
                w = w * t.weight[..., k]
            valid = np.asarray(
                np.logical_and.reduce([t.valid[..., k] for t, k in zip(taps, combo)])
            )
            at = (batch,) + tuple(t.source[..., k] for t, k in zip(taps, combo))
            vals = x64[at]
            with np.errstate(invalid="ignore", over="ignore"):
                acc = acc + np.where(valid[..., None], w[..., None] * vals, 0.0)
        with np.errstate(invalid="ignore", over="ignore"):
            y = acc.astype(x.dtype)
    fill = np.nan if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else 0
    y = np.where(bad[..., None], np.asarray(fill).astype(x.dtype), y)
    return np.ascontiguousarray(np.moveaxis(y, -1, 1))


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "grid_sample",
            "ONNX GridSample: x sampled at a grid's normalized coordinates",
            "kernel",
            _infer_grid_sample,
            kernel=_grid_sample,
            min_inputs=2,
            max_inputs=2,
            input_names=("x", "grid"),
            attrs=(
                AttrSpec("mode", "str", "linear", "nearest, linear or cubic"),
                AttrSpec("padding_mode", "str", "zeros", "zeros, border or reflection"),
                AttrSpec("align_corners", "bool", False, "-1 and 1 at the end elements' centres"),
            ),
            family="data movement",
            example='grid_sample(%x, %grid, mode="linear", padding_mode="border")',
        )
    )

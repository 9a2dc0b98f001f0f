"""resize: ONNX Resize (and Upsample) on a tensor of any rank.

The importer resolves what ONNX passes as tensors and attribute combinations (``scales`` or
``sizes``, ``axes``, ``keep_aspect_ratio_policy``) into one output shape ``sizes`` over every
axis and, where ONNX computes coordinates with a given scale, the ``scales`` (one float per
axis; None: each axis's output length over its input length). Interpolation is separable:
each resized axis maps every output position to a few input positions ("taps") with a
weight each (:func:`axis_taps`, computed in float64 from the axis's lengths and the
attributes, the formulas of the ONNX specification); an axis whose length and scale stay
and whose coordinates map to themselves is an identity and has no taps. An output element is

    y = sum over one tap per resized axis of (product of the taps' weights) * x[tap indices]

summed in float64 in the taps' row-major order, rounded once to the dtype (``nearest`` has
one tap of weight one per axis: a copy, NaN and integers exact). The C kernel reads the same
taps (computed by the same function when the kernel is generated) in the same order.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import AttrSpec, OpDef, OpError, Registry
from relaxc.ir.types import TensorType, Type

from .common import require_computable, require_float, tensors

MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nn",
    "tf_crop_and_resize",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


class AxisTaps(NamedTuple):
    """The taps of one resized axis: for each of its output positions, ``n`` input indices
    (clamped into the axis: ONNX's edge padding) and their float64 weights, and for
    ``tf_crop_and_resize`` which positions fall outside the input (None otherwise)."""

    source: np.ndarray  # (out, n) int64
    weight: np.ndarray  # (out, n) float64
    outside: np.ndarray | None  # (out,) bool


def _scale_of(attrs: Mapping[str, Any], axis: int, n_in: int, n_out: int) -> float:
    scales = attrs["scales"]
    if scales is None:
        return n_out / n_in
    return float(scales[axis])


def _roi_of(attrs: Mapping[str, Any], axis: int, rank: int) -> tuple[float, float]:
    roi = attrs["roi"]
    if roi is None:
        return (0.0, 1.0)
    return (float(roi[axis]), float(roi[rank + axis]))


def is_identity_axis(
    attrs: Mapping[str, Any], axis: int, rank: int, n_in: D.Dim, n_out: D.Dim
) -> bool:
    """Whether axis ``axis`` is left as it is: the same length, a scale of one and, for
    tf_crop_and_resize, the whole axis as its region."""
    if not D.dims_equal(n_in, n_out):
        return False
    scales = attrs["scales"]
    if scales is not None and float(scales[axis]) != 1.0:
        return False
    mode = attrs["coordinate_transformation_mode"]
    # (tf_half_pixel_for_nn maps y to y + 0.5 even so: onnxruntime and onnx's reference
    # leave an axis of scale one as it is, whatever the mode but tf_crop_and_resize)
    return mode != "tf_crop_and_resize" or _roi_of(attrs, axis, rank) == (0.0, 1.0)


def source_coordinates(
    n_in: int, n_out: int, scale: float, width: float, roi: tuple[float, float], mode: str
) -> np.ndarray:
    """Each output position's coordinate in the input (float64), by the coordinate mode.
    ``width`` is the output length before rounding (``scale * n_in`` where a scale was given,
    else ``n_out``): align_corners and tf_crop_and_resize divide by it less one, as the
    onnx package's reference does (onnxruntime divides by ``n_out - 1``; the two differ only
    where a given scale makes a fractional length)."""
    y = np.arange(n_out, dtype=np.float64)
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        adjustment = n_out / width
        offset = n_in / 2 * (1 - adjustment)
        return offset + (y + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if n_out > 1 else np.zeros(n_out)
    if mode == "align_corners":
        return y * (n_in - 1) / (width - 1) if width != 1 else np.zeros(n_out)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    start, end = roi  # tf_crop_and_resize
    if width != 1:
        return start * (n_in - 1) + y * (end - start) * (n_in - 1) / (width - 1)
    return np.full(n_out, 0.5 * (start + end) * (n_in - 1))


def _nearest_offset(frac: np.ndarray, nearest_mode: str) -> np.ndarray:
    """0 or 1: whether the nearest input position is above floor(x), by the nearest mode."""
    if nearest_mode == "round_prefer_floor":
        return (frac > 0.5).astype(np.int64)
    if nearest_mode == "round_prefer_ceil":
        return (frac >= 0.5).astype(np.int64)
    if nearest_mode == "floor":
        return np.zeros(frac.shape, np.int64)
    return (frac > 0).astype(np.int64)  # ceil


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with coefficient ``a`` at distances ``t``."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _filter_taps(
    x: np.ndarray, scale: float, attrs: Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """The (unclamped) input indices and weights of linear or cubic interpolation at ``x``:
    the taps around floor(x) (an integer x counts as the end of the interval below it), the
    filter stretched by 1/scale when ``antialias`` downsamples (weights then normalized)."""
    mode = attrs["mode"]
    base = np.floor(x)
    integral = x == base
    base = np.where(integral, x - 1, base).astype(np.int64)
    ratio = x - base  # in (0, 1]
    s = min(scale, 1.0) if attrs["antialias"] else 1.0
    reach = 1.0 if mode == "linear" else 2.0
    first = int(math.floor(-reach / s) + 1)
    offsets = np.arange(first, 2 - first, dtype=np.int64)  # taps base + first .. base + 1 - first
    dist = (offsets[None, :] - ratio[:, None]) * s
    if mode == "linear":
        w = np.clip(1 - np.abs(dist), 0.0, 1.0)
    else:
        w = _cubic(dist, float(attrs["cubic_coeff_a"]))
    if s != 1.0:
        w = w / w.sum(axis=1, keepdims=True)
    return base[:, None] + offsets[None, :], w


def axis_taps(n_in: int, n_out: int, axis: int, rank: int, attrs: Mapping[str, Any]) -> AxisTaps:
    """The taps of a resized axis of ``n_in`` positions resized to ``n_out``."""
    if n_out == 0:  # no position: no taps (and no scale to divide by)
        return AxisTaps(np.zeros((0, 1), np.int64), np.zeros((0, 1)), None)
    scale = _scale_of(attrs, axis, n_in, n_out)
    coord_mode = attrs["coordinate_transformation_mode"]
    roi = _roi_of(attrs, axis, rank)
    width = float(n_out) if attrs["scales"] is None else scale * n_in
    x = source_coordinates(n_in, n_out, scale, width, roi, coord_mode)
    outside = None
    if coord_mode == "tf_crop_and_resize":
        outside = (x < 0) | (x > n_in - 1)
    if attrs["mode"] == "nearest":
        lo = np.floor(x)
        index = (lo.astype(np.int64) + _nearest_offset(x - lo, attrs["nearest_mode"]))[:, None]
        weight = np.ones(index.shape)
    else:
        index, weight = _filter_taps(x, scale, attrs)
        if attrs["exclude_outside"]:
            weight = np.where((index < 0) | (index >= n_in), 0.0, weight)
            total = weight.sum(axis=1, keepdims=True)
            weight = weight / np.where(total == 0, 1.0, total)
    return AxisTaps(np.clip(index, 0, max(n_in - 1, 0)), weight, outside)


def resize_taps(
    in_shape: Sequence[D.Dim], out_shape: Sequence[D.Dim], attrs: Mapping[str, Any]
) -> list[AxisTaps | None]:
    """Per axis, its taps, or None for an identity axis (:func:`is_identity_axis`, whose
    lengths may be symbolic; a resized axis's are static)."""
    rank = len(in_shape)
    out: list[AxisTaps | None] = []
    for axis, (a, b) in enumerate(zip(in_shape, out_shape)):
        if is_identity_axis(attrs, axis, rank, a, b):
            out.append(None)
        else:
            out.append(axis_taps(int(a), int(b), axis, rank, attrs))  # type: ignore[arg-type]
    return out


def _check_attrs(attrs: Mapping[str, Any], rank: int) -> None:
    for name, allowed in (
        ("mode", MODES),
        ("coordinate_transformation_mode", COORDINATE_MODES),
        ("nearest_mode", NEAREST_MODES),
    ):
        if attrs[name] not in allowed:
            raise OpError(
                f"resize: {name} must be one of {', '.join(allowed)}, got {attrs[name]!r}"
            )
    scales, roi = attrs["scales"], attrs["roi"]
    if scales is not None:
        if not isinstance(scales, tuple) or len(scales) != rank:
            raise OpError(f"resize: scales must be a tuple of {rank} numbers, got {scales!r}")
        if any(not isinstance(s, (int, float)) or not float(s) > 0 for s in scales):
            raise OpError(f"resize: every scale must be a positive number, got {scales!r}")
    if roi is not None and (not isinstance(roi, tuple) or len(roi) != 2 * rank):
        raise OpError(f"resize: roi must be a tuple of {2 * rank} numbers, got {roi!r}")


def _infer_resize(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "resize")
    require_computable(x.dtype, "resize")
    sizes = tuple(attrs["sizes"])
    rank = len(x.shape)
    if len(sizes) != rank:
        raise OpError(f"resize: sizes has {len(sizes)} dims for an input of rank {rank}")
    _check_attrs(attrs, rank)
    if attrs["mode"] != "nearest":
        require_float(x.dtype, "resize")
    for axis, (a, b) in enumerate(zip(x.shape, sizes)):
        if is_identity_axis(attrs, axis, rank, a, b):
            continue
        if not (D.is_static(a) and D.is_static(b)):
            raise OpError(
                f"resize: axis {axis} is resized ({D.dim_to_str(a)} to {D.dim_to_str(b)}) "
                "and needs static lengths"
            )
        if int(b) < 0 or (int(a) == 0 and int(b) > 0):  # type: ignore[arg-type]
            raise OpError(f"resize: cannot resize axis {axis} from {a} to {b} positions")
    return TensorType(sizes, x.dtype)


def _resize(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    out_shape = tuple(int(d) for d in attrs["sizes"])
    taps = resize_taps(x.shape, out_shape, attrs)
    if 0 in out_shape:
        return np.zeros(out_shape, x.dtype)
    if attrs["mode"] == "nearest":
        index = [np.arange(n) if t is None else t.source[:, 0] for n, t in zip(out_shape, taps)]
        y = np.ascontiguousarray(x[np.ix_(*index)])
    else:
        y = _weighted_sum(x, out_shape, taps).astype(x.dtype)
    return _extrapolate(y, taps, attrs)


def _weighted_sum(
    x: np.ndarray, out_shape: tuple[int, ...], taps: Sequence[AxisTaps | None]
) -> np.ndarray:
    """The float64 sums of the module docstring, in the taps' row-major order."""
    rank = len(out_shape)
    x64 = x.astype(np.float64)
    active = [a for a in range(rank) if taps[a] is not None]
    acc = np.zeros(out_shape)
    counts = [taps[a].weight.shape[1] for a in active]  # type: ignore[union-attr]
    for combo in itertools.product(*(range(c) for c in counts)):
        index: list[np.ndarray] = [np.arange(n) for n in out_shape]
        w: np.ndarray | float = 1.0
        for a, k in zip(active, combo):
            t = taps[a]
            assert t is not None
            index[a] = t.source[:, k]
            shape = [1] * rank
            shape[a] = out_shape[a]
            w = w * t.weight[:, k].reshape(shape)
        with np.errstate(invalid="ignore"):
            acc += w * x64[np.ix_(*index)]
    return acc


def _extrapolate(
    y: np.ndarray, taps: Sequence[AxisTaps | None], attrs: Mapping[str, Any]
) -> np.ndarray:
    """``extrapolation_value`` where a position falls outside the input (tf_crop_and_resize)."""
    masks = [t.outside for t in taps if t is not None and t.outside is not None]
    if not masks or not any(m.any() for m in masks):
        return y
    outside = np.zeros(y.shape, bool)
    for a, t in enumerate(taps):
        if t is not None and t.outside is not None:
            shape = [1] * y.ndim
            shape[a] = y.shape[a]
            outside = outside | t.outside.reshape(shape)
    value = np.asarray(attrs["extrapolation_value"]).astype(y.dtype)
    return np.where(outside, value, y)


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "resize",
            "ONNX Resize: nearest, linear or cubic interpolation to the shape sizes",
            "kernel",
            _infer_resize,
            kernel=_resize,
            input_names=("x",),
            attrs=(
                AttrSpec("sizes", "shape", doc="the output shape"),
                AttrSpec("scales", "value", None, "per-axis scale for coordinates (or None)"),
                AttrSpec("mode", "str", "nearest", "nearest, linear or cubic"),
                AttrSpec("coordinate_transformation_mode", "str", "half_pixel"),
                AttrSpec("nearest_mode", "str", "round_prefer_floor"),
                AttrSpec("cubic_coeff_a", "float", -0.75),
                AttrSpec("exclude_outside", "bool", False),
                AttrSpec("antialias", "bool", False),
                AttrSpec("roi", "value", None, "(starts..., ends...) for tf_crop_and_resize"),
                AttrSpec("extrapolation_value", "float", 0.0),
            ),
            family="data movement",
            example='resize(%x, sizes=(1, 3, 8, 8), mode="linear")',
        )
    )

"""N-d convolution and pooling, and the normalizations of CNNs: conv_nd, max_pool_nd,
avg_pool_nd, lp_pool_nd, group_norm, mean_variance_norm and inv_std_dev.

The windowed ops take data (N, C, S1, ..., Sr) of any spatial rank r >= 1 (the ONNX importer
uses them for 3-D and for LpPool; 2-D convolution and max/average pooling keep their
specialised ops in :mod:`.nn`). Their attributes are per spatial axis: ``pool_size``,
``strides`` and ``dilation`` have r values (or one for all), ``padding`` has the r
beginnings then the r ends, in the ONNX order (or r values for both ends, or one for all).

conv_nd sums its products in the product dtype of conv2d (float32 for f16 and f32, float64,
64-bit integers wrapped to the input dtype), one batched matrix product per group over
im2col columns; the pools and normalizations compute in float64 and round once.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence, cast

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import AttrSpec, InferFn, OpDef, OpError, Registry
from relaxc.ir.types import TensorType, Type

from .checks import (
    as_contiguous,
    product_dtype,
    quiet_mean,
    require_dims_equal,
    require_float_math,
    require_numeric,
    sstr,
    window_out,
)
from .common import norm_axes, same_dtype, tensors

Ints = tuple[int, ...]


def per_axis(v: Sequence[int], r: int, op: str, name: str, minimum: int) -> Ints:
    """``v`` as r values (one value: the same on every axis), each at least ``minimum``."""
    vals = tuple(int(a) for a in v)
    if len(vals) == 1:
        vals = vals * r
    if len(vals) != r:
        raise OpError(f"{op}: '{name}' needs 1 or {r} values for {r} spatial axes, got {v}")
    if min(vals) < minimum:
        raise OpError(f"{op}: '{name}' values must be at least {minimum}, got {v}")
    return vals


def pads_of(v: Sequence[int], r: int, op: str) -> tuple[Ints, Ints]:
    """(beginnings, ends) of ``padding``: 1, r or 2r non-negative values."""
    vals = tuple(int(a) for a in v)
    if len(vals) == 1:
        vals = vals * (2 * r)
    elif len(vals) == r:
        vals = vals + vals
    if len(vals) != 2 * r:
        raise OpError(f"{op}: 'padding' needs 1, {r} or {2 * r} values, got {v}")
    if min(vals) < 0:
        raise OpError(f"{op}: 'padding' must not be negative, got {v}")
    return vals[:r], vals[r:]


class Geometry:
    """A window over r spatial axes: kernel, strides, dilations, pads, as integer tuples."""

    def __init__(self, op: str, k: Sequence[int], attrs: Mapping[str, Any]):
        r = len(k)
        self.r = r
        self.k = tuple(int(a) for a in k)
        self.strides = per_axis(attrs["strides"], r, op, "strides", 1)
        self.dilation = per_axis(attrs["dilation"], r, op, "dilation", 1)
        self.before, self.after = pads_of(attrs["padding"], r, op)
        self.ceil = bool(attrs.get("ceil_mode", False))
        self.op = op

    def out(self, sizes: Sequence[D.Dim]) -> tuple[D.Dim, ...]:
        """The output's spatial dims (symbolic where the sizes are)."""
        return tuple(
            window_out(s, b, a, k, d, st, self.op, f"spatial axis {i}", self.ceil)
            for i, (s, b, a, k, d, st) in enumerate(
                zip(sizes, self.before, self.after, self.k, self.dilation, self.strides)
            )
        )

    def concrete_out(self, sizes: Sequence[int]) -> Ints:
        return tuple(int(cast(int, o)) for o in self.out(sizes))

    def taps(self) -> Any:
        """The kernel taps (tuples of indices), in row-major order."""
        return itertools.product(*(range(k) for k in self.k))

    def tap_slices(self, tap: Sequence[int], out: Sequence[int]) -> tuple[slice, ...]:
        """The index of the padded input (N, C, S...) tap ``tap`` reads at every output
        position."""
        return (slice(None), slice(None)) + tuple(
            slice(t * d, t * d + s * (o - 1) + 1, s)
            for t, d, s, o in zip(tap, self.dilation, self.strides, out)
        )

    def padded(self, x: np.ndarray, out: Sequence[int], fill: Any, dtype: Any) -> np.ndarray:
        """``x`` padded with ``fill`` (and the extra end cells ceil_mode needs), in ``dtype``."""
        shape = list(x.shape[:2])
        inner = [slice(None), slice(None)]
        for i, size in enumerate(x.shape[2:]):
            need = (out[i] - 1) * self.strides[i] + self.dilation[i] * (self.k[i] - 1) + 1
            total = max(size + self.before[i] + self.after[i], need)
            shape.append(total)
            inner.append(slice(self.before[i], self.before[i] + size))
        xp = np.full(shape, fill, dtype=dtype)
        xp[tuple(inner)] = x
        return xp


# -- conv_nd ---------------------------------------------------------------------------


def _conv_geometry(attrs: Mapping[str, Any], wshape: Sequence[Any]) -> Geometry:
    if attrs["groups"] < 1:
        raise OpError(f"conv_nd: groups must be positive, got {attrs['groups']}")
    return Geometry("conv_nd", [int(k) if isinstance(k, int) else 1 for k in wshape[2:]], attrs)


def _infer_conv_nd(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    ts = tensors(inputs, "conv_nd")
    x, w = ts[0], ts[1]
    dtype = same_dtype(ts, "conv_nd")
    require_numeric(dtype, "conv_nd")
    if x.ndim < 3 or w.ndim != x.ndim:
        raise OpError(
            f"conv_nd: data (N, C, spatial...) and weight (O, C/groups, kernel...) need the "
            f"same rank, at least 3; got {sstr(x.shape)} and {sstr(w.shape)}"
        )
    if not all(isinstance(k, int) for k in w.shape[2:]):
        raise OpError(f"conv_nd: the kernel size must be static, got {sstr(w.shape)}")
    g = _conv_geometry(attrs, w.shape)
    groups = attrs["groups"]
    o = w.shape[0]
    require_dims_equal(
        x.shape[1],
        D.mul(w.shape[1], groups),
        "conv_nd",
        "input channels vs weight in-channels * groups",
    )
    if isinstance(o, int) and o % groups:
        raise OpError(f"conv_nd: {o} output channels are not divisible by groups={groups}")
    if len(ts) == 3:
        b = ts[2]
        if b.ndim != 1:
            raise OpError(f"conv_nd: bias must have rank 1, got {sstr(b.shape)}")
        require_dims_equal(b.shape[0], o, "conv_nd", "bias length and output channels")
    return TensorType((x.shape[0], o, *g.out(x.shape[2:])), dtype)


def _conv_nd(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """im2col columns (N, G, C/G * taps, positions) of the zero-padded input in the product
    dtype, one batched matrix product with each group's weights, plus the bias, rounded once."""
    x, w = xs[0], xs[1]
    acc = product_dtype(x.dtype)
    g = _conv_geometry(attrs, w.shape)
    out = g.concrete_out(x.shape[2:])
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    groups = attrs["groups"]
    taps = int(np.prod(g.k))
    positions = int(np.prod(out))
    sums = np.zeros((n, groups, o // groups, positions), dtype=acc)
    if n * o * positions and cg * taps:
        xp = g.padded(x, out, 0, acc)
        cols = np.empty((n, groups, cg, taps, *out), dtype=acc)
        for t, tap in enumerate(g.taps()):
            view = xp[g.tap_slices(tap, out)]
            cols[:, :, :, t] = view.reshape(n, groups, cg, *out)
        wg = w.astype(acc).reshape(groups, o // groups, cg * taps)
        np.matmul(wg, cols.reshape(n, groups, cg * taps, positions), out=sums)
    res = sums.reshape(n, o, *out)
    if len(xs) == 3:
        res = res + xs[2].astype(acc).reshape((1, o) + (1,) * g.r)
    return as_contiguous(res, x.dtype)


# -- pools -----------------------------------------------------------------------------


def _pool_geometry(op: str, attrs: Mapping[str, Any]) -> Geometry:
    k = attrs["pool_size"]
    if not k or min(k) < 1:
        raise OpError(f"{op}: 'pool_size' must be positive, got {k}")
    g = Geometry(op, k, attrs)
    for i in range(g.r):
        extent = g.dilation[i] * (g.k[i] - 1) + 1
        if max(g.before[i], g.after[i]) >= extent:
            raise OpError(
                f"{op}: padding {max(g.before[i], g.after[i])} of spatial axis {i} is not "
                f"smaller than the window extent {extent}, a window would lie entirely in "
                "the padding"
            )
    return g


def _pool_infer(op: str) -> InferFn:
    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        (x,) = tensors(inputs, op)
        if op in ("max_pool_nd", "max_pool_indices"):
            require_numeric(x.dtype, op)
        else:
            require_float_math(x.dtype, op)
        g = _pool_geometry(op, attrs)
        if x.ndim != g.r + 2:
            raise OpError(
                f"{op}: data of rank {x.ndim} does not fit a window of {g.r} spatial axes "
                f"(rank {g.r + 2}: N, C, then the spatial axes)"
            )
        if op == "lp_pool_nd" and not attrs["p"] > 0:
            raise OpError(f"lp_pool_nd: p must be positive, got {attrs['p']}")
        return TensorType((x.shape[0], x.shape[1], *g.out(x.shape[2:])), x.dtype)

    return infer


def _max_pool_nd(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """The running maximum, in tap order, over the input padded with -inf (integers: their
    minimum)."""
    x = xs[0]
    g = _pool_geometry("max_pool_nd", attrs)
    out = g.concrete_out(x.shape[2:])
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    res = np.full(x.shape[:2] + out, fill, dtype=x.dtype)
    if res.size == 0:
        return res
    xp = g.padded(x, out, fill, x.dtype)
    for tap in g.taps():
        np.maximum(res, xp[g.tap_slices(tap, out)], out=res)
    return res


def _infer_max_pool_indices(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    t = _pool_infer("max_pool_indices")(inputs, attrs)
    assert isinstance(t, TensorType)
    if attrs["storage_order"] not in (0, 1):
        raise OpError(
            f"max_pool_indices: storage_order must be 0 or 1, got {attrs['storage_order']}"
        )
    return TensorType(t.shape, "i64")


def _flat_index(x: np.ndarray, column_major: bool) -> np.ndarray:
    """Each cell's index in ``x`` flattened (N * C images, each row-major or, with
    ``column_major``, column-major over the spatial axes), int64."""
    n, c, *spatial = x.shape
    steps = [1] * len(spatial)
    if column_major:
        for i in range(1, len(spatial)):
            steps[i] = steps[i - 1] * spatial[i - 1]
    else:
        for i in range(len(spatial) - 2, -1, -1):
            steps[i] = steps[i + 1] * spatial[i + 1]
    image = int(np.prod(spatial))
    idx = np.zeros(x.shape, dtype=np.int64)
    idx += (np.arange(n * c, dtype=np.int64) * image).reshape(n, c, *([1] * len(spatial)))
    for i, (size, step) in enumerate(zip(spatial, steps)):
        shape = [1] * x.ndim
        shape[i + 2] = size
        idx += (np.arange(size, dtype=np.int64) * step).reshape(shape)
    return idx


def _max_pool_indices(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """The flat index of each window's maximum (ONNX MaxPool's Indices): the first of its
    taps inside the input, in tap order, whose value is greater than every tap before it."""
    x = xs[0]
    g = _pool_geometry("max_pool_indices", attrs)
    out = g.concrete_out(x.shape[2:])
    best = np.zeros(x.shape[:2] + out, dtype=x.dtype)
    idx = np.full(x.shape[:2] + out, -1, dtype=np.int64)
    if idx.size == 0:
        return idx
    xp = g.padded(x, out, 0, x.dtype)
    ip = g.padded(_flat_index(x, attrs["storage_order"] == 1), out, -1, np.int64)
    for tap in g.taps():
        v, vi = xp[g.tap_slices(tap, out)], ip[g.tap_slices(tap, out)]
        take = (vi >= 0) & ((idx < 0) | (v > best))
        np.copyto(best, v, where=take)
        np.copyto(idx, vi, where=take)
    return idx


def _counted(g: Geometry, sizes: Sequence[int], out: Sequence[int], include: bool) -> np.ndarray:
    """How many taps of each window fall in the counted cells (the input, and with
    ``include`` its padding, not ceil_mode's extra cells): a product over the axes."""
    count = np.ones((), dtype=np.float64)
    for i, size in enumerate(sizes):
        lo, hi = (
            (0, g.before[i] + size + g.after[i]) if include else (g.before[i], g.before[i] + size)
        )
        pos = np.arange(out[i])[:, None] * g.strides[i] + np.arange(g.k[i])[None, :] * g.dilation[i]
        along = ((pos >= lo) & (pos < hi)).sum(axis=1).astype(np.float64)
        count = np.multiply.outer(count, along)
    return count


def _window_sum(g: Geometry, xp: np.ndarray, out: Sequence[int]) -> np.ndarray:
    total = np.zeros(xp.shape[:2] + tuple(out), dtype=np.float64)
    for tap in g.taps():
        np.add(total, xp[g.tap_slices(tap, out)], out=total)
    return total


def _avg_pool_nd(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """The float64 sum in tap order of the zero-padded input, divided by the cells each
    window counts (a window counting none is 0), rounded once."""
    x = xs[0]
    g = _pool_geometry("avg_pool_nd", attrs)
    out = g.concrete_out(x.shape[2:])
    if int(np.prod(x.shape[:2] + out)) == 0:
        return np.zeros(x.shape[:2] + out, dtype=x.dtype)
    total = _window_sum(g, g.padded(x, out, 0, np.float64), out)
    count = _counted(g, x.shape[2:], out, bool(attrs["count_include_pad"]))
    with np.errstate(all="ignore"):
        y = np.where(count > 0, total / np.maximum(count, 1.0), 0.0)
    return as_contiguous(y, x.dtype)


def _lp_pool_nd(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """(sum over the window of |x| ** p) ** (1 / p) in float64 (padding counts as 0)."""
    x = xs[0]
    g = _pool_geometry("lp_pool_nd", attrs)
    out = g.concrete_out(x.shape[2:])
    p = float(attrs["p"])
    if int(np.prod(x.shape[:2] + out)) == 0:
        return np.zeros(x.shape[:2] + out, dtype=x.dtype)
    with np.errstate(all="ignore"):
        powered = _lp_power(np.abs(x.astype(np.float64)), p)
        total = _window_sum(g, g.padded(powered, out, 0, np.float64), out)
        y = np.sqrt(total) if p == 2.0 else (total if p == 1.0 else total ** (1.0 / p))
    return as_contiguous(y, x.dtype)


def _lp_power(a: np.ndarray, p: float) -> np.ndarray:
    if p == 1.0:
        return a
    if p == 2.0:
        return a * a
    return a**p


# -- normalizations --------------------------------------------------------------------


def _infer_group_norm(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    ts = tensors(inputs, "group_norm")
    x = ts[0]
    dtype = same_dtype(ts, "group_norm")
    require_float_math(dtype, "group_norm")
    if x.ndim < 2:
        raise OpError(f"group_norm: x must have rank 2 or more (N, C, ...), got {sstr(x.shape)}")
    groups = attrs["num_groups"]
    if groups < 1:
        raise OpError(f"group_norm: num_groups must be positive, got {groups}")
    c = x.shape[1]
    if isinstance(c, int) and c % groups:
        raise OpError(f"group_norm: {c} channels are not divisible by num_groups={groups}")
    for name, t in zip(("scale", "bias"), ts[1:]):
        if t.ndim != 1:
            raise OpError(f"group_norm: {name} must have rank 1 (C,), got {sstr(t.shape)}")
        require_dims_equal(t.shape[0], c, "group_norm", f"length of {name} and x's channels")
    return x


def _group_norm(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """Per image and group of C/G channels: (x - mean) / sqrt(var + eps) in float64 over the
    group's channels and positions, then * scale + bias per channel; rounded once."""
    x, scale, bias = xs
    n, c = x.shape[:2]
    groups = attrs["num_groups"]
    x64 = x.astype(np.float64).reshape(n, groups, c // groups * int(np.prod(x.shape[2:])))
    with np.errstate(all="ignore"):
        mean = quiet_mean(x64, 2, True)
        var = quiet_mean((x64 - mean) ** 2, 2, True)
        y = ((x64 - mean) / np.sqrt(var + attrs["epsilon"])).reshape(x.shape)
        shape = (1, c) + (1,) * (x.ndim - 2)
        y = y * scale.astype(np.float64).reshape(shape) + bias.astype(np.float64).reshape(shape)
    return as_contiguous(y, x.dtype)


def _infer_axes_norm(op: str) -> InferFn:
    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        (x,) = tensors(inputs, op)
        require_float_math(x.dtype, op)
        norm_axes(attrs["axes"], x.ndim, op)
        return x

    return infer


def _mean_variance_norm(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) over ``axes``, in float64."""
    x = xs[0]
    axes = norm_axes(attrs["axes"], x.ndim, "mean_variance_norm")
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        mean = quiet_mean(x64, axes, True)
        var = quiet_mean((x64 - mean) ** 2, axes, True)
        y = (x64 - mean) / np.sqrt(var + attrs["epsilon"])
    return as_contiguous(y, x.dtype)


def _infer_inv_std_dev(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "inv_std_dev")
    require_float_math(x.dtype, "inv_std_dev")
    axes = norm_axes(attrs["axes"], x.ndim, "inv_std_dev")
    shape = tuple(
        1 if i in axes else d for i, d in enumerate(x.shape) if attrs["keepdims"] or i not in axes
    )
    return TensorType(shape, x.dtype)


def _inv_std_dev(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """1 / sqrt(var + eps) over ``axes`` (the population variance), in float64."""
    x = xs[0]
    axes = norm_axes(attrs["axes"], x.ndim, "inv_std_dev")
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        mean = quiet_mean(x64, axes, True)
        var = quiet_mean((x64 - mean) ** 2, axes, bool(attrs["keepdims"]))
        y = 1.0 / np.sqrt(var + attrs["epsilon"])
    return as_contiguous(y, x.dtype)


# -- registration ----------------------------------------------------------------------


def _window_attrs() -> tuple[AttrSpec, ...]:
    return (
        AttrSpec("strides", "ints", (1,), "per spatial axis, or one for all"),
        AttrSpec(
            "padding", "pad", (0,), "beginnings then ends per spatial axis (or 1 or r values)"
        ),
        AttrSpec("dilation", "ints", (1,), "per spatial axis, or one for all"),
    )


def _reg_pool(
    reg: Registry,
    name: str,
    summary: str,
    kernel: Any,
    extra: tuple[AttrSpec, ...],
    infer: InferFn | None = None,
) -> None:
    reg.register(
        OpDef(
            name,
            summary,
            "kernel",
            infer or _pool_infer(name),
            family="pooling",
            kernel=kernel,
            input_names=("data",),
            float_only=name not in ("max_pool_nd", "max_pool_indices"),
            attrs=(
                AttrSpec("pool_size", "ints", doc="the window, per spatial axis"),
                *_window_attrs(),
                AttrSpec("ceil_mode", "bool", False, "round the output size up (PyTorch rule)"),
                *extra,
            ),
        )
    )


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "conv_nd",
            "convolution over any number of spatial axes: data (N, C, S...), weight "
            "(O, C/groups, K...) (+ bias (O,))",
            "kernel",
            _infer_conv_nd,
            family="matmul",
            min_inputs=2,
            max_inputs=3,
            kernel=_conv_nd,
            input_names=("data", "weight", "bias"),
            attrs=(*_window_attrs(), AttrSpec("groups", "int", 1, "channel groups")),
        )
    )
    _reg_pool(reg, "max_pool_nd", "max pooling over N, C, S... (padding is -inf)", _max_pool_nd, ())
    _reg_pool(
        reg,
        "max_pool_indices",
        "the flat input index of each max-pooling window's maximum (int64; ONNX MaxPool's Indices)",
        _max_pool_indices,
        (AttrSpec("storage_order", "int", 0, "0: row-major, 1: column-major spatial index"),),
        _infer_max_pool_indices,
    )
    _reg_pool(
        reg,
        "avg_pool_nd",
        "average pooling over N, C, S...",
        _avg_pool_nd,
        (AttrSpec("count_include_pad", "bool", False, "count padding cells in the divisor"),),
    )
    _reg_pool(
        reg,
        "lp_pool_nd",
        "(sum of |x| ** p over the window) ** (1 / p) over N, C, S... (padding is 0)",
        _lp_pool_nd,
        (AttrSpec("p", "float", 2.0, "the norm's exponent"),),
    )
    reg.register(
        OpDef(
            "group_norm",
            "normalize each group of C/num_groups channels of each image to zero mean, unit "
            "variance, then * scale + bias per channel",
            "kernel",
            _infer_group_norm,
            family="normalization",
            min_inputs=3,
            max_inputs=3,
            kernel=_group_norm,
            input_names=("x", "scale", "bias"),
            inplace=(0,),
            float_only=True,
            attrs=(
                AttrSpec("num_groups", "int", doc="groups of channels (C for instance norm)"),
                AttrSpec("epsilon", "float", 1e-5, "added to the variance"),
            ),
        )
    )
    reg.register(
        OpDef(
            "mean_variance_norm",
            "(x - mean) / sqrt(var + epsilon) over axes",
            "kernel",
            _infer_axes_norm("mean_variance_norm"),
            family="normalization",
            kernel=_mean_variance_norm,
            input_names=("x",),
            inplace=(0,),
            float_only=True,
            attrs=(
                AttrSpec("axes", "axes", (0, 2, 3), "the axes the statistics are over"),
                AttrSpec("epsilon", "float", 1e-9, "added to the variance"),
            ),
        )
    )
    reg.register(
        OpDef(
            "inv_std_dev",
            "1 / sqrt(var + epsilon) over axes (layer norm's InvStdDev)",
            "kernel",
            _infer_inv_std_dev,
            family="reduction",
            kernel=_inv_std_dev,
            input_names=("x",),
            float_only=True,
            attrs=(
                AttrSpec("axes", "axes", None, "axes to reduce (absent: all)"),
                AttrSpec("epsilon", "float", 1e-5, "added to the variance"),
                AttrSpec("keepdims", "bool", True, "keep reduced axes with length 1"),
            ),
        )
    )


__all__ = ["Geometry", "pads_of", "per_axis", "register_all"]

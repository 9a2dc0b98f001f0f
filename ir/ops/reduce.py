"""Reductions over axes (``axes`` absent means every axis): sum, mean, max, min, prod,
sum_square, l1_norm, l2_norm, log_sum and log_sum_exp.

Floats accumulate in float64 and are cast back; integers accumulate in wrapping 64-bit
integers (the result wraps to the input dtype). A reduction over an empty set of elements
(an axis of length 0) gives the identity of its operation, as ONNX does: 0 for the sums and
norms, 1 for prod, -inf for max, log_sum and log_sum_exp, +inf for min (the dtype's lowest
and highest values for integers); mean of nothing is nan.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from relaxc.ir.registry import AttrSpec, InferFn, KernelFn, OpDef, Registry
from relaxc.ir.types import TensorType, Type

from .checks import accumulate_dtype, as_contiguous, quiet_mean, require_float_math, require_numeric
from .common import norm_axes, require_computable, tensors


def reduced_type(
    x: TensorType, axes: tuple[int, ...] | None, keepdims: bool, op: str
) -> TensorType:
    """The type of reducing ``x`` over ``axes`` (normalized by :func:`norm_axes`)."""
    red = set(norm_axes(axes, x.ndim, op))
    if keepdims:
        shape = tuple(1 if i in red else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in red)
    return TensorType(shape, x.dtype)


def _reduce_infer(name: str, check: Callable[[str, str], None]) -> InferFn:
    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        (x,) = tensors(inputs, name)
        check(x.dtype, name)
        return reduced_type(x, attrs["axes"], attrs["keepdims"], name)

    return infer


def _axes(x: np.ndarray, attrs: Mapping[str, Any]) -> tuple[int, ...]:
    return norm_axes(attrs["axes"], x.ndim, "reduce")


def _wide(x: np.ndarray) -> np.ndarray:
    """``x`` in its accumulation dtype (float64, int64 or uint64; bool counts as int64)."""
    return x.astype(accumulate_dtype(x.dtype))


def _sum_of(a: np.ndarray, x: np.ndarray, attrs: Mapping[str, Any]) -> np.ndarray:
    """The sum of ``a`` (``x`` widened and mapped) over the axes, cast to ``x``'s dtype."""
    with np.errstate(all="ignore"):
        acc = np.sum(a, axis=_axes(x, attrs), keepdims=attrs["keepdims"])
        return as_contiguous(acc, x.dtype)


def _sum(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return _sum_of(_wide(xs[0]), xs[0], attrs)


def _sum_square(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    w = _wide(xs[0])
    with np.errstate(all="ignore"):
        return _sum_of(w * w, xs[0], attrs)


def _l1_norm(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    w = _wide(xs[0])
    with np.errstate(all="ignore"):
        return _sum_of(w if w.dtype.kind == "u" else np.abs(w), xs[0], attrs)


def _float_of(x: np.ndarray, acc: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return as_contiguous(acc, x.dtype)


def _l2_norm(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    w = xs[0].astype(np.float64)
    acc = np.sum(w * w, axis=_axes(xs[0], attrs), keepdims=attrs["keepdims"])
    return _float_of(xs[0], np.sqrt(acc))


def _log_sum(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    acc = np.sum(xs[0].astype(np.float64), axis=_axes(xs[0], attrs), keepdims=attrs["keepdims"])
    with np.errstate(all="ignore"):
        return _float_of(xs[0], np.log(acc))


def _log_sum_exp(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """``m + log(sum(exp(x - m)))`` with ``m`` the maximum (0 where it is not finite, so a
    row of -inf gives -inf, one holding +inf gives +inf, and nan stays nan)."""
    x = xs[0].astype(np.float64)
    axes = _axes(xs[0], attrs)
    with np.errstate(all="ignore"):
        m = _extreme(x, axes, True, np.max)
        shift = np.where(np.isfinite(m), m, 0.0)
        acc = np.sum(np.exp(x - shift), axis=axes, keepdims=True)
        out = np.log(acc) + shift
    if not attrs["keepdims"]:
        out = np.squeeze(out, axis=axes)
    return _float_of(xs[0], out)


def _mean(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    with np.errstate(all="ignore"):
        acc = quiet_mean(x.astype(np.float64), _axes(x, attrs), attrs["keepdims"])
    return as_contiguous(acc, x.dtype)


def _prod(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    with np.errstate(all="ignore"):
        acc = np.prod(_wide(xs[0]), axis=_axes(xs[0], attrs), keepdims=attrs["keepdims"])
        return as_contiguous(acc, xs[0].dtype)


def identity_of(dt: np.dtype, largest: bool) -> Any:
    """The identity of max (``largest``) or min on dtype ``dt``: the value every other one
    beats (-inf / +inf for floats, the dtype's extremes for integers)."""
    if dt.kind == "f":
        return -np.inf if largest else np.inf
    if dt.kind == "b":
        return not largest
    info = np.iinfo(dt)
    return info.min if largest else info.max


def _extreme(
    x: np.ndarray, axes: tuple[int, ...], keepdims: bool, fn: Callable[..., Any]
) -> np.ndarray:
    """``fn`` (np.max or np.min) over ``axes``; an empty set gives the identity."""
    if any(x.shape[a] == 0 for a in axes):
        shape = tuple((1 if keepdims else None) if i in axes else d for i, d in enumerate(x.shape))
        kept = tuple(d for d in shape if d is not None)
        return np.full(kept, identity_of(x.dtype, fn is np.max), dtype=x.dtype)
    return np.asarray(fn(x, axis=axes, keepdims=keepdims))


def _max(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    return as_contiguous(_extreme(x, _axes(x, attrs), attrs["keepdims"], np.max), x.dtype)


def _min(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    return as_contiguous(_extreme(x, _axes(x, attrs), attrs["keepdims"], np.min), x.dtype)


def _attrs() -> tuple[AttrSpec, ...]:
    return (
        AttrSpec("axes", "axes", None, "axes to reduce (absent: all)"),
        AttrSpec("keepdims", "bool", False, "keep reduced axes with length 1"),
    )


REDUCTIONS: tuple[tuple[str, str, Callable[[str, str], None], KernelFn], ...] = (
    ("sum", "sum over axes (integers wrap to the input dtype)", require_numeric, _sum),
    ("mean", "arithmetic mean over axes (floating-point only)", require_float_math, _mean),
    (
        "max",
        "maximum over axes (a reduction; see maximum for the binary op); -inf of nothing",
        require_computable,
        _max,
    ),
    (
        "min",
        "minimum over axes (a reduction; see minimum for the binary op); +inf of nothing",
        require_computable,
        _min,
    ),
    ("prod", "product over axes (integers wrap to the input dtype)", require_numeric, _prod),
    ("sum_square", "sum of squares over axes (integers wrap)", require_numeric, _sum_square),
    ("l1_norm", "sum of absolute values over axes (integers wrap)", require_numeric, _l1_norm),
    ("l2_norm", "sqrt of the sum of squares over axes", require_float_math, _l2_norm),
    ("log_sum", "log of the sum over axes", require_float_math, _log_sum),
    (
        "log_sum_exp",
        "log of the sum of exp over axes, shifted by the maximum (stable)",
        require_float_math,
        _log_sum_exp,
    ),
)
"""(name, summary, dtype check, kernel) of each reduction."""


def register_all(reg: Registry) -> None:
    for name, summary, check, fn in REDUCTIONS:
        reg.register(
            OpDef(
                name,
                summary,
                "kernel",
                _reduce_infer(name, check),
                family="reduction",
                kernel=fn,
                attrs=_attrs(),
                input_names=("x",),
                float_only=check is require_float_math,
            )
        )


__all__ = ["REDUCTIONS", "identity_of", "reduced_type", "register_all"]

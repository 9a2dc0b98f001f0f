"""Reductions over axes: sum, mean and max (``axes`` absent means every axis)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from relaxc.ir.registry import AttrSpec, InferFn, OpDef, OpError, Registry
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
        if name == "max":
            for i in norm_axes(attrs["axes"], x.ndim, name):
                if x.shape[i] == 0:
                    raise OpError(
                        f"max: axis {i} has length 0 and a maximum of nothing is undefined"
                    )
        return reduced_type(x, attrs["axes"], attrs["keepdims"], name)

    return infer


def _axes(x: np.ndarray, attrs: Mapping[str, Any]) -> tuple[int, ...]:
    return norm_axes(attrs["axes"], x.ndim, "reduce")


def _sum(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    acc = np.sum(
        x, axis=_axes(x, attrs), dtype=accumulate_dtype(x.dtype), keepdims=attrs["keepdims"]
    )
    with np.errstate(all="ignore"):
        return as_contiguous(acc, x.dtype)


def _mean(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    with np.errstate(all="ignore"):
        acc = quiet_mean(x.astype(np.float64), _axes(x, attrs), attrs["keepdims"])
    return as_contiguous(acc, x.dtype)


def _max(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    for i in _axes(x, attrs):
        if (
            x.shape[i] == 0
        ):  # a symbolic length that is 0 in this run (static 0 is refused by infer)
            raise OpError(f"max: axis {i} has length 0 and a maximum of nothing is undefined")
    return as_contiguous(np.max(x, axis=_axes(x, attrs), keepdims=attrs["keepdims"]), x.dtype)


def _attrs() -> tuple[AttrSpec, ...]:
    return (
        AttrSpec("axes", "axes", None, "axes to reduce (absent: all)"),
        AttrSpec("keepdims", "bool", False, "keep reduced axes with length 1"),
    )


def register_all(reg: Registry) -> None:
    for name, summary, check, fn in (
        ("sum", "sum over axes (integers wrap to the input dtype)", require_numeric, _sum),
        ("mean", "arithmetic mean over axes (floating-point only)", require_float_math, _mean),
        (
            "max",
            "maximum over axes (a reduction; see maximum for the binary op)",
            require_computable,
            _max,
        ),
    ):
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
                float_only=name == "mean",
            )
        )


__all__ = ["reduced_type", "register_all"]

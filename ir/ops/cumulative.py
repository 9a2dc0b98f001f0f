"""Running totals along one axis: cumsum (ONNX CumSum) and cumprod (ONNX CumProd), each
inclusive or exclusive (the identity first), forward or reverse. Floats accumulate in
float64 and each output is rounded once; integers wrap in their own width."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir.registry import AttrSpec, InferFn, KernelFn, OpDef, OpError, Registry
from relaxc.ir.types import DTYPES, Type

from .checks import as_contiguous
from .common import norm_axis, require_computable, tensors

CUMULATIVE_OPS = ("cumsum", "cumprod")


def _cumulative_infer(op: str) -> InferFn:
    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        (x,) = tensors(inputs, op)
        require_computable(x.dtype, op)
        if DTYPES[x.dtype].kind not in ("float", "int", "uint"):
            raise OpError(f"{op}: needs a number tensor, got {x.dtype}")
        if x.ndim == 0:
            raise OpError(f"{op}: input must have rank at least 1")
        norm_axis(attrs["axis"], x.ndim, op)
        return x

    return infer


def _cumulative_kernel(product: bool) -> KernelFn:
    def kernel(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        x = xs[0]
        axis = norm_axis(attrs["axis"], x.ndim, "cumprod" if product else "cumsum")
        acc_dtype = np.float64 if x.dtype.kind == "f" else x.dtype
        v = np.flip(x, axis) if attrs["reverse"] else x
        run = np.cumprod if product else np.cumsum
        with np.errstate(all="ignore"):
            y = run(v.astype(acc_dtype), axis=axis, dtype=acc_dtype)
        if attrs["exclusive"] and x.shape[axis] > 0:
            first = np.full_like(np.take(y, [0], axis=axis), 1 if product else 0)
            y = np.concatenate([first, np.take(y, range(x.shape[axis] - 1), axis=axis)], axis)
        if attrs["reverse"]:
            y = np.flip(y, axis)
        return as_contiguous(y, x.dtype)

    return kernel


def register_all(reg: Registry) -> None:
    for name, product in (("cumsum", False), ("cumprod", True)):
        what = "product" if product else "sum"
        reg.register(
            OpDef(
                name,
                f"the running {what} along axis (exclusive: of the elements before; reverse: "
                "from the end)",
                "kernel",
                _cumulative_infer(name),
                family="reduction",
                kernel=_cumulative_kernel(product),
                input_names=("x",),
                inplace=(0,),
                attrs=(
                    AttrSpec("axis", "int", 0, "the axis accumulated along"),
                    AttrSpec("exclusive", "bool", False, f"each output the {what} of those before"),
                    AttrSpec("reverse", "bool", False, "accumulate from the end of the axis"),
                ),
            )
        )

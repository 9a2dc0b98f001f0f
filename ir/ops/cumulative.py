"""Running totals along one axis: cumsum (ONNX CumSum) and cumprod (ONNX CumProd), each
inclusive or exclusive (the identity first), forward or reverse. Floats accumulate in
float64 and each output is rounded once; integers wrap in their own width.

topk_indices (ONNX TopK's indices; its values are gather_elements of them): the i64
indices of the k largest (or smallest) elements along axis, best first, ties by the lower
index, NaN ranked after every number."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir.registry import AttrSpec, InferFn, KernelFn, OpDef, OpError, Registry
from relaxc.ir import dims as D
from relaxc.ir.types import DTYPES, TensorType, Type

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


def _infer_topk_indices(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "topk_indices")
    require_computable(x.dtype, "topk_indices")
    if DTYPES[x.dtype].kind not in ("float", "int", "uint"):
        raise OpError(f"topk_indices: needs a number tensor, got {x.dtype}")
    if x.ndim == 0:
        raise OpError("topk_indices: input must have rank at least 1")
    axis = norm_axis(attrs["axis"], x.ndim, "topk_indices")
    k, length = attrs["k"], x.shape[axis]
    if k < 0 or (isinstance(length, int) and k > length):
        raise OpError(f"topk_indices: k {k} is not in [0, {D.dim_to_str(length)}]")
    shape = list(x.shape)
    shape[axis] = k
    return TensorType(tuple(shape), "i64")


def _topk_indices(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    axis = norm_axis(attrs["axis"], x.ndim, "topk_indices")
    if x.shape[axis] < attrs["k"]:
        raise OpError(f"topk_indices: k {attrs['k']} is more than the axis length {x.shape[axis]}")
    if x.dtype.kind == "f":
        key = -x.astype(np.float64) if attrs["largest"] else x.astype(np.float64)
    else:
        key = np.invert(x) if attrs["largest"] else x  # ~ reverses the order exactly
    order = np.argsort(key, axis=axis, kind="stable")  # NaN last, ties by index
    return np.ascontiguousarray(np.take(order, range(attrs["k"]), axis=axis), dtype=np.int64)


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "topk_indices",
            "the i64 indices of the k largest (or smallest) along axis, best first, ties by "
            "the lower index, NaN last",
            "kernel",
            _infer_topk_indices,
            family="reduction",
            kernel=_topk_indices,
            input_names=("x",),
            attrs=(
                AttrSpec("k", "int", doc="how many"),
                AttrSpec("axis", "int", -1, "the axis searched"),
                AttrSpec("largest", "bool", True, "the largest (else the smallest)"),
            ),
        )
    )
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

"""bitcast (ONNX BitCast): the bits of each element read as another type of the same width
(numpy's ``view``), e.g. f32 <-> i32, f16 <-> u16, i8 <-> u8, bool -> u8. A bool output is
refused for anything but a bool input: a byte other than 0 and 1 is no bool."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir.registry import AttrSpec, OpDef, OpError, Registry
from relaxc.ir.types import DTYPES, TensorType, Type

from .checks import as_contiguous
from .common import np_dtype, require_computable, tensors


def _infer_bitcast(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "bitcast")
    target = str(attrs["dtype"])
    require_computable(x.dtype, "bitcast")
    require_computable(target, "bitcast")
    if DTYPES[x.dtype].nbytes != DTYPES[target].nbytes:
        raise OpError(
            f"bitcast: {x.dtype} ({8 * DTYPES[x.dtype].nbytes} bits) and {target} "
            f"({8 * DTYPES[target].nbytes} bits) differ in width"
        )
    if target == "bool" and x.dtype != "bool":
        raise OpError(f"bitcast: {x.dtype} to bool: a byte other than 0 and 1 is no bool")
    return TensorType(x.shape, target)


def _bitcast(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    target = np_dtype(str(attrs["dtype"]))
    return as_contiguous(as_contiguous(xs[0], xs[0].dtype).view(target), target)


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "bitcast",
            "the bits of each element of x read as dtype, of the same width (numpy's view)",
            "kernel",
            _infer_bitcast,
            family="data movement",
            kernel=_bitcast,
            input_names=("x",),
            attrs=(AttrSpec("dtype", "dtype", doc="the type read, of x's width"),),
        )
    )

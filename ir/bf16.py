"""bfloat16 computed through float32, when ml_dtypes gives numpy the type.

numpy has no bfloat16 of its own; ml_dtypes (an optional dependency: the ``onnx`` extra)
registers one, but its arrays are of kind ``V`` and einsum, tensordot-based convolution and
most reductions do not take them. So a kernel never sees a bf16 array: :func:`via_f32` widens
every bf16 input to float32 (exact), runs the op's float32 kernel, and rounds each float32
result back to bf16 (round to nearest even, as onnxruntime and the C backend's converters
do). An op with a ``dtype`` attribute (cast and the like) chooses its output dtype itself, so
its results are left as the kernel made them. One rounding per op, as C computes bf16 per
element in float: the interpreter, the VM and C agree bit for bit on elementwise ops.
"""

from __future__ import annotations

from functools import wraps
from typing import Any, Callable, Mapping, Sequence

import numpy as np

try:
    import ml_dtypes

    BF16: np.dtype | None = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes comes with onnx
    BF16 = None

Kernel = Callable[[Sequence[np.ndarray], Mapping[str, Any]], Any]
Into = Callable[[Sequence[np.ndarray], Mapping[str, Any], np.ndarray], bool]


def available() -> bool:
    """Whether numpy has a bfloat16 (ml_dtypes is installed)."""
    return BF16 is not None


def is_bf16(x: object) -> bool:
    return BF16 is not None and isinstance(x, np.ndarray) and x.dtype == BF16


def _round_back(result: Any) -> Any:
    if isinstance(result, np.ndarray) and result.dtype == np.float32:
        return result.astype(BF16)
    if isinstance(result, np.float32):  # a ufunc of 0-D arrays gives a scalar
        return np.asarray(result).astype(BF16)
    if isinstance(result, tuple):
        return tuple(_round_back(r) for r in result)
    if isinstance(result, list):
        return [_round_back(r) for r in result]
    return result


def via_f32(kernel: Kernel) -> Kernel:
    """``kernel``, taking bf16 inputs by computing in float32 and rounding back to bf16."""

    @wraps(kernel)
    def run(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> Any:
        if not any(is_bf16(x) for x in inputs):
            return kernel(inputs, attrs)
        widened = [x.astype(np.float32) if is_bf16(x) else x for x in inputs]
        result = kernel(widened, attrs)
        return result if "dtype" in attrs else _round_back(result)

    return run


def into_declining_bf16(into: Into) -> Into:
    """``into``, declining (returning False) whenever an input or the output is bf16."""

    @wraps(into)
    def run(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], out: np.ndarray) -> bool:
        if is_bf16(out) or any(is_bf16(x) for x in inputs):
            return False
        return into(inputs, attrs, out)

    return run

"""bfloat16, when ml_dtypes gives numpy the type.

numpy has no bfloat16 of its own; ml_dtypes (an optional dependency: the ``onnx`` extra)
registers one. Kernels compute it through float32 as they do the low-precision types
(ir/lowp.py: each bf16 input widened exactly, one rounding back to nearest even per op, so
the interpreter, the VM and C agree bit for bit on elementwise ops); this module says
whether the type is there.
"""

from __future__ import annotations

import numpy as np

from .lowp import into_declining_narrow, via_wider

try:
    import ml_dtypes

    BF16: np.dtype | None = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes comes with onnx
    BF16 = None

via_f32 = via_wider
"""A kernel taking bf16 (and the low-precision types) through a wider type."""
into_declining_bf16 = into_declining_narrow
"""A ``kernel_into`` declining bf16 (and the low-precision types)."""


def available() -> bool:
    """Whether numpy has a bfloat16 (ml_dtypes is installed)."""
    return BF16 is not None


def is_bf16(x: object) -> bool:
    return BF16 is not None and isinstance(x, np.ndarray) and x.dtype == BF16

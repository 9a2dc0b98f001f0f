"""bf16 computed through float32 (ir/bf16.py) when ml_dtypes gives numpy the type."""

from __future__ import annotations

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

from relaxc.ir import bf16  # noqa: E402
from relaxc.ir.ops import REGISTRY  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


def test_add_of_bf16_is_bf16_rounded_once() -> None:
    a = np.array([1.0, 2.5, -3.0], np.float32).astype(BF16)
    b = np.array([0.00390625, 0.5, 1.0], np.float32).astype(BF16)
    out = REGISTRY.get("add").kernel([a, b], {})  # type: ignore[union-attr, misc]
    assert out.dtype == BF16
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(BF16)
    np.testing.assert_array_equal(out.astype(np.float32), want.astype(np.float32))


def test_a_binary_op_of_0d_bf16_is_a_0d_bf16_array() -> None:
    """numpy's ufuncs give a scalar for 0-D operands; it is rounded back all the same."""
    a = np.array(1.0, np.float32).astype(BF16)
    b = np.array(3.0, np.float32).astype(BF16)
    out = REGISTRY.get("divide").kernel([a, b], {})  # type: ignore[union-attr, misc]
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == BF16
    assert float(out.astype(np.float32)) == float(np.float32(1 / 3).astype(BF16))


def test_matmul_of_bf16_is_bf16() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3).astype(BF16)
    b = np.ones((3, 2), np.float32).astype(BF16)
    out = REGISTRY.get("matmul").kernel([a, b], {})  # type: ignore[union-attr, misc]
    assert out.dtype == BF16
    np.testing.assert_array_equal(out.astype(np.float32), [[3, 3], [12, 12]])


def test_into_declines_bf16() -> None:
    calls: list[int] = []

    def into(xs: object, attrs: object, out: np.ndarray) -> bool:
        calls.append(1)
        return True

    wrapped = bf16.into_declining_bf16(into)
    x = np.zeros(2, BF16)
    assert wrapped([x], {}, np.zeros(2, BF16)) is False
    assert not calls

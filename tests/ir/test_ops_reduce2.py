"""The ops of the second reduction family (log_softmax; and the compositions the ONNX
converters build for Hardmax): inference and numpy kernels."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from relaxc.ir import dims as D
from relaxc.ir.nodes import Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import TensorType, Type

n = D.Sym("n")


def T(shape: Sequence[Any], dtype: str = "f32") -> TensorType:
    return TensorType(tuple(shape), dtype)


def infer(name: str, types: Sequence[Type], **attrs: Any) -> Type:
    op = REGISTRY.get(name)
    assert op is not None
    bound = bind_args(op, [Var(f"x{i}") for i in range(len(types))], list(attrs.items()))
    return op.infer(list(types), bound.attrs)


def kernel(name: str, xs: Sequence[np.ndarray], **attrs: Any) -> Any:
    op = REGISTRY.get(name)
    assert op is not None and op.kernel is not None
    bound = bind_args(op, [Var(f"x{i}") for i in range(len(xs))], list(attrs.items()))
    return op.kernel(list(xs), bound.attrs)


# -- log_softmax ---------------------------------------------------------------------------


def test_log_softmax_infers_x_type_and_checks_its_axis_and_dtype() -> None:
    assert infer("log_softmax", [T((n, 5))]) == T((n, 5))
    assert infer("log_softmax", [T((2, 5), "f16")], axis=0) == T((2, 5), "f16")
    with pytest.raises(OpError, match="log_softmax: axis 2 is out of range"):
        infer("log_softmax", [T((n, 5))], axis=2)
    with pytest.raises(OpError, match="log_softmax: needs a floating-point tensor, got i64"):
        infer("log_softmax", [T((2,), "i64")])
    with pytest.raises(OpError, match="log_softmax: input must have rank at least 1"):
        infer("log_softmax", [T(())])


def test_log_softmax_record() -> None:
    op = REGISTRY.get("log_softmax")
    assert op is not None
    assert op.inplace == (0,) and op.float_only and op.family == "normalization"


def test_log_softmax_is_stable_for_large_inputs() -> None:
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0]], np.float32)
    y = kernel("log_softmax", [x], axis=1)
    want = np.array([0.0, 1.0, 2.0]) - np.log(np.exp([0.0, 1.0, 2.0]).sum())
    assert y.dtype == np.float32
    np.testing.assert_allclose(y[0], want, rtol=1e-6)
    np.testing.assert_allclose(y[1], want[::-1], rtol=1e-6)


def test_log_softmax_of_an_empty_tensor_is_empty() -> None:
    y = kernel("log_softmax", [np.zeros((0, 3), np.float32)], axis=1)
    assert y.shape == (0, 3)


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
        elements=st.floats(-50, 50),
    ),
    st.integers(0, 2),
)
def test_log_softmax_is_the_log_of_softmax(x: np.ndarray, axis: int) -> None:
    axis %= x.ndim
    y = kernel("log_softmax", [x], axis=axis)
    s = kernel("softmax", [x], axis=axis)
    np.testing.assert_allclose(np.exp(y), s, rtol=1e-9, atol=1e-300)
    # the exp of each row sums to 1 and no entry is positive
    np.testing.assert_allclose(np.exp(y).sum(axis=axis), 1.0, rtol=1e-9)
    assert (y <= 1e-12).all()

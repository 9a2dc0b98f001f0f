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


# -- cumsum / cumprod ----------------------------------------------------------------------


def test_cumulative_ops_infer_x_type_and_check_it() -> None:
    for op in ("cumsum", "cumprod"):
        assert infer(op, [T((n, 5), "i32")], axis=1) == T((n, 5), "i32")
        with pytest.raises(OpError, match=f"{op}: axis 2 is out of range"):
            infer(op, [T((n, 5))], axis=2)
        with pytest.raises(OpError, match=f"{op}: needs a number tensor, got bool"):
            infer(op, [T((2,), "bool")])
        with pytest.raises(OpError, match=f"{op}: input must have rank at least 1"):
            infer(op, [T(())])


@pytest.mark.parametrize(
    ("exclusive", "reverse", "sums", "products"),
    [
        (False, False, [1, 3, 6, 10], [1, 2, 6, 24]),
        (True, False, [0, 1, 3, 6], [1, 1, 2, 6]),
        (False, True, [10, 9, 7, 4], [24, 24, 12, 4]),
        (True, True, [9, 7, 4, 0], [24, 12, 4, 1]),
    ],
)
def test_cumulative_modes(exclusive: bool, reverse: bool, sums: list, products: list) -> None:
    x = np.array([1, 2, 3, 4], np.int32)
    modes = {"axis": 0, "exclusive": exclusive, "reverse": reverse}
    s = kernel("cumsum", [x], **modes)
    p = kernel("cumprod", [x.astype(np.float32)], **modes)
    assert s.dtype == np.int32 and p.dtype == np.float32
    assert s.tolist() == sums and p.tolist() == products


def test_integer_cumsum_wraps_in_its_width() -> None:
    x = np.array([2**31 - 1, 1, 1], np.int32)
    assert kernel("cumsum", [x], axis=0).tolist() == [2**31 - 1, -(2**31), -(2**31) + 1]


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        np.int64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=st.integers(-9, 9)
    ),
    st.integers(0, 2),
    st.booleans(),
    st.booleans(),
)
def test_cumsum_is_a_sum_of_a_range(
    x: np.ndarray, axis: int, exclusive: bool, reverse: bool
) -> None:
    axis %= x.ndim
    y = kernel("cumsum", [x], axis=axis, exclusive=exclusive, reverse=reverse)
    L = x.shape[axis]
    for j in range(L):
        lo, hi = (j + exclusive, L) if reverse else (0, j + 1 - exclusive)
        want = np.take(x, range(lo, hi), axis=axis).sum(axis=axis)
        np.testing.assert_array_equal(np.take(y, j, axis=axis), want)


def test_cumsum_and_cumprod_of_a_matrix_along_its_rows() -> None:
    x = np.array([[1.5, 2.0], [3.0, -1.0]], np.float64)
    # cumsum(x, axis=1) and cumprod(x, axis=0)
    assert kernel("cumsum", [x], axis=1).tolist() == [[1.5, 3.5], [3.0, 2.0]]
    assert kernel("cumprod", [x], axis=0).tolist() == [[1.5, 2.0], [4.5, -2.0]]


# -- topk_indices --------------------------------------------------------------------------


def test_topk_indices_infers_k_along_the_axis_and_checks_k() -> None:
    assert infer("topk_indices", [T((n, 5))], k=3, axis=1) == T((n, 3), "i64")
    assert infer("topk_indices", [T((n, 5), "u8")], k=0) == T((n, 0), "i64")
    with pytest.raises(OpError, match=r"topk_indices: k 6 is not in \[0, 5\]"):
        infer("topk_indices", [T((n, 5))], k=6)
    with pytest.raises(OpError, match="topk_indices: needs a number tensor, got bool"):
        infer("topk_indices", [T((5,), "bool")], k=1)


def test_topk_indices_breaks_ties_by_the_lower_index_and_ranks_nan_last() -> None:
    x = np.array([3.0, np.nan, 5.0, 3.0, 5.0, -1.0], np.float32)
    # topk_indices(x, k=6, largest=...)
    assert kernel("topk_indices", [x], k=6, largest=True).tolist() == [2, 4, 0, 3, 5, 1]
    assert kernel("topk_indices", [x], k=6, largest=False).tolist() == [5, 0, 3, 2, 4, 1]
    i = np.array([[-128, 127, 0, 127]], np.int8)
    assert kernel("topk_indices", [i], k=2, axis=1).tolist() == [[1, 3]]
    assert kernel("topk_indices", [i], k=2, axis=1, largest=False).tolist() == [[0, 2]]


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        np.int32, st.tuples(st.integers(1, 4), st.integers(1, 6)), elements=st.integers(-3, 3)
    ),
    st.booleans(),
)
def test_topk_values_are_the_sorted_ends(x: np.ndarray, largest: bool) -> None:
    k = x.shape[1] // 2 + 1
    idx = kernel("topk_indices", [x], k=k, axis=1, largest=largest)
    got = np.take_along_axis(x, idx, axis=1)
    s = np.sort(x, axis=1)
    np.testing.assert_array_equal(got, s[:, ::-1][:, :k] if largest else s[:, :k])
    assert all(len(set(row)) == k for row in idx.tolist())

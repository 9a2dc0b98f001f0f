"""The small ops of ONNX's leftovers (issue 30): bitcast (BitCast) and det (Det): inference
and numpy kernels."""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from relaxc.ir.nodes import DType
from relaxc.ir.registry import OpError

from .test_ops_reduce2 import T, infer, kernel, n


# -- bitcast -------------------------------------------------------------------------------


def test_bitcast_keeps_the_shape_and_needs_one_width() -> None:
    assert infer("bitcast", [T((n, 3))], dtype=DType("i32")) == T((n, 3), "i32")
    assert infer("bitcast", [T((2,), "bool")], dtype=DType("u8")) == T((2,), "u8")
    assert infer("bitcast", [T((), "u16")], dtype=DType("f16")) == T((), "f16")
    with pytest.raises(OpError, match=r"bitcast: f32 \(32 bits\) and i64 \(64 bits\) differ"):
        infer("bitcast", [T((2,))], dtype=DType("i64"))
    with pytest.raises(OpError, match="u8 to bool: a byte other than 0 and 1 is no bool"):
        infer("bitcast", [T((2,), "u8")], dtype=DType("bool"))


def test_bitcast_reads_the_bits() -> None:
    x = np.array([1.0, -2.0, 0.0, -0.0], np.float32)
    got = kernel("bitcast", [x], dtype=DType("i32"))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [0x3F800000, -0x40000000, 0, -(2**31)])
    np.testing.assert_array_equal(
        kernel("bitcast", [np.array([-1, 127, -128], np.int8)], dtype=DType("u8")), [255, 127, 128]
    )
    np.testing.assert_array_equal(
        kernel("bitcast", [np.array([0x3C00], np.uint16)], dtype=DType("f16")), [1.0]
    )


@settings(max_examples=40, derandomize=True, deadline=None)
@given(hnp.arrays(np.int64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4)))
def test_bitcast_there_and_back_is_the_identity(x: np.ndarray) -> None:
    there = kernel("bitcast", [x], dtype=DType("f64"))
    back = kernel("bitcast", [there], dtype=DType("i64"))
    assert there.shape == x.shape and back.dtype == np.int64
    np.testing.assert_array_equal(back, x)


# -- det -----------------------------------------------------------------------------------


def test_det_infers_the_batch_shape() -> None:
    assert infer("det", [T((n, 3, 3))]) == T((n,))
    assert infer("det", [T((2, 2), "f16")]) == T((), "f16")
    with pytest.raises(OpError, match="det: the matrices must be square, got 2 x 3"):
        infer("det", [T((2, 3))])
    with pytest.raises(OpError, match="det: needs matrices"):
        infer("det", [T((3,))])
    with pytest.raises(OpError, match="det: needs a floating-point tensor"):
        infer("det", [T((2, 2), "i32")])


def test_det_of_known_matrices() -> None:
    x = np.array(
        [[[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 4.0]], [[0, 1, 0], [1, 0, 0], [0, 0, 1]]],
        np.float64,
    )
    np.testing.assert_array_equal(kernel("det", [x]), [24.0, -1.0])
    assert kernel("det", [np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)]) == 0
    assert kernel("det", [np.zeros((0, 0), np.float32)]) == 1  # the empty product


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(0, 3),
    st.integers(0, 2**31 - 1),
)
def test_det_is_numpys_determinant(size: int, batch: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((batch, size, size))
    got = kernel("det", [x])
    assert got.shape == (batch,) and got.dtype == np.float64
    np.testing.assert_allclose(got, np.linalg.det(x), rtol=1e-9, atol=1e-12)

"""The reduction and index-producing ops (ir/ops/reduce.py, ir/ops/scan.py): inference and
numpy kernels."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType, Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.ops.scan import range_length
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import TensorType, Type

W = D.Sym("W")


def T(shape: Sequence[Any], dtype: str = "f32") -> TensorType:
    return TensorType(tuple(shape), dtype)


def call(name: str, xs: Sequence[np.ndarray], **attrs: Any) -> tuple[Type, Any]:
    """The inferred type (from the arrays' types) and the kernel's result of ``name``."""
    op = REGISTRY.get(name)
    assert op is not None and op.kernel is not None
    bound = bind_args(op, [Var(f"x{i}") for i in range(len(xs))], list(attrs.items()))
    types = [T(x.shape, _dt(x.dtype)) for x in xs]
    return op.infer(types, bound.attrs), op.kernel(list(xs), bound.attrs)


def _dt(dt: np.dtype) -> str:
    from relaxc.ir.types import dtype_from_numpy

    name = dtype_from_numpy(dt)
    assert name is not None
    return name


# -- arange ------------------------------------------------------------------------------


def test_arange_counts_from_start_by_delta() -> None:
    t, y = call("arange", [], start=2, delta=3, length=4, dtype=DType("i32"))
    assert t == T((4,), "i32")
    assert y.dtype == np.int32 and y.tolist() == [2, 5, 8, 11]
    t, y = call("arange", [], start=1.0, delta=-0.5, length=3, dtype=DType("f32"))
    np.testing.assert_allclose(y, [1.0, 0.5, 0.0])


def test_arange_length_may_be_symbolic() -> None:
    op = REGISTRY.get("arange")
    assert op is not None
    bound = bind_args(op, [], [("start", 0), ("delta", 1), ("length", W)])
    assert op.infer([], bound.attrs) == T((W,), "i64")


def test_arange_refuses_fractions_for_integers_and_negative_lengths() -> None:
    with pytest.raises(OpError, match="must be integers"):
        call("arange", [], start=0.5, delta=1, length=2, dtype=DType("i64"))
    with pytest.raises(OpError, match="negative"):
        call("arange", [], start=0, delta=1, length=-1)
    with pytest.raises(OpError, match="not a number type"):
        call("arange", [], start=0, delta=1, length=1, dtype=DType("bool"))


@settings(max_examples=60, deadline=None)
@given(
    start=st.integers(-20, 20),
    limit=st.integers(-20, 20),
    delta=st.integers(-5, 5).filter(lambda d: d != 0),
    w=st.integers(0, 30),
)
def test_range_length_is_numpys_arange_length(start: int, limit: int, delta: int, w: int) -> None:
    """The symbolic length of Range(start, W + limit, delta), evaluated, is numpy's."""
    lim = D.add(W, limit)
    n = D.evaluate(range_length(start, lim, delta), {"W": w})
    assert n == len(np.arange(start, w + limit, delta))


# -- reductions --------------------------------------------------------------------------

REFERENCE = {
    "min": lambda w, ax: np.min(w, axis=ax, keepdims=True),
    "prod": lambda w, ax: np.prod(w, axis=ax, keepdims=True),
    "sum_square": lambda w, ax: np.sum(w * w, axis=ax, keepdims=True),
    "l1_norm": lambda w, ax: np.sum(np.abs(w), axis=ax, keepdims=True),
    "l2_norm": lambda w, ax: np.sqrt(np.sum(w * w, axis=ax, keepdims=True)),
    "log_sum": lambda w, ax: np.log(np.sum(w, axis=ax, keepdims=True)),
    "log_sum_exp": lambda w, ax: np.log(np.sum(np.exp(w), axis=ax, keepdims=True)),
}
"""Each new reduction written plainly in float64 (log_sum_exp without its shift: these
inputs are small)."""


@pytest.mark.parametrize("name", sorted(REFERENCE))
@pytest.mark.parametrize("axes, keepdims", [((1,), True), ((0, 2), False), (None, False)])
def test_reduction_matches_its_definition(name: str, axes: Any, keepdims: bool) -> None:
    x = np.random.default_rng(3).uniform(0.5, 2.0, size=(2, 3, 4)).astype(np.float32)
    t, y = call(name, [x], axes=axes, keepdims=keepdims)
    want = REFERENCE[name](x.astype(np.float64), axes if axes is not None else (0, 1, 2))
    if not keepdims:
        want = want.reshape(tuple(d for i, d in enumerate(x.shape) if axes and i not in axes))
    assert t == T(want.shape) and y.dtype == np.float32
    np.testing.assert_allclose(y, want, rtol=1e-6)


@pytest.mark.parametrize(
    "name, identity",
    [
        ("sum", 0.0),
        ("prod", 1.0),
        ("sum_square", 0.0),
        ("l1_norm", 0.0),
        ("l2_norm", 0.0),
        ("log_sum", -np.inf),
        ("log_sum_exp", -np.inf),
        ("max", -np.inf),
        ("min", np.inf),
    ],
)
def test_reducing_an_empty_set_gives_the_identity(name: str, identity: float) -> None:
    """ONNX's empty_set node tests: a reduction over an axis of length 0."""
    t, y = call(name, [np.zeros((2, 0, 4), np.float32)], axes=(1,), keepdims=True)
    assert t == T((2, 1, 4)) and y.shape == (2, 1, 4)
    assert (y == identity).all()


def test_integer_min_max_of_nothing_are_the_dtype_extremes() -> None:
    _, lo = call("min", [np.zeros((0, 2), np.int8)], axes=(0,))
    _, hi = call("max", [np.zeros((0, 2), np.uint16)], axes=(0,))
    assert lo.tolist() == [127, 127] and hi.tolist() == [0, 0]


def test_log_sum_exp_is_stable_and_keeps_infinities() -> None:
    x = np.array([[1000.0, 1000.0], [-1000.0, -1000.0], [-np.inf, -np.inf], [np.inf, 1.0]])
    _, y = call("log_sum_exp", [x.astype(np.float32)], axes=(1,))
    np.testing.assert_allclose(y[:2], [1000 + np.log(2), -1000 + np.log(2)], rtol=1e-6)
    assert y[2] == -np.inf and y[3] == np.inf
    _, n = call("log_sum_exp", [np.array([np.nan, 1.0], np.float32)], axes=(0,))
    assert np.isnan(n)


def test_integer_reductions_wrap_to_the_dtype() -> None:
    x = np.array([[100, -100, 3]], np.int8)
    assert call("prod", [x], axes=(1,))[1].tolist() == [np.int8(np.int64(-30000) % 256 - 256)]
    assert call("sum_square", [x], axes=(1,))[1].tolist() == [np.int64(20009).astype(np.int8)]
    assert call("l1_norm", [x], axes=(1,))[1].tolist() == [np.int64(203).astype(np.int8)]
    assert call("min", [x], axes=(1,))[1].tolist() == [-100]


def test_float_only_reductions_refuse_integers_and_sums_refuse_bool() -> None:
    for name in ("l2_norm", "log_sum", "log_sum_exp"):
        with pytest.raises(OpError, match="floating-point"):
            call(name, [np.zeros((2,), np.int32)])
    with pytest.raises(OpError, match="numeric"):
        call("prod", [np.zeros((2,), bool)])
    assert call("min", [np.array([True, False])])[1].tolist() is False


def test_reducing_no_axes_maps_each_element() -> None:
    """``axes=()`` (ONNX's noop_with_empty_axes): each element reduced alone."""
    x = np.array([[-2.0, 3.0]], np.float32)
    assert call("sum_square", [x], axes=())[1].tolist() == [[4.0, 9.0]]
    assert call("l1_norm", [x], axes=())[1].tolist() == [[2.0, 3.0]]
    np.testing.assert_allclose(call("log_sum_exp", [x], axes=())[1], x, rtol=1e-6)


@settings(max_examples=50, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    data=st.data(),
)
def test_l2_norm_squared_is_sum_square_and_lse_bounds_max(shape: list[int], data: Any) -> None:
    """l2_norm(x)**2 == sum_square(x); max(x) <= log_sum_exp(x) <= max(x) + log(count)."""
    x = np.random.default_rng(len(shape)).normal(size=shape) * 30
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    l2 = call("l2_norm", [x], axes=axes)[1]
    ss = call("sum_square", [x], axes=axes)[1]
    np.testing.assert_allclose(l2**2, ss, rtol=1e-9)
    lse = call("log_sum_exp", [x], axes=axes)[1]
    mx = call("max", [x], axes=axes)[1]
    count = int(np.prod([shape[a] for a in axes]))
    assert (mx <= lse + 1e-9).all() and (lse <= mx + np.log(count) + 1e-9).all()


# -- argmax / argmin -----------------------------------------------------------------------


def test_argmax_argmin_first_or_last_index_and_keepdims() -> None:
    x = np.array([[1, 3, 3], [5, 0, 0]], np.int32)
    t, y = call("argmax", [x], axis=1, keepdims=False)
    assert t == T((2,), "i64") and y.tolist() == [1, 0]
    assert call("argmax", [x], axis=1, select_last_index=True)[1].tolist() == [[2], [0]]
    assert call("argmin", [x], axis=-1, select_last_index=True)[1].tolist() == [[0], [2]]
    assert call("argmin", [x], axis=0)[1].tolist() == [[0, 1, 1]]


def test_arg_nan_counts_as_the_extreme() -> None:
    x = np.array([1.0, np.nan, 5.0, np.nan], np.float32)
    assert call("argmax", [x], keepdims=False)[1].tolist() == 1
    assert call("argmin", [x], keepdims=False, select_last_index=True)[1].tolist() == 3


def test_arg_of_an_empty_axis_or_a_scalar_is_refused() -> None:
    with pytest.raises(OpError, match="axis 0 has length 0"):
        call("argmax", [np.zeros((0, 2), np.float32)])
    with pytest.raises(OpError, match="rank 1 or more"):
        call("argmin", [np.zeros((), np.float32)])


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(-3, 3), min_size=1, max_size=12),
    last=st.booleans(),
)
def test_argmax_picks_an_extreme_at_the_tie_rule(values: list[int], last: bool) -> None:
    """The index holds the maximum; no earlier (later, with select_last_index) index does."""
    x = np.array(values, np.int16)
    i = int(call("argmax", [x], keepdims=False, select_last_index=last)[1])
    assert x[i] == x.max()
    others = x[i + 1 :] if last else x[:i]
    assert (others < x.max()).all()
    j = int(call("argmin", [-x], keepdims=False, select_last_index=last)[1])
    assert j == i

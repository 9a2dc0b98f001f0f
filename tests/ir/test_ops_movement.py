"""Inference and numpy kernels of pad, tile, gather_elements, gather_nd, scatter_nd,
scatter_elements, one_hot and trilu (ir/ops/movement.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.ir import dims as D
from relaxc.ir.ops import REGISTRY

from .test_ops import T, infer, run
from .test_ops import op_error as _op_error

n = D.Sym("n")


def op_error(message: str):
    """pytest.raises(OpError) matching ``message`` literally (it holds parentheses)."""
    return _op_error(re.escape(message))


# -- pad -------------------------------------------------------------------------------------


def test_pad_infer() -> None:
    assert infer("pad", [T((2, 3))], pads=(1, 0, 2, -1)) == T((5, 2))
    assert infer("pad", [T((n, 3), "i8")], pads=(1, 0, 1, 0), mode="edge") == T(
        (D.add(n, 2), 3), "i8"
    )
    with op_error("pad: pads (1, 2) must hold 2 values per axis"):
        infer("pad", [T((2, 3))], pads=(1, 2))
    with op_error("pad: mode 'mirror' is not one of constant, reflect, edge, wrap"):
        infer("pad", [T((2, 3))], pads=(0, 0, 0, 0), mode="mirror")
    with op_error("pad: axis 0 of length 2 cannot be cropped by 3"):
        infer("pad", [T((2, 3))], pads=(-2, 0, -1, 0))
    with op_error("pad: axis 1 is empty; mode 'reflect' has nothing to repeat"):
        infer("pad", [T((2, 0))], pads=(0, 1, 0, 0), mode="reflect")


def test_pad_modes_and_crops() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(
        run("pad", [x], pads=(0, 1, 1, 0), value=-1.0),
        [[-1, 0, 1, 2], [-1, 3, 4, 5], [-1, -1, -1, -1]],
    )
    np.testing.assert_array_equal(
        run("pad", [x], pads=(0, 2, 0, 1), mode="reflect")[0], [2, 1, 0, 1, 2, 1]
    )
    np.testing.assert_array_equal(
        run("pad", [x], pads=(0, 2, 0, 1), mode="edge")[1], [3, 3, 3, 4, 5, 5]
    )
    np.testing.assert_array_equal(
        run("pad", [x], pads=(0, 2, 0, 1), mode="wrap")[0], [1, 2, 0, 1, 2, 0]
    )
    # a negative pad crops first: the reflection is of what is kept
    np.testing.assert_array_equal(
        run("pad", [x], pads=(0, -1, 0, 2), mode="reflect"), [[1, 2, 1, 2], [4, 5, 4, 5]]
    )
    assert run("pad", [np.array([1, 2], np.int64)], pads=(1, 1), value=7.0).tolist() == [7, 1, 2, 7]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=3).flatmap(
        lambda s: st.tuples(
            st.just(s), st.lists(st.integers(-1, 5), min_size=2 * len(s), max_size=2 * len(s))
        )
    ),
    st.sampled_from(["constant", "edge", "wrap", "reflect"]),
)
def test_pad_positive_part_is_numpy_pad_of_the_crop(drawn, mode: str) -> None:
    """Any pads: the result is numpy's pad (its modes) of the input cropped by the negative
    pads; shape d + begin + end on every axis."""
    shape, pads = drawn
    r = len(shape)
    pads = [max(p, -(shape[i % r] // 2)) for i, p in enumerate(pads)]
    for i in range(r):  # never crop it all: at least one element stays on every axis
        pads[r + i] = max(pads[r + i], -(shape[i] - 1 - max(-pads[i], 0)))
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    got = run("pad", [x], pads=tuple(pads), mode=mode)
    crop = tuple(slice(max(-pads[i], 0), shape[i] - max(-pads[r + i], 0)) for i in range(r))
    want = np.pad(x[crop], [(max(pads[i], 0), max(pads[r + i], 0)) for i in range(r)], mode=mode)
    np.testing.assert_array_equal(got, want)


# -- tile ------------------------------------------------------------------------------------


def test_tile() -> None:
    assert infer("tile", [T((n, 3))], repeats=(2, 1)) == T((D.mul(n, 2), 3))
    x = np.array([[1, 2]], np.int32)
    np.testing.assert_array_equal(run("tile", [x], repeats=(2, 2)), [[1, 2, 1, 2]] * 2)
    assert run("tile", [x], repeats=(0, 3)).shape == (0, 6)
    with op_error("tile: repeats (2,) must hold one count per axis of rank 2"):
        infer("tile", [T((2, 3))], repeats=(2,))
    with op_error("tile: repeats (2, -1) must not be negative"):
        infer("tile", [T((2, 3))], repeats=(2, -1))


# -- gathers ---------------------------------------------------------------------------------


def test_gather_elements() -> None:
    data = np.array([[1, 2], [3, 4]], np.float32)
    idx = np.array([[0, 0], [1, -1]], np.int64)
    np.testing.assert_array_equal(run("gather_elements", [data, idx], axis=1), [[1, 1], [4, 4]])
    np.testing.assert_array_equal(run("gather_elements", [data, idx], axis=0), [[1, 2], [3, 4]])
    # out of range clips: 5 -> 1, -7 -> 0
    far = np.array([[5, -7]], np.int32)
    np.testing.assert_array_equal(run("gather_elements", [data, far], axis=1), [[2, 1]])
    with op_error("gather_elements: indices (2,) must have the rank of data (2, 2)"):
        infer("gather_elements", [T((2, 2)), T((2,), "i64")])
    with op_error("gather_elements: indices must be an integer tensor, got f32"):
        infer("gather_elements", [T((2, 2)), T((2, 2))])


def test_gather_nd() -> None:
    data = np.arange(8, dtype=np.int32).reshape(2, 2, 2)
    assert infer("gather_nd", [T((2, 2, 2)), T((3, 2), "i64")]) == T((3, 2))
    idx = np.array([[0, 1], [1, 0], [-1, -1]], np.int64)
    np.testing.assert_array_equal(run("gather_nd", [data, idx]), [[2, 3], [4, 5], [6, 7]])
    # batch_dims=1: each batch indexes its own slab
    bidx = np.array([[1], [0]], np.int64)
    assert infer("gather_nd", [T((2, 2, 2)), T((2, 1), "i64")], batch_dims=1) == T((2, 2))
    np.testing.assert_array_equal(run("gather_nd", [data, bidx], batch_dims=1), [[2, 3], [4, 5]])
    np.testing.assert_array_equal(run("gather_nd", [data, np.array([[9, 0, -9]])]), [4])
    with op_error("gather_nd: indices address 4 dimension(s) after 0 batch dimension(s)"):
        infer("gather_nd", [T((2, 2, 2)), T((1, 4), "i64")])
    with op_error("gather_nd: batch_dims 2 must be less than the ranks"):
        infer("gather_nd", [T((2, 2, 2)), T((2, 1), "i64")], batch_dims=2)


# -- scatters --------------------------------------------------------------------------------


def test_scatter_nd_reductions_and_duplicates() -> None:
    data = np.arange(1, 9, dtype=np.float32)
    idx = np.array([[4], [3], [4]], np.int64)
    upd = np.array([10, 20, 30], np.float32)
    none = run("scatter_nd", [data, idx, upd])
    assert none.tolist() == [1, 2, 3, 20, 30, 6, 7, 8]  # the last of a duplicate wins
    assert run("scatter_nd", [data, idx, upd], reduction="add")[4] == 5 + 10 + 30
    assert run("scatter_nd", [data, idx, upd], reduction="mul")[4] == 5 * 10 * 30
    assert run("scatter_nd", [data, idx, upd], reduction="max")[3] == 20
    assert run("scatter_nd", [data, idx, upd], reduction="min")[4] == 5
    assert data.tolist() == list(range(1, 9))  # the input is not written
    slab = run(
        "scatter_nd",
        [np.zeros((2, 3), np.int64), np.array([[-1]]), np.array([[1, 2, 3]], np.int64)],
    )
    assert slab.tolist() == [[0, 0, 0], [1, 2, 3]]
    with op_error("scatter_nd: updates (2,) must have the shape (3,)"):
        infer("scatter_nd", [T((8,)), T((3, 1), "i64"), T((2,))])
    with op_error("scatter_nd: reduction 'sum' is not one of none, add, mul, max, min"):
        infer("scatter_nd", [T((8,)), T((3, 1), "i64"), T((3,))], reduction="sum")
    with op_error("scatter_nd: reduction 'add' needs a numeric tensor, got bool"):
        infer("scatter_nd", [T((8,), "bool"), T((3, 1), "i64"), T((3,), "bool")], reduction="add")


def test_scatter_elements() -> None:
    data = np.zeros((2, 3), np.float32)
    idx = np.array([[1, 0, -1]], np.int64)
    upd = np.array([[1.5, 2.5, 3.5]], np.float32)
    np.testing.assert_array_equal(
        run("scatter_elements", [data, idx, upd], axis=1), [[2.5, 1.5, 3.5], [0, 0, 0]]
    )
    np.testing.assert_array_equal(
        run("scatter_elements", [data, idx, upd], axis=0), [[0, 2.5, 0], [1.5, 0, 3.5]]
    )
    dup = np.array([[2, 2, 2]], np.int64)
    assert run("scatter_elements", [data, dup, upd], axis=1, reduction="add")[0, 2] == 7.5
    with op_error("scatter_elements: updates are f64, data is f32"):
        infer("scatter_elements", [T((2, 3)), T((1, 3), "i64"), T((1, 3), "f64")])


def test_scatters_may_write_over_their_data() -> None:
    assert REGISTRY.get("scatter_nd").inplace == (0,)
    assert REGISTRY.get("scatter_elements").inplace == (0,)
    assert REGISTRY.get("pad").inplace == ()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.lists(st.integers(-8, 8), min_size=0, max_size=6), st.data())
def test_scatter_then_gather_reads_the_last_update(size: int, raw: list[int], data) -> None:
    """scatter_nd (reduction none) then gather_nd at the same indices reads, at each index,
    the update of its last occurrence (clipped indices included)."""
    x = np.zeros(size, np.int64)
    idx = np.array(raw, np.int64).reshape(-1, 1)
    upd = np.arange(1, len(raw) + 1, dtype=np.int64)
    out = run("scatter_nd", [x, idx, upd])
    got = run("gather_nd", [out, idx])
    pos = np.clip(np.where(idx[:, 0] < 0, idx[:, 0] + size, idx[:, 0]), 0, size - 1)
    for i, p in enumerate(pos):
        assert got[i] == upd[max(j for j in range(len(pos)) if pos[j] == p)]


# -- one_hot / trilu -------------------------------------------------------------------------


def test_one_hot() -> None:
    idx = np.array([0, 2, -1, 3], np.int64)
    values = np.array([0.5, 2.0], np.float32)
    assert infer("one_hot", [T((4,), "i64"), T((2,))], depth=3) == T((4, 3))
    assert infer("one_hot", [T((4, 5), "i32"), T((2,), "i8")], depth=3, axis=0) == T(
        (3, 4, 5), "i8"
    )
    got = run("one_hot", [idx, values], depth=3)
    np.testing.assert_array_equal(
        got, [[2, 0.5, 0.5], [0.5, 0.5, 2], [0.5, 0.5, 2], [0.5, 0.5, 0.5]]
    )  # -1 is the last; 3 is out of range: a row of off values
    np.testing.assert_array_equal(run("one_hot", [idx, values], depth=3, axis=0), got.T)
    with op_error("one_hot: values must be (off, on), shape (2,), got (3,)"):
        infer("one_hot", [T((4,), "i64"), T((3,))], depth=3)


def test_trilu() -> None:
    x = np.arange(1, 10, dtype=np.float32).reshape(3, 3)
    np.testing.assert_array_equal(run("trilu", [x]), np.triu(x))
    np.testing.assert_array_equal(
        run("trilu", [x], k=-1, upper=False), [[0, 0, 0], [4, 0, 0], [7, 8, 0]]
    )
    b = np.ones((2, 2, 3), np.bool_)
    assert run("trilu", [b], k=1).sum() == 2 * 3
    with op_error("trilu: x must have rank at least 2, got (3,)"):
        infer("trilu", [T((3,))])


@pytest.mark.parametrize("op", ["pad", "tile", "one_hot", "trilu", "gather_nd"])
def test_movement_records(op: str) -> None:
    rec = REGISTRY.get(op)
    assert rec.family == "data movement" and not rec.is_view and rec.kernel is not None

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

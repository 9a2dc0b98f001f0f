"""ir/sizes.py: the bytes of a tensor type and rounding up to an alignment, as ints and dims."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.ir import dims as D
from relaxc.ir.sizes import (
    round_up,
    round_up_dim,
    tensor_nbytes,
    tensor_nbytes_bound,
    value_nbytes,
)
from relaxc.ir.types import DTYPES, TensorType, TupleType, tensor_leaves

NAMES = ("n", "m")


def _dims() -> st.SearchStrategy[D.Dim]:
    """Dims that never go negative: ints, names, and + * and / by a constant of them."""
    leaves = st.one_of(st.integers(0, 9), st.sampled_from(NAMES).map(D.Sym))

    def extend(ch: st.SearchStrategy[D.Dim]) -> st.SearchStrategy[D.Dim]:
        return st.one_of(
            st.builds(D.BinOp, st.sampled_from("+*"), ch, ch),
            st.builds(lambda a, k: D.BinOp("/", a, k), ch, st.integers(1, 5)),
        )

    return st.recursive(leaves, extend, max_leaves=5)


tensor_types = st.builds(
    lambda shape, dtype: TensorType(tuple(shape), dtype),
    st.lists(_dims(), max_size=3),
    st.sampled_from(sorted(DTYPES)),
)
bounds_st = st.fixed_dictionaries({k: st.integers(0, 12) for k in NAMES})
aligns = st.sampled_from([1, 2, 4, 8, 16, 64, 128])


def test_bytes_of_known_types() -> None:
    assert tensor_nbytes(TensorType((2, 3), "bool")) == 6  # bool counts one byte, not one bit
    assert tensor_nbytes(TensorType((5,), "bf16")) == 10
    assert tensor_nbytes(TensorType((), "f64")) == 8  # rank 0: one element
    assert tensor_nbytes(TensorType((4, 0), "f32")) == 0
    n = D.Sym("n")
    assert D.dim_to_str(tensor_nbytes(TensorType((n, 10), "f32"))) == "40 * n"
    assert tensor_nbytes_bound(TensorType((n, 10), "f32"), {"n": 3}) == 120
    assert tensor_nbytes_bound(TensorType((n, 10), "f32"), {}) is None  # n has no bound


@settings(max_examples=300, deadline=None)
@given(tensor_types, bounds_st, st.data())
def test_dim_and_int_forms_agree_up_to_the_bound(t: TensorType, bounds, data) -> None:
    dim = tensor_nbytes(t)
    bound = tensor_nbytes_bound(t, bounds)
    at_bounds = math.prod(D.evaluate(d, bounds) for d in t.shape) * DTYPES[t.dtype].nbytes
    assert bound == at_bounds  # the shape grows with every dim: the bound is its value there
    env = {k: data.draw(st.integers(0, bounds[k])) for k in NAMES}
    value = math.prod(D.evaluate(d, env) for d in t.shape) * DTYPES[t.dtype].nbytes
    assert D.evaluate(dim, env) == value <= bound
    if t.is_static():
        assert dim == value and isinstance(dim, int)


@settings(max_examples=300, deadline=None)
@given(tensor_types)
def test_bytes_are_already_simplified(t: TensorType) -> None:
    # Callers that simplified the bytes themselves (the placement checker, PlanMemory) get the
    # same expression without doing so.
    dim = tensor_nbytes(t)
    assert D.simplify(dim) == dim


@settings(max_examples=500, deadline=None)
@given(st.integers(-1000, 10**6), aligns)
def test_round_up_is_the_least_multiple_not_below(n: int, align: int) -> None:
    r = round_up(n, align)
    assert r % align == 0 and n <= r < n + align
    assert round_up(r, align) == r  # idempotent
    assert round_up_dim(n, align) == r and isinstance(round_up_dim(n, align), int)


def test_round_up_edges() -> None:
    assert round_up(0, 64) == 0  # a 0-byte tensor stays 0 bytes
    assert round_up(1, 64) == 64 and round_up(64, 64) == 64 and round_up(65, 64) == 128
    assert round_up(7, 1) == 7 and round_up(7, 0) == 7  # no alignment leaves the size
    n = D.Sym("n")
    assert round_up_dim(n, 1) is n


@settings(max_examples=300, deadline=None)
@given(tensor_types, aligns, bounds_st)
def test_round_up_dim_agrees_with_the_int_form_at_every_value(t, align, env) -> None:
    dim = round_up_dim(tensor_nbytes(t), align)
    assert D.evaluate(dim, env) == round_up(D.evaluate(tensor_nbytes(t), env), align)


tuple_types = st.recursive(
    tensor_types,
    lambda ch: st.lists(ch, max_size=3).map(lambda fs: TupleType(tuple(fs))),
    max_leaves=6,
)


@given(tuple_types, bounds_st)
def test_a_value_holds_the_bytes_of_every_tensor_leaf(t, env) -> None:
    """value_nbytes of a tensor or a (nested) tuple is the sum of its leaves' bytes, at
    every point."""
    want = sum(D.evaluate(tensor_nbytes(leaf), env) for leaf in tensor_leaves(t))
    assert D.evaluate(value_nbytes(t), env) == want

"""``OpDef.kernel_into``: the kernels that write into the memory the plan gave their output.

For every op that has one, on random inputs: writing into a fresh array of the output's
type gives the bits ``kernel`` returns; where the op may run in place (``OpDef.inplace``),
writing over the input's own storage gives them too; a case the function declines
(returns False) leaves ``out`` untouched, and the VM then takes the kernel's result.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.ir.ops import REGISTRY
from relaxc.ir.ops.checks import product_dtype

from .test_fast_kernels import FLOATS, bound_attrs, conv_cases, pool_cases, values

HAS_INTO = sorted(name for name, op in REGISTRY._ops.items() if op.kernel_into is not None)


def test_the_hot_kernels_write_into_planned_memory() -> None:
    # the ops a CNN spends its time in (benchmarks/vm_zoo.py)
    assert {"conv2d", "dense", "matmul", "batch_norm", "max_pool2d", "add", "relu"} <= set(HAS_INTO)


def check_into(name: str, xs: list[np.ndarray], attrs: dict[str, Any]) -> bool:
    """Whether ``kernel_into`` took the case (into a fresh array)."""
    op = REGISTRY.get(name)
    want = np.asarray(op.kernel(list(xs), attrs))
    out = np.full(want.shape, 7, dtype=want.dtype)
    took = op.kernel_into(list(xs), attrs, out)
    if took:
        assert out.tobytes() == want.tobytes(), f"{name}: into differs from the kernel"
    else:
        assert (out == 7).all(), f"{name}: declined but wrote"
    for i in op.inplace:
        x = xs[i]
        if x.shape != want.shape or x.dtype != want.dtype:
            continue
        own = np.ascontiguousarray(x).copy()
        args = list(xs)
        args[i] = own
        if op.kernel_into(args, attrs, own):
            assert own.tobytes() == want.tobytes(), f"{name}: in place over input {i} differs"
    return bool(took)


@given(conv_cases())
@settings(max_examples=150, deadline=None)
def test_conv2d_into_is_the_kernel(case: Any) -> None:
    xs, attrs = case
    took = check_into("conv2d", xs, attrs)
    # f16 and narrow integers widen their products: those are the kernel's to compute
    assert took == (product_dtype(xs[0].dtype) == xs[0].dtype)


@given(conv_cases())
@settings(max_examples=100, deadline=None)
def test_conv2d_prepared_into_is_the_kernel(case: Any) -> None:
    # what the VM runs: prepared once for the inputs' shapes and dtypes
    xs, attrs = case
    op = REGISTRY.get("conv2d")
    prepared = op.prepare_into([x.shape for x in xs], [x.dtype for x in xs], attrs)
    assert (prepared is None) == (product_dtype(xs[0].dtype) != xs[0].dtype)
    if prepared is None:
        return
    want = np.asarray(op.kernel(list(xs), attrs))
    out = np.full(want.shape, 7, dtype=want.dtype)
    assert prepared(list(xs), out) and out.tobytes() == want.tobytes()
    assert not prepared(list(xs), np.empty(want.shape + (1,), want.dtype))  # not its shape


@given(pool_cases("max_pool2d"))
@settings(max_examples=80, deadline=None)
def test_max_pool2d_into_is_the_kernel(case: Any) -> None:
    xs, attrs = case
    assert check_into("max_pool2d", xs, attrs)


@given(pool_cases("avg_pool2d"))
@settings(max_examples=80, deadline=None)
def test_avg_pool2d_into_is_the_kernel(case: Any) -> None:
    xs, attrs = case
    assert check_into("avg_pool2d", xs, attrs)


@given(
    st.sampled_from(FLOATS + ("int8", "int64")),
    st.lists(st.integers(0, 4), min_size=1, max_size=5),
    st.integers(0, 2**16),
    st.data(),
)
@settings(max_examples=80, deadline=None)
def test_transpose_and_concat_into_are_the_kernel(dtype, shape, seed, data) -> None:
    x = values(data.draw, tuple(shape), dtype, seed)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    assert check_into("transpose", [x], bound_attrs("transpose", 1, axes=perm))
    axis = data.draw(st.integers(0, len(shape) - 1))
    other = list(shape)
    other[axis] = data.draw(st.integers(0, 3))
    y = values(data.draw, tuple(other), dtype, seed + 1)
    assert check_into("concat", [x, y, x], bound_attrs("concat", 3, axis=axis))


@st.composite
def dense_cases(draw: Any) -> tuple[str, list[np.ndarray], dict]:
    dtype = draw(st.sampled_from(FLOATS + ("int32",)))
    m, k, n = (draw(st.integers(0, 5)) for _ in range(3))
    seed = draw(st.integers(0, 2**16))
    if draw(st.booleans()):
        batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
        xs = [values(draw, batch + (m, k), dtype, seed), values(draw, (k, n), dtype, seed + 1)]
        return "matmul", xs, {}
    xs = [values(draw, (m, k), dtype, seed), values(draw, (n, k), dtype, seed + 1)]
    if draw(st.booleans()):
        xs.append(values(draw, (n,), dtype, seed + 2))
    return "dense", xs, bound_attrs("dense", len(xs))


@given(dense_cases())
@settings(max_examples=80, deadline=None)
def test_matmul_and_dense_into_are_the_kernel(case: Any) -> None:
    check_into(*case)


@given(
    st.sampled_from([n for n in HAS_INTO if REGISTRY.get(n).elementwise]),
    st.sampled_from(FLOATS + ("int8", "int64", "uint8")),
    st.sampled_from([((2, 3), (2, 3)), ((2, 3), (3,)), ((1, 3), (2, 1)), ((0, 4), (4,))]),
    st.integers(0, 2**16),
    st.data(),
)
@settings(max_examples=120, deadline=None)
def test_elementwise_into_is_the_kernel(name, dtype, shapes, seed, data) -> None:
    op = REGISTRY.get(name)
    n = op.min_inputs
    xs = [values(data.draw, shapes[i], dtype, seed + i) for i in range(n)]
    if n == 1:
        xs = [values(data.draw, shapes[0], dtype, seed)]
    assert check_into(name, xs, {})


@given(
    st.sampled_from(FLOATS),
    st.sampled_from([(2, 3), (1, 4, 2, 2), (3, 0, 2)]),
    st.integers(0, 2**16),
    st.data(),
)
@settings(max_examples=60, deadline=None)
def test_batch_norm_into_is_the_kernel(dtype, shape, seed, data) -> None:
    c = shape[1]
    xs = [values(data.draw, shape, dtype, seed)] + [
        values(data.draw, (c,), dtype, seed + i) for i in range(1, 4)
    ]
    xs.append(np.abs(values(data.draw, (c,), dtype, seed + 4)))
    assert check_into("batch_norm", xs, bound_attrs("batch_norm", 5))


def test_in_place_elementwise_with_two_nans_is_left_to_the_kernel() -> None:
    # The VM writing a ufunc into an operand's own bytes gave another NaN than the fresh
    # result the interpreter computes where two NaNs meet (the fuzzer, docs/fuzzing.md 20):
    # the binary kernel_into functions decline an output sharing memory with an operand
    # when both operands hold a NaN.
    a = np.array([np.nan, 1.0, -np.nan], np.float32)
    b = np.array([-np.nan, np.nan, 2.0], np.float32)
    for name in ("add", "maximum"):
        op = REGISTRY.get(name)
        for i in range(2):
            own = [a.copy(), b.copy()]
            before = own[i].tobytes()
            assert not op.kernel_into(own, {}, own[i])
            assert own[i].tobytes() == before
        out = np.empty_like(a)
        assert op.kernel_into([a, b], {}, out)
        assert out.tobytes() == np.asarray(op.kernel([a, b], {})).tobytes()


BITS = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}
SPECIALS = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0]


def any_bits(draw: Any, n: int, dtype: str, seed: int) -> np.ndarray:
    """``n`` floats of ``dtype``: random bit patterns (NaNs of any sign and payload,
    signaling ones included, subnormals) mixed with infinities and signed zeros."""
    rng = np.random.default_rng(seed)
    it = BITS[dtype]
    a = rng.integers(0, np.iinfo(it).max, n, dtype=it, endpoint=True).view(dtype)
    special = rng.random(n) < draw(st.sampled_from([0.0, 0.3, 0.9]))
    a[special] = np.array(SPECIALS, dtype)[rng.integers(0, len(SPECIALS), int(special.sum()))]
    return a


@given(
    st.sampled_from([n for n in HAS_INTO if REGISTRY.get(n).elementwise]),
    st.sampled_from(sorted(BITS)),
    st.integers(1, 80),
    st.sampled_from(["same", "row", "scalar"]),
    st.booleans(),
    st.integers(0, 2**16),
    st.data(),
)
@settings(max_examples=300, deadline=None)
def test_elementwise_in_place_is_the_kernel_bit_for_bit(
    name, dtype, n, other_shape, swap, seed, data
) -> None:
    # In place over an operand, unless both operands hold a NaN, the bits of the fresh
    # result: NaNs of every sign and payload, infinities and signed zeros, every length
    # (numpy's SIMD loops and their remainders).
    op = REGISTRY.get(name)
    x = any_bits(data.draw, n, dtype, seed)
    xs = [x]
    if op.min_inputs == 2:
        length = n if other_shape == "same" else 1
        other = any_bits(data.draw, length, dtype, seed + 1)
        if other_shape == "scalar":
            other = other.reshape(())
        xs = [other, x] if swap else [x, other]
    own = x.copy()
    args = [own if v is x else v for v in xs]
    both_nan = len(xs) == 2 and all(np.isnan(v).any() for v in xs)
    with np.errstate(all="ignore"):
        want = np.asarray(op.kernel(list(xs), {}))
        took = op.kernel_into(args, {}, own)
    assert took == (not both_nan)
    assert own.tobytes() == (want.tobytes() if took else x.tobytes())


@given(
    st.sampled_from(sorted(BITS)),
    st.sampled_from([16384, 16385, 3 * 16384 + 7, 40000]),
    st.booleans(),
    st.integers(0, 2**16),
    st.data(),
)
@settings(max_examples=40, deadline=None)
def test_relu_in_blocks_is_the_kernel_bit_for_bit(dtype, n, in_place, seed, data) -> None:
    # Past one block of zeros relu runs block by block (a vector maximum of two arrays):
    # the same bits as the kernel, NaN payloads and signed zeros included, fresh or in
    # place, whatever the last block's length.
    op = REGISTRY.get("relu")
    x = any_bits(data.draw, n, dtype, seed).reshape(1, -1)
    want = np.asarray(op.kernel([x], {}))
    out = x.copy() if in_place else np.full_like(x, 7)
    assert op.kernel_into([out if in_place else x], {}, out)
    assert out.tobytes() == want.tobytes()

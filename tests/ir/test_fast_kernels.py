"""The nn kernels that go through im2col + BLAS and strided views, against the loops they
replaced (tests/ir/reference_kernels.py), over random strides, padding, dilation, groups,
ceil_mode, count_include_pad, dtypes and zero-size shapes.

conv2d sums in BLAS's blocked order in its product dtype (float32 for f16/f32, float64
for f64): floats agree with the loops within the rounding error of a K-term sum in that
dtype plus one rounding to the output dtype, integers exactly (they wrap). Pooling and lrn
keep the loops' order of operations and agree bit for bit; batch_norm folds its formula
into a scale and a shift (a few float64 ulps).
Every result is a fresh, writeable, C-contiguous array of the inferred type, not sharing
memory with an input, and inputs are neither written nor required to be contiguous or
writeable.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from relaxc.ir.nodes import Var
from relaxc.ir.ops.conv import conv_geometry
from relaxc.ir.ops.windows import TapRuns, WindowTaps
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import bind_args
from relaxc.ir.types import TensorType, dtype_from_numpy, numpy_dtype

from . import reference_kernels as ref

FLOATS = ("float32", "float64", "float16")
INTS = ("int8", "int32", "int64", "uint8", "uint32")


def bound_attrs(name: str, n_inputs: int, **kwargs: Any) -> dict[str, Any]:
    op = REGISTRY.get(name)
    assert op is not None
    b = bind_args(op, [Var(f"x{i}") for i in range(n_inputs)], list(kwargs.items()))
    return dict(b.attrs)


def run_checked(name: str, xs: Sequence[np.ndarray], attrs: dict[str, Any]) -> np.ndarray:
    """The registry kernel on ``xs``: its result has the inferred type, is fresh and leaves
    the inputs alone."""
    op = REGISTRY.get(name)
    before = [x.copy() for x in xs]
    types = [TensorType(tuple(x.shape), dtype_from_numpy(x.dtype)) for x in xs]
    t = op.infer(types, attrs)
    res = op.kernel(list(xs), attrs)
    assert isinstance(res, np.ndarray)
    assert res.shape == tuple(t.shape) and res.dtype == numpy_dtype(t.dtype)
    assert res.flags.c_contiguous and res.flags.writeable
    for x, b in zip(xs, before):
        assert not np.shares_memory(res, x)
        assert x.tobytes() == b.tobytes()
    return res


def values(draw: Any, shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a = rng.standard_normal(shape) * draw(st.sampled_from([1.0, 4.0]))
        a[rng.random(shape) < 0.1] = 0.0
        return a.astype(dt)
    info = np.iinfo(dt)
    lo, hi = max(info.min, -100), min(info.max, 100)
    if draw(st.booleans()):  # full range: sums wrap
        lo, hi = info.min, info.max
    return rng.integers(lo, hi, shape, dtype=dt, endpoint=True)


def layout(draw: Any, a: np.ndarray) -> np.ndarray:
    """``a`` as it may reach a kernel: contiguous, read-only (a VM constant) or a
    non-contiguous view (the interpreter's)."""
    kind = draw(st.sampled_from(["plain", "readonly", "strided"]))
    if kind == "readonly":
        a = a.copy()
        a.flags.writeable = False
    elif kind == "strided":
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        a = big[..., ::2]
    return a


def pair(draw: Any, lo: int, hi: int) -> tuple[int, int]:
    return (draw(st.integers(lo, hi)), draw(st.integers(lo, hi)))


# ---------------------------------------------------------------------------------------
# conv2d


@st.composite
def conv_cases(draw: Any):
    dtype = draw(st.sampled_from(FLOATS + INTS))
    groups = draw(st.integers(1, 3))
    cg = draw(st.integers(0, 3)) if draw(st.integers(0, 9)) == 0 else draw(st.integers(1, 3))
    og = draw(st.integers(0, 3)) if draw(st.integers(0, 9)) == 0 else draw(st.integers(1, 3))
    nb = draw(st.sampled_from([0, 1, 1, 2]))
    k = pair(draw, 1, 3)
    dil = pair(draw, 1, 2)
    st_ = pair(draw, 1, 3)
    pad_attr = draw(
        st.one_of(
            st.tuples(*[st.integers(0, 2)] * 4),
            st.tuples(st.integers(0, 2), st.integers(0, 2)),
            st.tuples(st.integers(0, 2)),
        )
    )
    pad = (pad_attr * 4)[:4] if len(pad_attr) == 1 else (pad_attr * 2)[:4]
    h = draw(st.integers(1, 7))
    w = draw(st.integers(1, 7))
    assume(dil[0] * (k[0] - 1) + 1 <= h + pad[0] + pad[2])
    assume(dil[1] * (k[1] - 1) + 1 <= w + pad[1] + pad[3])
    seed = draw(st.integers(0, 2**16))
    x = values(draw, (nb, groups * cg, h, w), dtype, seed)
    wt = values(draw, (groups * og, cg, *k), dtype, seed + 1)
    xs = [layout(draw, x), layout(draw, wt)]
    if draw(st.booleans()):
        xs.append(layout(draw, values(draw, (groups * og,), dtype, seed + 2)))
    attrs = bound_attrs(
        "conv2d", len(xs), strides=st_, padding=pad_attr, dilation=dil, groups=groups
    )
    return xs, attrs


def assert_conv2d_matches_the_loops(xs: list, attrs: dict) -> None:
    """conv2d (checked by run_checked) against the reference loops: integers exactly (their
    sums wrap: any order is exact), floats within :func:`assert_within_sum_bound`."""
    got = run_checked("conv2d", xs, attrs)
    if got.dtype.kind != "f":
        want = ref.conv2d(xs, attrs)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        return
    assert got.dtype == xs[0].dtype
    assert_within_sum_bound(got, xs, attrs)


def assert_within_sum_bound(got: np.ndarray, xs: list, attrs: dict) -> None:
    """Sums of K products (and the bias) in the product dtype, in any order: within
    (K + 2) unit roundings of that dtype of the sum of |terms| (the classic bound of a
    recursive or blocked sum), then one rounding to the output dtype: relative to the value,
    or for a result below the dtype's smallest normal number, half the spacing of its
    subnormals (float16's results under 6.1e-5 are rounded to multiples of 6e-8)."""
    absxs = [np.abs(x.astype(np.float64)) for x in xs]
    mag = ref.conv2d(absxs, attrs)
    exact = ref.conv2d([x.astype(np.float64) for x in xs], attrs)
    ulp = np.finfo(got.dtype).eps
    acc = np.float64 if got.dtype == np.float64 else np.float32
    k = xs[1].shape[1] * xs[1].shape[2] * xs[1].shape[3]
    subnormal = float(np.finfo(got.dtype).smallest_subnormal) / 2  # in float64, not float16
    bound = (k + 2) * np.finfo(acc).eps * mag + np.maximum(ulp * np.abs(exact), subnormal)
    assert got.shape == exact.shape
    assert np.all(np.abs(got.astype(np.float64) - exact) <= bound)


@given(conv_cases())
@settings(max_examples=300, deadline=None)
def test_conv2d_matches_the_loops(case) -> None:
    xs, attrs = case
    assert_conv2d_matches_the_loops(xs, attrs)


@st.composite
def grouped_conv_cases(draw: Any):
    """Grouped and depthwise convolutions (one input channel per group, a channel
    multiplier of 1-3), wide enough for each of conv2d's three ways to its columns."""
    dtype = draw(st.sampled_from(("float32", "float32", "float64", "float16", "int32")))
    groups = draw(st.integers(1, 6))
    cg = draw(st.sampled_from([1, 1, 2, 3]))
    og = draw(st.integers(1, 3))
    k = pair(draw, 1, 3)
    dil = pair(draw, 1, 2)
    st_ = pair(draw, 1, 2)
    pad = tuple(draw(st.integers(0, 2)) for _ in range(4))
    h, w = draw(st.integers(1, 16)), draw(st.integers(1, 16))
    assume(dil[0] * (k[0] - 1) + 1 <= h + pad[0] + pad[2])
    assume(dil[1] * (k[1] - 1) + 1 <= w + pad[1] + pad[3])
    seed = draw(st.integers(0, 2**16))
    x = values(draw, (draw(st.sampled_from([1, 2])), groups * cg, h, w), dtype, seed)
    xs = [layout(draw, x), values(draw, (groups * og, cg, *k), dtype, seed + 1)]
    if draw(st.booleans()):
        xs.append(values(draw, (groups * og,), dtype, seed + 2))
    attrs = bound_attrs("conv2d", len(xs), strides=st_, padding=pad, dilation=dil, groups=groups)
    return xs, attrs


def test_a_float16_result_among_the_subnormals_is_within_its_rounding() -> None:
    """A depthwise 1x1 float16 convolution whose products are subnormal in float16: each is
    rounded to a multiple of 2**-24, far more than float16's eps relative to the value
    (hypothesis found one; the bound had no absolute term)."""
    x = np.array([3.0e-5, -2.9e-5, 1.7e-5, 4.1e-5], dtype=np.float16).reshape(1, 1, 2, 2)
    w = np.array([0.4023], dtype=np.float16).reshape(1, 1, 1, 1)
    attrs = {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1}
    assert_conv2d_matches_the_loops([x, w], attrs)


@given(grouped_conv_cases())
@settings(max_examples=250, deadline=None)
def test_grouped_and_depthwise_conv2d_match_the_loops_on_every_path(case) -> None:
    xs, attrs = case
    assert_conv2d_matches_the_loops(xs, attrs)


def test_conv2d_paths_follow_the_geometry() -> None:
    # direct: 1x1, unit strides, no padding; rows: unit strides, an output as wide as the
    # input; runs: unit strides, padded rows at most a third wider than the output's;
    # taps: many input channels into few over long runs; windows: the rest (the cases
    # above reach all but taps, tested below)
    def path(x: tuple, w: tuple, **kw: Any) -> str:
        return conv_geometry(x, w, bound_attrs("conv2d", 2, **kw)).path

    assert path((1, 8, 14, 14), (8, 2, 1, 1), groups=4) == "direct"
    assert path((1, 8, 14, 14), (8, 1, 3, 3), padding=1, groups=8) == "rows"
    assert path((1, 8, 4, 4), (8, 1, 3, 3), padding=1, groups=8) == "rows"
    assert path((1, 8, 14, 14), (8, 1, 5, 5), padding=(2, 2), dilation=1, groups=8) == "rows"
    assert path((1, 8, 14, 14), (8, 1, 3, 3), padding=(1, 0), groups=8) == "runs"
    assert path((1, 8, 4, 4), (8, 1, 3, 3), padding=(1, 0), groups=8) == "windows"  # narrow
    assert path((1, 8, 14, 14), (8, 1, 3, 3), padding=1, strides=2, groups=8) == "windows"
    assert path((1, 8, 14, 14), (16, 8, 1, 1), padding=1) == "windows"
    assert path((1, 128, 28, 28), (32, 128, 3, 3), padding=1) == "taps"
    assert path((1, 128, 14, 14), (32, 128, 3, 3), padding=1) == "rows"  # short runs
    assert path((1, 64, 28, 28), (64, 64, 3, 3), padding=1) == "rows"  # as many out as in


@given(
    st.sampled_from(["float32", "float64", "float16", "int16"]),
    st.integers(1, 2),
    st.sampled_from([64, 96]),
    st.integers(1, 24),
    st.tuples(st.integers(1, 3), st.integers(1, 3)),
    st.tuples(st.integers(1, 2), st.integers(1, 2)),
    st.tuples(*[st.integers(0, 2)] * 4),
    st.booleans(),
    st.integers(0, 2**16),
    st.data(),
)
@settings(max_examples=40, deadline=None)
def test_conv2d_tap_products_match_the_loops(
    dtype, groups, cg, og, k, dil, pad, bias, seed, data
) -> None:
    # many input channels into few over long runs: one product per tap, no columns
    h, w = 24 + dil[0] * (k[0] - 1), 24 + dil[1] * (k[1] - 1)
    x = values(data.draw, (1, groups * cg, h, w), dtype, seed)
    xs = [layout(data.draw, x), values(data.draw, (groups * og, cg, *k), dtype, seed + 1)]
    if bias:
        xs.append(values(data.draw, (groups * og,), dtype, seed + 2))
    attrs = bound_attrs("conv2d", len(xs), padding=pad, dilation=dil, groups=groups)
    if k != (1, 1):
        assert conv_geometry(xs[0].shape, xs[1].shape, attrs).path == "taps"
    assert_conv2d_matches_the_loops(xs, attrs)


def test_conv2d_depthwise_and_grouped_shapes_of_the_zoo() -> None:
    # The shapes the model zoo runs: depthwise 3x3 (shufflenet), grouped 1x1, strided 7x7.
    rng = np.random.default_rng(0)
    for xshape, wshape, kw in (
        ((1, 16, 9, 9), (16, 1, 3, 3), dict(padding=1, groups=16)),
        ((1, 16, 9, 9), (16, 1, 3, 3), dict(padding=1, groups=16, strides=2)),
        ((1, 12, 5, 5), (8, 3, 1, 1), dict(groups=4)),
        ((1, 3, 15, 15), (8, 3, 7, 7), dict(padding=3, strides=2)),
        # unit stride on wide rows: the row-padded columns (one run per tap)
        ((2, 8, 12, 12), (6, 8, 3, 3), dict(padding=1)),
        ((1, 8, 12, 13), (8, 1, 3, 3), dict(padding=(2, 1), dilation=2, groups=8)),
        ((1, 4, 12, 12), (4, 4, 3, 1), dict(padding=(1, 0, 0, 0))),
    ):
        x = rng.standard_normal(xshape).astype(np.float32)
        w = rng.standard_normal(wshape).astype(np.float32)
        attrs = bound_attrs("conv2d", 2, **kw)
        assert_within_sum_bound(run_checked("conv2d", [x, w], attrs), [x, w], attrs)


# ---------------------------------------------------------------------------------------
# pooling


@st.composite
def pool_cases(draw: Any, op: str):
    dtype = draw(st.sampled_from(FLOATS if op == "avg_pool2d" else FLOATS + INTS))
    k = pair(draw, 1, 3)
    dil = pair(draw, 1, 2)
    st_ = pair(draw, 1, 3)
    ext = (dil[0] * (k[0] - 1) + 1, dil[1] * (k[1] - 1) + 1)
    pad = (
        draw(st.integers(0, ext[0] - 1)),
        draw(st.integers(0, ext[1] - 1)),
        draw(st.integers(0, ext[0] - 1)),
        draw(st.integers(0, ext[1] - 1)),
    )
    h = draw(st.integers(1, 8))
    w = draw(st.integers(1, 8))
    assume(ext[0] <= h + pad[0] + pad[2] and ext[1] <= w + pad[1] + pad[3])
    shape = (draw(st.sampled_from([0, 1, 2])), draw(st.sampled_from([0, 1, 3])), h, w)
    x = values(draw, shape, dtype, draw(st.integers(0, 2**16)))
    if x.dtype.kind == "f" and x.size and draw(st.booleans()):
        flat = x.reshape(-1)
        flat[draw(st.integers(0, x.size - 1))] = draw(
            st.sampled_from([np.nan, np.inf, -np.inf, -0.0])
        )
    extra: dict[str, Any] = {}
    if op == "avg_pool2d":
        extra["count_include_pad"] = draw(st.booleans())
    attrs = bound_attrs(
        op,
        1,
        pool_size=k,
        strides=st_,
        padding=pad,
        dilation=dil,
        ceil_mode=draw(st.booleans()),
        **extra,
    )
    return [layout(draw, x)], attrs


@given(pool_cases("max_pool2d"))
@settings(max_examples=300, deadline=None)
def test_max_pool2d_is_the_loops_bit_for_bit(case) -> None:
    xs, attrs = case
    got = run_checked("max_pool2d", xs, attrs)
    want = ref.max_pool2d(xs, attrs)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@given(pool_cases("avg_pool2d"))
@settings(max_examples=300, deadline=None)
def test_avg_pool2d_is_the_loops_bit_for_bit(case) -> None:
    xs, attrs = case
    got = run_checked("avg_pool2d", xs, attrs)
    want = ref.avg_pool2d(xs, attrs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # NaN where it has NaN
    assert np.array_equal(np.signbit(got), np.signbit(want))


@given(
    st.sampled_from(FLOATS),
    st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(1, 8), st.integers(1, 8)),
    st.integers(0, 2**16),
    st.data(),
)
@settings(max_examples=150, deadline=None)
def test_global_avg_pool2d_window_is_the_loops_bit_for_bit(dtype, shape, seed, data) -> None:
    # a window as large as the input: one sequential accumulation over its cells
    x = values(data.draw, shape, dtype, seed)
    rng = np.random.default_rng(seed)
    special = rng.random(shape) < data.draw(st.sampled_from([0.0, 0.2, 1.0]))
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], dtype)
    x[special] = specials[rng.integers(0, len(specials), int(special.sum()))]
    attrs = bound_attrs("avg_pool2d", 1, pool_size=shape[2:])
    with np.errstate(all="ignore"):
        got = run_checked("avg_pool2d", [layout(data.draw, x)], attrs)
        want = ref.avg_pool2d([x], attrs)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # NaN where it has NaN
    assert np.array_equal(np.signbit(got), np.signbit(want))


@given(pool_cases("max_pool2d"), st.sampled_from(["max", "sum"]))
@settings(max_examples=200, deadline=None)
def test_the_two_pooling_tap_layouts_agree_bit_for_bit(case, reduce) -> None:
    # pool_taps picks runs of phase planes or strided views by size: the same operations
    # per output in the same order either way, so the same bits (NaN, inf and -0 included).
    from relaxc.ir.ops.nn import _pool_geometry

    (x,), attrs = case
    k, st_, dil, out, _, pads = _pool_geometry("max_pool2d", x, attrs)
    assume(x.shape[0] * x.shape[1] * out[0] * out[1] > 0)
    if x.dtype.kind == "f":  # NaNs of both signs meeting in a window, infinities, zeros
        x = np.array(x)
        rng = np.random.default_rng(x.size)
        specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], x.dtype)
        hit = rng.random(x.shape) < 0.3
        x[hit] = specials[rng.integers(0, len(specials), int(hit.sum()))]
    dt = x.dtype if reduce == "max" or x.dtype.kind != "f" else np.dtype(np.float64)
    fill = (-np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min) if reduce == "max" else 0
    results = []
    for kind in (TapRuns, WindowTaps):
        taps = kind(x, pads, st_, out, fill, dt)
        buf, acc = taps.buffer(dt)
        acc[...] = taps.tap(0, 0, dil)
        with np.errstate(all="ignore"):
            for i in range(k[0]):
                for j in range(k[1]):
                    if i or j:
                        (np.maximum if reduce == "max" else np.add)(
                            acc, taps.tap(i, j, dil), out=acc
                        )
        results.append(np.ascontiguousarray(taps.rows(buf)))
    assert results[0].shape == results[1].shape == x.shape[:2] + out
    if reduce == "sum" and x.dtype.kind == "f":
        # numpy's add of two NaNs of opposite signs keeps the one its loop (contiguous or
        # strided, SIMD or not) takes first: the sign of such a NaN is not the layout's to
        # decide (the VM and the interpreter share the layout, so they still agree bit for
        # bit); every other bit is.
        for r in results:
            r[np.isnan(r)] = np.nan
    assert results[0].tobytes() == results[1].tobytes()


# ---------------------------------------------------------------------------------------
# batch_norm, lrn


@given(
    st.sampled_from(FLOATS),
    st.lists(st.integers(0, 4), min_size=1, max_size=4),
    st.integers(0, 3),
    st.integers(0, 2**16),
    st.data(),
)
@settings(max_examples=150, deadline=None)
def test_batch_norm_matches_the_formula(dtype, shape, axis_pick, seed, data) -> None:
    axis = axis_pick % len(shape)
    rng = np.random.default_rng(seed)
    c = shape[axis]
    x = rng.standard_normal(shape).astype(dtype)
    params = [rng.standard_normal(c), rng.standard_normal(c), rng.standard_normal(c)]
    var = rng.uniform(0.1, 2.0, c)
    xs = [data.draw(st.just(x))] + [p.astype(dtype) for p in (*params, var)]
    attrs = bound_attrs("batch_norm", 5, axis=axis, epsilon=1e-5)
    got = run_checked("batch_norm", xs, attrs)
    want = ref.batch_norm(xs, attrs)
    g, b, m, v = (p.astype(np.float64) for p in xs[1:])
    sh = [1] * len(shape)
    sh[axis] = c
    mag = np.abs(x.astype(np.float64)) + np.abs(m.reshape(sh))
    mag = mag / np.sqrt(v.reshape(sh) + 1e-5) * np.abs(g.reshape(sh)) + np.abs(b.reshape(sh))
    bound = 16 * np.finfo(np.float64).eps * mag + np.finfo(dtype).eps * np.abs(want)
    assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= bound)


@given(
    st.sampled_from(FLOATS),
    st.lists(st.integers(0, 5), min_size=1, max_size=4),
    st.integers(0, 3),
    st.integers(1, 6),
    st.sampled_from([0.5, 0.75, 1.0, 2.0]),
    st.integers(0, 2**16),
)
@settings(max_examples=150, deadline=None)
def test_lrn_is_the_loops_bit_for_bit(dtype, shape, axis_pick, size, beta, seed) -> None:
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    attrs = bound_attrs("lrn", 1, size=size, axis=axis_pick % len(shape), beta=beta)
    got = run_checked("lrn", [x], attrs)
    assert got.tobytes() == ref.lrn([x], attrs).tobytes()

"""The low-precision dtypes (ir/lowp.py): ``cast`` to them as ONNX's Cast defines it, checked
against a brute-force rounding over every code of the type and against onnx's reference
implementation; the other ops computing through a wider type."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

ml_dtypes = pytest.importorskip("ml_dtypes")

from relaxc.ir.nodes import DType  # noqa: E402
from relaxc.ir.ops import REGISTRY  # noqa: E402
from relaxc.ir.types import DTYPES, LOWP, TensorType, numpy_dtype  # noqa: E402

F8 = ["f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz"]
INTS = {"i4": (-8, 7), "u4": (0, 15), "i2": (-2, 1), "u2": (0, 3)}
HAS_INF = {"f8e5m2"}


def cast(x: np.ndarray, dtype: str, **attrs: object) -> np.ndarray:
    op = REGISTRY.get("cast")
    assert op is not None and op.kernel is not None
    full = {"dtype": dtype, "saturate": True, "round_mode": "up", **attrs}
    t = op.infer([TensorType(x.shape, _dtype_of(x))], full)
    out = op.kernel([x], full)
    assert out.dtype == numpy_dtype(t.dtype)  # type: ignore[union-attr]
    return out


def _dtype_of(x: np.ndarray) -> str:
    return next(
        n for n, i in DTYPES.items() if i.numpy is not None and np.dtype(i.numpy) == x.dtype
    )


def finite_values(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Every code of ``dtype`` with a finite value, and those values (float64)."""
    n = 16 if dtype == "f4e2m1" else 256
    codes = np.arange(n, dtype=np.uint8)
    values = codes.view(numpy_dtype(dtype)).astype(np.float64)
    keep = np.isfinite(values)
    return codes[keep], values[keep]


def nearest_even(v: float, dtype: str) -> tuple[float, int]:
    """The finite value of ``dtype`` nearest ``v`` (ties: the even code) and its code: the
    rounding by brute force over the type's codes."""
    codes, values = finite_values(dtype)
    d = np.abs(values - v)
    best = d.min()
    ties = codes[d == best]
    code = int(ties[ties % 2 == 0][0]) if len(ties) > 1 else int(ties[0])
    return float(values[codes == code][0]), code


def code_of(a: np.ndarray) -> int:
    return int(a.reshape(-1).view(np.uint8)[0])


float64s = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=300, deadline=None)
@given(v=float64s, dtype=st.sampled_from(F8 + ["f4e2m1"]))
def test_saturating_casts_round_to_the_nearest_finite_value(v: float, dtype: str) -> None:
    got = cast(np.array([v]), dtype)
    if math.isnan(v):  # f4e2m1 has no NaN: ml_dtypes gives a zero
        wide = got.astype(np.float64)
        assert (wide == 0).all() if dtype == "f4e2m1" else np.isnan(wide).all()
        return
    _, values = finite_values(dtype)
    top = float(values.max())
    want, code = nearest_even(min(max(v, -top), top), dtype)
    g = float(got.astype(np.float64)[0])
    assert g == want, (v, g, want)
    if want == 0 and not dtype.endswith("fnuz"):
        assert math.copysign(1, g) == math.copysign(1, v)  # -0 kept
    elif want == 0 and dtype.endswith("fnuz"):
        assert code_of(got) == 0  # no -0: the sign bit alone is the NaN
    else:
        assert math.copysign(1, g) == math.copysign(1, want)


@settings(max_examples=300, deadline=None)
@given(v=float64s, dtype=st.sampled_from(F8))
@example(v=464.0, dtype="f8e4m3fn")  # the tie above 448: down to 448 (even)
@example(v=-464.0, dtype="f8e4m3fn")
@example(v=248.0, dtype="f8e4m3fnuz")  # above 240 (odd): up, NaN
@example(v=61440.0, dtype="f8e5m2")  # above 57344 (odd): up, infinity
@example(v=61440.0, dtype="f8e5m2fnuz")
def test_without_saturation_overflow_gives_infinity_or_nan(v: float, dtype: str) -> None:
    got = float(cast(np.array([v]), dtype, saturate=False).astype(np.float64)[0])
    _, values = finite_values(dtype)
    top = float(values.max())
    if math.isnan(v):
        assert math.isnan(got)
        return
    want, _ = nearest_even(min(max(v, -top), top), dtype)
    # past the top by more than half of its spacing, or by half when the top's code is odd
    # (the tie goes to the even code above it)
    spacing = top - float(np.sort(values)[-2])
    top_code = nearest_even(top, dtype)[1]
    edge = top + spacing / 2
    if abs(v) > edge or (abs(v) == edge and top_code % 2 == 1):
        if dtype in HAS_INF:
            assert got == math.copysign(math.inf, v)
        else:
            assert math.isnan(got)
    else:
        assert got == want


@pytest.mark.parametrize("dtype", F8 + ["f4e2m1"])
def test_ties_go_to_the_even_code(dtype: str) -> None:
    codes, values = finite_values(dtype)
    order = np.argsort(values, kind="stable")
    vs, cs = values[order], codes[order]
    for lo, hi, clo, chi in zip(vs[:-1], vs[1:], cs[:-1], cs[1:]):
        if lo == hi:  # -0 and +0
            continue
        mid = (lo + hi) / 2
        got = code_of(cast(np.array([mid]), dtype))
        even = int(clo) if int(clo) % 2 == 0 else int(chi)
        if 0 in (lo, hi):  # next to a zero: the even code is a zero of either sign
            assert float(cast(np.array([mid]), dtype).astype(float)[0]) == 0, (dtype, mid)
        else:
            assert got == even, (dtype, mid, got, even)


def test_infinities_saturate_to_the_largest_value() -> None:
    x = np.array([np.inf, -np.inf], np.float32)
    for dtype in F8:
        top = float(finite_values(dtype)[1].max())
        np.testing.assert_array_equal(cast(x, dtype).astype(np.float64), [top, -top])
    e5 = cast(x, "f8e5m2", saturate=False).astype(np.float64)
    np.testing.assert_array_equal(e5, [np.inf, -np.inf])
    assert np.isnan(cast(x, "f8e4m3fn", saturate=False).astype(np.float64)).all()


onnx = pytest.importorskip("onnx")
from onnx.reference.ops.op_cast import cast_to as onnx_cast_to  # noqa: E402

ONNX_TYPE = {
    "f8e4m3fn": 17,
    "f8e4m3fnuz": 18,
    "f8e5m2": 19,
    "f8e5m2fnuz": 20,
    "u4": 21,
    "i4": 22,
    "f4e2m1": 23,
    "f8e8m0": 24,
    "u2": 25,
    "i2": 26,
}


@settings(max_examples=300, deadline=None)
@given(
    xs=st.lists(st.floats(width=32), min_size=1, max_size=8),
    src=st.sampled_from(["f16", "f32", "f64"]),
    dtype=st.sampled_from(sorted(ONNX_TYPE)),
    saturate=st.booleans(),
    round_mode=st.sampled_from(["up", "down", "nearest"]),
)
def test_casts_match_onnx_reference(
    xs: list[float], src: str, dtype: str, saturate: bool, round_mode: str
) -> None:
    with np.errstate(all="ignore"):
        x = np.array(xs, numpy_dtype(src))
        want = onnx_cast_to(x, ONNX_TYPE[dtype], saturate, round_mode)
    got = cast(x, dtype, saturate=saturate, round_mode=round_mode)
    same = got.view(np.uint8) == np.asarray(want).view(np.uint8)
    if dtype not in INTS:
        with np.errstate(invalid="ignore"):
            same |= np.isnan(got.astype(np.float32)) & np.isnan(np.asarray(want).astype(np.float32))
    assert same.all(), (x, got, want)


@settings(max_examples=200, deadline=None)
@given(v=st.floats(width=64, allow_nan=True), dtype=st.sampled_from(sorted(INTS)))
def test_a_float_to_a_small_integer_truncates_and_gives_0_outside(v: float, dtype: str) -> None:
    lo, hi = INTS[dtype]
    got = int(cast(np.array([v]), dtype).astype(np.int64)[0])
    t = math.trunc(v) if math.isfinite(v) else None
    assert got == (t if t is not None and lo <= t <= hi else 0)


@settings(max_examples=200, deadline=None)
@given(v=st.integers(-(2**31), 2**31 - 1), dtype=st.sampled_from(sorted(INTS)))
def test_an_integer_to_a_small_integer_keeps_its_low_bits(v: int, dtype: str) -> None:
    lo, hi = INTS[dtype]
    got = int(cast(np.array([v], np.int32), dtype).astype(np.int64)[0])
    width = hi - lo + 1
    assert got == (v - lo) % width + lo


def test_e8m0_rounds_the_exponent_by_round_mode() -> None:
    x = np.array([1.0, 1.5, 1.25, 3.0, 0.0, np.nan, np.inf, 2.0**127 * 1.5], np.float32)
    up = cast(x, "f8e8m0").astype(np.float64)
    down = cast(x, "f8e8m0", round_mode="down").astype(np.float64)
    near = cast(x, "f8e8m0", round_mode="nearest").astype(np.float64)
    np.testing.assert_array_equal(up[:5], [1.0, 2.0, 2.0, 4.0, 2.0**-127])
    np.testing.assert_array_equal(down[:5], [1.0, 1.0, 1.0, 2.0, 2.0**-127])
    np.testing.assert_array_equal(near[:5], [1.0, 2.0, 1.0, 4.0, 2.0**-127])
    assert np.isnan(up[5:7]).all()
    assert up[7] == 2.0**127  # saturated below NaN
    assert np.isnan(cast(x, "f8e8m0", saturate=False).astype(np.float64)[7])


def test_casts_from_the_narrow_types_are_exact() -> None:
    for name, _, kind in LOWP:
        n = 16 if name in ("f4e2m1", "i4", "u4") else (4 if name in ("i2", "u2") else 256)
        x = np.arange(n, dtype=np.uint8).view(numpy_dtype(name))
        wide = x.astype(np.float64)
        got = cast(x, "f64")
        np.testing.assert_array_equal(got, wide)
        if kind != "float":
            np.testing.assert_array_equal(cast(x, "i32"), wide.astype(np.int32))


def test_other_ops_compute_through_float32_and_round_once() -> None:
    a = np.array([1.0, 2.5, -3.0, 448.0], np.float32).astype(ml_dtypes.float8_e4m3fn)
    b = np.array([0.125, 0.5, 1.0, 64.0], np.float32).astype(ml_dtypes.float8_e4m3fn)
    out = REGISTRY.get("add").kernel([a, b], {})  # type: ignore[union-attr, misc]
    assert out.dtype == a.dtype
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(a.dtype)
    np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))
    i = np.array([7, -8, 3], np.int8).astype(ml_dtypes.int4)
    s = REGISTRY.get("add").kernel([i, i], {})  # type: ignore[union-attr, misc]
    assert s.dtype == i.dtype
    np.testing.assert_array_equal(s.astype(np.int8), [-2, 0, 6])  # wraps


def test_a_bad_round_mode_is_refused_in_a_sentence() -> None:
    from relaxc.ir.registry import OpError

    op = REGISTRY.get("cast")
    with pytest.raises(OpError, match="round_mode must be one of up, down, nearest"):
        op.infer(  # type: ignore[union-attr]
            [TensorType((2,), "f32")],
            {"dtype": DType("f8e8m0").name, "saturate": True, "round_mode": "sideways"},
        )

"""resize (ONNX Resize/Upsample) and the hard activations: inference and numpy kernels.

The kernels are checked against the onnx package's reference implementation of Resize (its
own numpy code, ``onnx.reference``) on random inputs for every mode combination."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from relaxc.ir import dims as D
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.nodes import Var
from relaxc.ir.types import TensorType

N = D.Sym("n")


def attrs_of(name: str, **kwargs: Any) -> dict[str, Any]:
    op = REGISTRY.get(name)
    assert op is not None
    return dict(bind_args(op, [Var("x")], list(kwargs.items())).attrs)


def resize(x: np.ndarray, **kwargs: Any) -> np.ndarray:
    op = REGISTRY.get("resize")
    assert op is not None and op.kernel is not None
    return op.kernel([x], attrs_of("resize", **kwargs))


def infer(t: TensorType, **kwargs: Any) -> TensorType:
    op = REGISTRY.get("resize")
    assert op is not None
    out = op.infer([t], attrs_of("resize", **kwargs))
    assert isinstance(out, TensorType)
    return out


def reference_resize(x: np.ndarray, scales: Any, sizes: Any, roi: Any, **attrs: Any) -> np.ndarray:
    from onnx.reference.ops.op_resize import Resize

    run = Resize._run  # the op's numpy code, without building a graph
    (y,) = run(None, x, roi, scales, sizes, **attrs)  # type: ignore[arg-type]
    return np.asarray(y)


def test_bilinear_half_pixel_upsample_by_two() -> None:
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    y = resize(x, sizes=(1, 1, 6, 8), mode="linear")
    # row 0 of the output is input row 0 (clamped), columns at 0, 0.25, 0.75, ...
    np.testing.assert_allclose(y[0, 0, 0], [0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3], rtol=0)
    np.testing.assert_allclose(y[0, 0, :, 0], [0, 1, 3, 5, 7, 8], rtol=0)
    assert y.dtype == np.float32


def test_nearest_copies_elements_exactly_on_integers_and_nan() -> None:
    x = np.array([[1, -7, 2**40]], dtype=np.int64)
    y = resize(
        x,
        sizes=(1, 6),
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    assert y.tolist() == [[1, 1, -7, -7, 2**40, 2**40]]
    f = np.array([np.nan, 1.0], dtype=np.float32)
    assert np.isnan(resize(f, sizes=(4,), mode="nearest")[:2]).all()


def test_identity_axes_may_be_symbolic_resized_ones_not() -> None:
    t = TensorType((N, 3, 4, 4), "f32")
    out = infer(t, sizes=(N, 3, 8, 8), scales=(1.0, 1.0, 2.0, 2.0), mode="linear")
    assert out.shape == (N, 3, 8, 8)
    with pytest.raises(OpError, match="axis 0 is resized"):
        infer(t, sizes=(D.mul(N, 2), 3, 4, 4), mode="nearest")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mode": "bicubic"}, "mode must be one of"),
        ({"coordinate_transformation_mode": "centre"}, "coordinate_transformation_mode"),
        ({"scales": (1.0, 0.0)}, "every scale must be a positive number"),
        ({"roi": (0.0, 1.0)}, "roi must be a tuple of 4 numbers"),
    ],
)
def test_bad_attributes_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(OpError, match=message):
        infer(TensorType((2, 3), "f32"), sizes=(4, 6), **kwargs)


def test_linear_of_integers_is_refused() -> None:
    with pytest.raises(OpError, match="floating-point"):
        infer(TensorType((2, 3), "i32"), sizes=(4, 6), mode="linear")


def _near_tie(shape: tuple, n_out: Any, scales: Any, nearest_mode: str) -> bool:
    """True when a half_pixel_symmetric source coordinate is within 1e-9 of where the nearest
    mode's rounding flips (an integer for floor/ceil, a half for the round modes)."""
    for n_in, n, sc in zip(shape, n_out, scales):
        sc = float(sc)
        adjustment = int(n) / (n_in * sc)
        offset = n_in / 2 * (1 - adjustment)
        x = offset + (np.arange(int(n)) + 0.5) / sc - 0.5
        frac = x - np.floor(x)
        flip = 0.5 if nearest_mode.startswith("round") else 0.0
        if np.any(np.abs(frac - flip) < 1e-9) or (flip == 0.0 and np.any(1 - frac < 1e-9)):
            return True
    return False


def _reference_misplaced(
    x_shape: tuple,
    out_shape: tuple,
    scales: Any,
    roi: Any,
    coord: str,
    mode: str,
    antialias: bool,
) -> list[np.ndarray]:
    """Per axis, the output positions where onnx's reference puts its filter one tap off.

    Its coefficients come from the coordinate x, its window of n indices (its filter's
    length) from x + n / 2 (its edge padding) rounded to float64: a coordinate a few ulps above an
    integer (1.1e-16 where half_pixel_symmetric's offset lands on 0) has its fraction lost by
    that addition, the window starts a tap lower than its coefficients, and the weight meant
    for x[k] lands on x[k - 1] (with exclude_outside at the edge: on nothing, and the output is
    0). onnxruntime, like relaxc, takes the taps around the coordinate itself (the frontend's
    test_resize_coordinate_just_above_an_integer_matches_onnxruntime checks that draw)."""
    from onnx.reference.ops.op_resize import _compute_x_ori

    rank = len(x_shape)
    out = []
    for axis in range(rank):
        n_in, n_out = x_shape[axis], out_shape[axis]
        scale = float(scales[axis]) if scales is not None else n_out / n_in
        reach = {"nearest": 1, "linear": 1, "cubic": 2}[mode]
        s = min(scale, 1.0) if antialias else 1.0
        pad = 1 - int(np.floor(-reach / s) + 1)  # half its 2 - 2 * first taps
        axis_roi = None if roi is None else [roi[axis], roi[axis + rank]]
        y = np.arange(n_out, dtype=np.float64)
        x, _ = _compute_x_ori(coord, y, scale, n_in, scale * n_in, n_out, axis_roi)
        base = np.floor(x) - (x == np.floor(x))  # the interval x counts as in: (base, base + 1]
        xp = x + pad
        base_window = np.floor(xp) - (xp == np.floor(xp)) - pad
        out.append(np.nonzero(base != base_window)[0])
    return out


COORDS = [
    "half_pixel",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "half_pixel_symmetric",
    "tf_crop_and_resize",
]


@settings(max_examples=60, deadline=None)
@given(
    mode=st.sampled_from(["nearest", "linear", "cubic"]),
    coord=st.sampled_from(COORDS),
    nearest_mode=st.sampled_from(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]),
    shape=st.tuples(st.integers(1, 5), st.integers(1, 6)),
    out=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    by_scales=st.booleans(),
    exclude_outside=st.booleans(),
    antialias=st.booleans(),
    seed=st.integers(0, 2**16),
)
@example(  # a length-1 axis, its one coordinate exactly on the input (cubic, antialias)
    mode="cubic",
    coord="half_pixel_symmetric",
    nearest_mode="round_prefer_floor",
    shape=(5, 1),
    out=(5, 2),
    by_scales=True,
    exclude_outside=True,
    antialias=True,
    seed=0,
)
def test_resize_matches_the_onnx_reference(
    mode: str,
    coord: str,
    nearest_mode: str,
    shape: tuple,
    out: tuple,
    by_scales: bool,
    exclude_outside: bool,
    antialias: bool,
    seed: int,
) -> None:
    """Every mode, coordinate mode and nearest mode, scales or sizes, against onnx's own
    numpy implementation (f64 input: the sums' order is the only difference)."""
    x = np.random.default_rng(seed).normal(size=(1, 1) + shape)
    scales = np.array([1, 1, out[0] / shape[0] * 1.25, out[1] / shape[1] * 0.8], np.float32)
    sizes = np.array((1, 1) + out, np.int64)
    # (binary fractions: onnx's reference mixes float32 and float64 on roi, which moves near-ties)
    roi = np.array([0, 0, 0.25, -0.125, 1, 1, 0.875, 0.75], np.float32)
    antialias = antialias and mode != "nearest"
    # (onnx's reference zeroes a nearest tap outside the input with exclude_outside; ONNX
    # defines the attribute for the filters' taps, and onnxruntime ignores it for nearest)
    exclude_outside = exclude_outside and mode != "nearest"
    # (pytorch_half_pixel onto one position: ONNX and onnxruntime take coordinate 0, onnx's
    # reference -0.5 or the half-pixel formula when the scale's length is fractional)
    n_out = np.floor(np.array(shape) * scales[2:]).astype(int) if by_scales else out
    if coord == "pytorch_half_pixel" and 1 in list(n_out):
        coord = "half_pixel"
    if mode == "nearest" and coord == "half_pixel_symmetric":
        # (its offset divides by the unrounded output length: a coordinate that is a tie in
        # exact arithmetic lands on either side of it by a rounding, in either implementation)
        s_eff = scales[2:] if by_scales else np.array(out) / np.array(shape)
        assume(not _near_tie(shape, n_out, s_eff, nearest_mode))
    common = dict(
        mode=mode,
        coordinate_transformation_mode=coord,
        nearest_mode=nearest_mode,
        exclude_outside=exclude_outside,
        antialias=antialias,
        extrapolation_value=-3.0,
    )
    want = reference_resize(
        x,
        scales if by_scales else None,
        None if by_scales else sizes,
        roi if coord == "tf_crop_and_resize" else None,
        cubic_coeff_a=-0.5,
        keep_aspect_ratio_policy="stretch",
        **common,
    )
    got = resize(
        x,
        sizes=tuple(int(d) for d in want.shape),
        scales=tuple(float(s) for s in scales) if by_scales else None,
        roi=tuple(float(r) for r in roi) if coord == "tf_crop_and_resize" else None,
        cubic_coeff_a=-0.5,
        **common,
    )
    bad = _reference_misplaced(
        x.shape,
        want.shape,
        scales if by_scales else None,
        roi if coord == "tf_crop_and_resize" else None,
        coord,
        mode,
        antialias,
    )
    for axis, positions in enumerate(bad):  # (compare everything else)
        keep = np.setdiff1d(np.arange(want.shape[axis]), positions)
        got, want = np.take(got, keep, axis=axis), np.take(want, keep, axis=axis)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_resize_on_three_axes_matches_the_reference() -> None:
    x = np.random.default_rng(3).normal(size=(2, 3, 4)).astype(np.float32)
    for mode in ("nearest", "linear", "cubic"):
        want = reference_resize(
            x,
            None,
            np.array([3, 5, 7]),
            None,
            mode=mode,
            coordinate_transformation_mode="half_pixel",
            nearest_mode="round_prefer_floor",
            cubic_coeff_a=-0.75,
            exclude_outside=False,
            antialias=False,
            extrapolation_value=0.0,
            keep_aspect_ratio_policy="stretch",
        )
        got = resize(x, sizes=(3, 5, 7), mode=mode)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        assert got.dtype == np.float32


# -- hard_sigmoid, hard_swish --------------------------------------------------------------


def run_unary(name: str, x: np.ndarray, **kwargs: Any) -> np.ndarray:
    op = REGISTRY.get(name)
    assert op is not None and op.kernel is not None
    return op.kernel([x], attrs_of(name, **kwargs))


def test_hard_sigmoid_values_and_attributes() -> None:
    x = np.array([-10.0, -2.5, 0.0, 1.0, 2.5, 10.0, np.nan], np.float32)
    np.testing.assert_allclose(run_unary("hard_sigmoid", x)[:6], [0, 0, 0.5, 0.7, 1, 1], rtol=1e-6)
    np.testing.assert_allclose(
        run_unary("hard_sigmoid", x, alpha=0.5, beta=0.25)[:6], [0, 0, 0.25, 0.75, 1, 1], rtol=1e-6
    )
    assert np.isnan(run_unary("hard_sigmoid", x)[6])


def test_hard_swish_is_x_times_hard_sigmoid_of_one_sixth() -> None:
    x = np.linspace(-5, 5, 41).astype(np.float64)
    want = x * np.clip(x / 6 + 0.5, 0, 1)
    np.testing.assert_allclose(run_unary("hard_swish", x), want, rtol=1e-12, atol=1e-15)
    h = run_unary("hard_swish", x.astype(np.float16))
    assert h.dtype == np.float16
    np.testing.assert_allclose(h, want, rtol=2e-3, atol=2e-3)


def test_hard_activations_are_elementwise_float_only_in_place() -> None:
    for name in ("hard_sigmoid", "hard_swish"):
        op = REGISTRY.get(name)
        assert op is not None and op.elementwise and op.float_only and op.inplace == (0,)
        with pytest.raises(OpError, match="floating-point"):
            op.infer([TensorType((2,), "i32")], attrs_of(name))


def test_every_nearest_mode_picks_its_neighbour() -> None:
    x = np.arange(4, dtype=np.float32)  # asymmetric at scale 2 / 1.6: ties and non-ties
    got = {
        m: resize(
            x,
            sizes=(8,),
            scales=(2.0,),
            coordinate_transformation_mode="asymmetric",
            nearest_mode=m,
        ).tolist()
        for m in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
    }
    assert got["floor"] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert got["ceil"] == [0, 1, 1, 2, 2, 3, 3, 3]
    assert got["round_prefer_floor"] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert got["round_prefer_ceil"] == [0, 1, 1, 2, 2, 3, 3, 3]
    assert list(itertools.chain(got["floor"])) != got["ceil"]

"""grid_sample (ONNX GridSample): inference and the numpy kernel, checked against the onnx
package's reference implementation (its own numpy code, ``onnx.reference``) for every mode,
padding mode and alignment on 1-, 2- and 3-D spatial inputs, and by properties: an identity
grid returns its input, a position far outside reads the padding."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from relaxc.frontend.onnx.convert_sampling import base_grid
from relaxc.ir import dims as D
from relaxc.ir.nodes import Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import TensorType

MODES = ("nearest", "linear", "cubic")
PADDINGS = ("zeros", "border", "reflection")


def attrs_of(**kwargs: Any) -> dict[str, Any]:
    op = REGISTRY.get("grid_sample")
    assert op is not None
    return dict(bind_args(op, [Var("x"), Var("g")], list(kwargs.items())).attrs)


def grid_sample(x: np.ndarray, grid: np.ndarray, **kwargs: Any) -> np.ndarray:
    op = REGISTRY.get("grid_sample")
    assert op is not None and op.kernel is not None
    return op.kernel([x, grid], attrs_of(**kwargs))


def infer(x: TensorType, grid: TensorType, **kwargs: Any) -> TensorType:
    op = REGISTRY.get("grid_sample")
    assert op is not None
    out = op.infer([x, grid], attrs_of(**kwargs))
    assert isinstance(out, TensorType)
    return out


def reference(x: np.ndarray, grid: np.ndarray, mode: str, padding: str, align: bool) -> Any:
    from onnx.reference.ops.op_grid_sample import GridSample

    node = GridSample.__new__(GridSample)  # the op's numpy code, without building a graph
    node.mode, node.padding_mode, node.align_corners = mode, padding, int(align)
    (y,) = GridSample._run(node, x, grid)
    return np.asarray(y)


def identity_grid(n: int, sizes: list[int], align: bool) -> np.ndarray:
    """The grid whose every position samples itself."""
    coords = base_grid(sizes, align)[:, :-1].reshape(*sizes, len(sizes))
    return np.broadcast_to(coords, (n, *coords.shape)).astype(np.float32)


SHAPES = [((2, 3, 4, 5), (2, 3, 6, 2)), ((1, 2, 3, 2, 4), (1, 2, 3, 2, 3)), ((2, 2, 5), (2, 7, 1))]


REFERENCE_COMBOS = [
    c for c in itertools.product(MODES, PADDINGS, (False, True)) if c[:2] != ("cubic", "border")
]
"""Every combination but cubic with border padding, where onnx's reference clamps the position
before taking the taps (relaxc, onnxruntime and PyTorch clamp each tap: see
test_cubic_border_pads_the_input_with_its_edge_values)."""


@pytest.mark.parametrize("shapes", SHAPES, ids=["2d", "3d", "1d"])
@pytest.mark.parametrize("mode,padding,align", REFERENCE_COMBOS)
def test_matches_onnx_reference(
    shapes: tuple[tuple[int, ...], tuple[int, ...]], mode: str, padding: str, align: bool
) -> None:
    xs, gs = shapes
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xs).astype(np.float32)
    grid = rng.uniform(-2.5, 2.5, gs).astype(np.float32)
    grid.reshape(-1)[:4] = [-1.0, 1.0, 0.0, 0.25]  # ends, centre, a rounding tie
    got = grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)
    with np.errstate(all="ignore"):
        want = reference(x, grid, mode, padding, align)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("align", [False, True])
def test_cubic_border_pads_the_input_with_its_edge_values(align: bool) -> None:
    """Cubic with border padding is cubic with zeros padding on the input padded by its edge
    values (3 on each side, more than the 2 a tap reaches outside)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float64)
    grid = rng.uniform(-1.3, 1.3, (1, 3, 6, 2))
    padded = np.pad(x, ((0, 0), (0, 0), (3, 3), (3, 3)), mode="edge")
    # the same positions in the padded input: p' = p + 3 on each axis
    scaled = grid.copy()
    for k, (d, dp) in enumerate([(5, 11), (4, 10)]):  # grid[..., 0] is the last axis
        p = (grid[..., k] + 1) / 2 * (d - 1) if align else ((grid[..., k] + 1) * d - 1) / 2
        scaled[..., k] = (p + 3) * 2 / (dp - 1) - 1 if align else (2 * (p + 3) + 1) / dp - 1
    got = grid_sample(x, grid, mode="cubic", padding_mode="border", align_corners=align)
    want = grid_sample(padded, scaled, mode="cubic", padding_mode="zeros", align_corners=align)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_bilinear_between_four_elements() -> None:
    x = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32)
    grid = np.array([[[[0.0, 0.0], [-1.0, -1.0], [1.0, 1.0]]]], np.float32)
    y = grid_sample(x, grid, mode="linear", align_corners=True)
    np.testing.assert_array_equal(y, [[[[2.5, 1.0, 4.0]]]])
    y = grid_sample(x, grid, mode="linear", align_corners=False)  # -1 is the outer edge
    np.testing.assert_array_equal(y, [[[[2.5, 0.25, 1.0]]]])


@pytest.mark.parametrize("padding,want", [("zeros", 0.0), ("border", 4.0), ("reflection", 4.0)])
def test_a_position_far_outside_reads_the_padding(padding: str, want: float) -> None:
    x = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32)
    grid = np.array([[[[5.0, 9.0]]]], np.float32)
    y = grid_sample(x, grid, mode="nearest", padding_mode=padding, align_corners=True)
    # reflection at 0 and 1: 9 (position 5) reflects to 1, 5 (position 3) to 1
    assert y.reshape(-1).tolist() == [want]


def test_a_non_finite_coordinate_gives_nan() -> None:
    x = np.ones((1, 2, 2, 2), np.float32)
    grid = np.array([[[[np.nan, 0.0], [0.0, np.inf], [0.0, 0.0]]]], np.float32)
    y = grid_sample(x, grid, mode="cubic", padding_mode="reflection")
    assert np.isnan(y[:, :, :, :2]).all() and (y[:, :, :, 2] == 1.0).all()
    xi = np.arange(8, dtype=np.int32).reshape(1, 2, 2, 2)
    assert (grid_sample(xi, grid, mode="nearest")[..., :2] == 0).all()


def test_nearest_copies_integers_and_rounds_half_to_even() -> None:
    x = np.arange(5, dtype=np.int64).reshape(1, 1, 5)
    # positions 0.5, 1.5, 2.5 (align_corners: g = p / 2 - 1) round to 0, 2, 2
    grid = np.array([[[-0.75], [-0.25], [0.25]]], np.float32)
    y = grid_sample(x, grid, mode="nearest", align_corners=True)
    assert y.dtype == np.int64 and y.reshape(-1).tolist() == [0, 2, 2]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=3),
    st.sampled_from(MODES),
    st.sampled_from(PADDINGS),
    st.booleans(),
    st.integers(0, 2**16),
)
def test_an_identity_grid_returns_its_input(
    sizes: list[int], mode: str, padding: str, align: bool, seed: int
) -> None:
    x = np.random.default_rng(seed).standard_normal((2, 3, *sizes)).astype(np.float32)
    y = grid_sample(
        x, identity_grid(2, sizes, align), mode=mode, padding_mode=padding, align_corners=align
    )
    np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(np.float32, (1, 2, 3, 4), elements=st.floats(-4, 4, width=32)),
    hnp.arrays(np.float32, (1, 2, 5, 2), elements=st.floats(-3, 3, width=32)),
    st.sampled_from(PADDINGS),
    st.booleans(),
)
def test_linear_stays_within_the_inputs_range(
    x: np.ndarray, grid: np.ndarray, padding: str, align: bool
) -> None:
    """Linear weights are a convex combination (zeros padding adds 0 to the range)."""
    y = grid_sample(x, grid, mode="linear", padding_mode=padding, align_corners=align)
    lo, hi = float(x.min()), float(x.max())
    if padding == "zeros":
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    assert (y >= lo - 1e-5).all() and (y <= hi + 1e-5).all()


def test_infers_the_output_shape() -> None:
    n = D.Sym("n")
    t = infer(TensorType((n, 3, 4, 5), "f32"), TensorType((n, 7, 2, 2), "f16"))
    assert t == TensorType((n, 3, 7, 2), "f32")
    t = infer(TensorType((1, 2, 3, 4, 5), "f64"), TensorType((1, 6, 7, 8, 3), "f32"))
    assert t.shape == (1, 2, 6, 7, 8) and t.dtype == "f64"


@pytest.mark.parametrize(
    "x,grid,kwargs,words",
    [
        ((2, 3, 4, 5), (1, 3, 3, 2), {}, "different batches"),
        ((2, 3, 4, 5), (2, 3, 3, 3), {}, "last axis must be 2"),
        ((2, 3, 4, 5), (2, 3, 3, 3, 3), {}, "rank 4"),
        ((2, 3), (2, 3), {}, "rank 3 or more"),
        ((2, 3, 0, 5), (2, 3, 3, 2), {}, "static non-zero length"),
        ((2, 3, 4, 5), (2, 3, 3, 2), {"mode": "bilinear"}, "mode must be one of"),
        ((2, 3, 4, 5), (2, 3, 3, 2), {"padding_mode": "wrap"}, "padding_mode must be one of"),
    ],
)
def test_inference_refuses_bad_inputs(
    x: tuple[int, ...], grid: tuple[int, ...], kwargs: dict[str, Any], words: str
) -> None:
    with pytest.raises(OpError, match=words):
        infer(TensorType(x, "f32"), TensorType(grid, "f32"), **kwargs)


def test_inference_refuses_integers_for_linear_and_an_integer_grid() -> None:
    with pytest.raises(OpError, match="floating-point"):
        infer(TensorType((1, 1, 2, 2), "i32"), TensorType((1, 2, 2, 2), "f32"), mode="cubic")
    with pytest.raises(OpError, match="grid must be floating-point"):
        infer(TensorType((1, 1, 2, 2), "f32"), TensorType((1, 2, 2, 2), "i64"))
    with pytest.raises(OpError, match="static"):
        infer(TensorType((1, 1, D.Sym("h"), 2), "f32"), TensorType((1, 2, 2, 2), "f32"))

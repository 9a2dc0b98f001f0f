"""The padding, tiling and indexing converters (convert_movement.py) against onnxruntime on
random inputs, on the interpreter, the VM and C: Pad (every mode, pads as an initializer and
computed from shapes), CenterCropPad, Tile, DepthToSpace, SpaceToDepth, GatherElements,
GatherND, ScatterND, ScatterElements, OneHot, Trilu, Compress and Einsum."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.frontend.onnx import import_onnx
from relaxc.frontend.printer import print_module
from relaxc.ir.diagnostics import RxError

from .test_ops_reduce import _everywhere
from .util import helper, make_model, randn

F32 = np.float32
I64 = np.int64


def _model(
    op: str,
    x: np.ndarray,
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 19,
    inputs: tuple[str, ...] | None = None,
    out: Any = None,
    **attrs: Any,
) -> Any:
    inits = inits or {}
    names = ["x", *inits] if inputs is None else list(inputs)
    node = helper.make_node(op, names, ["y"], **attrs)
    return make_model(
        [node],
        [("x", x.dtype.type, list(x.shape))],
        [("y", x.dtype.type if out is None else out, None)],
        initializers=inits,
        opset=opset,
    )


# -- Pad / CenterCropPad / Tile -----------------------------------------------------------


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_match_onnxruntime(mode: str) -> None:
    x = randn(2, 3, 5, 6)
    pads = np.array([0, 1, 2, 1, 0, 0, 3, 2], I64)
    inits = {"pads": pads}
    if mode == "constant":
        inits["value"] = np.array(1.5, F32)
    _everywhere(_model("Pad", x, inits, mode=mode), {"x": x}, {})


def test_pad_with_axes_and_negative_pads_crops() -> None:
    x = randn(3, 4, 7)
    inits = {"pads": np.array([2, -1, -2, 3], I64), "value": np.array(0.0, F32)}
    inits["axes"] = np.array([-1, 1], I64)
    _everywhere(_model("Pad", x, inits, opset=18), {"x": x}, {})


def test_pad_before_opset_11_reads_its_attribute() -> None:
    x = randn(2, 3)
    _everywhere(_model("Pad", x, opset=2, pads=[1, 0, 2, 3], value=-1.0), {"x": x}, {})


def test_pads_computed_from_the_input_shape_are_folded_at_import() -> None:
    """pads = [0, 0, 0, 0, 0, 0, H, W] from Shape -> Slice -> Concat, as exporters write
    padding to twice the size: folded to a constant pad."""
    x = randn(1, 2, 3, 4)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "two", "four"], ["hw"]),
        helper.make_node("Concat", ["zeros", "hw"], ["pads"], axis=0),
        helper.make_node("Pad", ["x", "pads"], ["y"], mode="constant"),
    ]
    inits = {
        "two": np.array([2], I64),
        "four": np.array([4], I64),
        "zeros": np.zeros(6, I64),
    }
    model = make_model(
        nodes, [("x", F32, [1, 2, 3, 4])], [("y", F32, None)], initializers=inits, opset=13
    )
    _everywhere(model, {"x": x}, {})
    assert "pads=(0, 0, 0, 0, 0, 0, 3, 4)" in print_module(import_onnx(model).module)


def test_center_crop_pad_crops_one_axis_and_pads_another() -> None:
    x = randn(2, 5, 4)
    inits = {"shape": np.array([3, 7], I64)}
    _everywhere(_model("CenterCropPad", x, inits, opset=18, axes=[1, 2]), {"x": x}, {})


@pytest.mark.parametrize("dtype", [F32, I64, np.bool_])
def test_tile_matches_onnxruntime(dtype: Any) -> None:
    x = (randn(2, 3, 1) * 4).astype(dtype)
    _everywhere(_model("Tile", x, {"r": np.array([2, 1, 3], I64)}), {"x": x}, {})


# -- DepthToSpace / SpaceToDepth -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_modes(mode: str) -> None:
    x = randn(2, 8, 3, 2)
    _everywhere(_model("DepthToSpace", x, opset=13, blocksize=2, mode=mode), {"x": x}, {})


def test_space_to_depth_inverts_depth_to_space_dcr() -> None:
    x = randn(1, 3, 4, 6)
    _everywhere(_model("SpaceToDepth", x, opset=13, blocksize=2), {"x": x}, {})
    nodes = [
        helper.make_node("SpaceToDepth", ["x"], ["d"], blocksize=2),
        helper.make_node("DepthToSpace", ["d"], ["y"], blocksize=2, mode="DCR"),
    ]
    model = make_model(nodes, [("x", F32, [1, 3, 4, 6])], [("y", F32, None)], opset=13)
    from .node_cases import _vm

    result = import_onnx(model)
    np.testing.assert_array_equal(_vm(result, [x], {})[0], x)


# -- Gather / Scatter ------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_with_negative_indices(axis: int) -> None:
    x = randn(3, 4, 5)
    idx = np.random.default_rng(axis + 5).integers(-3, 3, size=(2, 3, 4)).astype(I64)
    _everywhere(_model("GatherElements", x, {"i": idx}, opset=13, axis=axis), {"x": x}, {})


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd(batch_dims: int) -> None:
    x = randn(2, 3, 4)
    idx = np.array([[[1, -1]], [[0, 2]]], I64) if batch_dims else np.array([[1, 2], [-1, 0]], I64)
    model = _model("GatherND", x, {"i": idx}, opset=13, batch_dims=batch_dims)
    _everywhere(model, {"x": x}, {})


@pytest.mark.parametrize("reduction", [None, "add", "mul", "max", "min"])
def test_scatter_nd_reductions(reduction: str | None) -> None:
    x = randn(4, 3, 2)
    inits = {"i": np.array([[1, 2], [3, 0], [1, 2]], I64), "u": randn(3, 2, seed=4)}
    if reduction is None:  # duplicates are undefined without a reduction
        inits["i"] = np.array([[1, 2], [3, 0], [0, 1]], I64)
    attrs = {} if reduction is None else {"reduction": reduction}
    _everywhere(_model("ScatterND", x, inits, opset=18, **attrs), {"x": x}, {})


@pytest.mark.parametrize("reduction", [None, "add", "max"])
def test_scatter_elements(reduction: str | None) -> None:
    x = randn(3, 5)
    inits = {"i": np.array([[0, 4, -1], [2, 2, 1]], I64), "u": randn(2, 3, seed=2)}
    if reduction is None:
        inits["i"] = np.array([[0, 4, -2], [2, 1, 3]], I64)
    attrs = {} if reduction is None else {"reduction": reduction}
    _everywhere(_model("ScatterElements", x, inits, opset=18, axis=1, **attrs), {"x": x}, {})


# -- OneHot / Trilu / Compress / Einsum ------------------------------------------------------


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_with_negative_and_out_of_range_indices(axis: int) -> None:
    x = np.array([[0, 3, -1], [5, 2, -4]], I64)
    inits = {"depth": np.array(4, I64), "values": np.array([-1.0, 2.0], F32)}
    _everywhere(_model("OneHot", x, inits, opset=11, out=F32, axis=axis), {"x": x}, {})


@pytest.mark.parametrize(("upper", "k"), [(1, 0), (1, 2), (0, -1), (0, 5)])
def test_trilu(upper: int, k: int) -> None:
    x = randn(2, 4, 5)
    model = _model("Trilu", x, {"k": np.array(k, I64)}, opset=14, upper=upper)
    _everywhere(model, {"x": x}, {})


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_compress_with_a_constant_condition(axis: int | None) -> None:
    x = randn(3, 4)
    cond = np.array([True, False, True], np.bool_)
    attrs = {} if axis is None else {"axis": axis}
    _everywhere(_model("Compress", x, {"c": cond}, opset=11, **attrs), {"x": x}, {})


def test_compress_with_a_run_time_condition_is_refused_naming_the_node() -> None:
    node = helper.make_node("Compress", ["x", "c"], ["y"], name="pick", axis=0)
    model = make_model(
        [node], [("x", F32, [3, 4]), ("c", np.bool_, [3])], [("y", F32, None)], opset=11
    )
    with pytest.raises(RxError, match="pick.*depends on tensor values"):
        import_onnx(model)


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
        ("ii->i", [(4, 4)]),
        ("ij->", [(3, 4)]),
        ("i,j->ij", [(3,), (4,)]),
        ("...ij,...jk", [(2, 3, 4), (2, 4, 5)]),
    ],
)
def test_einsum_matches_onnxruntime(equation: str, shapes: list[tuple[int, ...]]) -> None:
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    model = make_model(
        [node], [(n, F32, list(s)) for n, s in zip(names, shapes)], [("y", F32, None)], opset=12
    )
    feeds = {n: randn(*s, seed=i) for i, (n, s) in enumerate(zip(names, shapes))}
    _everywhere(model, feeds, {})


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=3),
    st.data(),
)
def test_pad_constant_is_numpy_pad_of_the_crop(shape: list[int], data: Any) -> None:
    """Property: a constant Pad with any pads (negative ones crop) equals numpy's pad of the
    cropped input, on the interpreter."""
    rank = len(shape)
    before = [data.draw(st.integers(-shape[a] + 1, 3)) for a in range(rank)]
    after = [data.draw(st.integers(-shape[a] + 1 - min(before[a], 0), 3)) for a in range(rank)]
    x = randn(*shape)
    model = _model("Pad", x, {"pads": np.array(before + after, I64)}, opset=13)
    from .node_cases import _interp

    got = _interp(import_onnx(model), [x], {})[0]
    crop = tuple(slice(max(-b, 0), s - max(-e, 0)) for b, e, s in zip(before, after, shape))
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(before, after)]
    np.testing.assert_array_equal(got, np.pad(x[crop], widths))

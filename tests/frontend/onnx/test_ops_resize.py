"""Resize, Upsample, ConvTranspose, HardSigmoid and HardSwish from ONNX: against onnxruntime
on random inputs for the attribute combinations exporters write, and the onnx package's node
tests through the interpreter, the VM (and C for a sample)."""

from __future__ import annotations

import copy
import functools
from typing import Any

import numpy as np
import pytest
from onnx import helper, numpy_helper

from relaxc.frontend.onnx import import_onnx
from relaxc.ir.diagnostics import RxError

from tests.backend.c.cbuild import needs_cc

from .node_cases import all_cases, run_case, select
from .util import import_and_compare, make_model, randn, run_interpreter

OPS = ["Resize", "Upsample", "ConvTranspose", "HardSigmoid", "HardSwish"]


@functools.cache
def node_cases() -> tuple[Any, ...]:
    return tuple(select(all_cases(), OPS))


class WithConstants:
    """A node test case whose inputs after the first are initializers (as exporters write
    scales, sizes and roi), its first data set's values: the node tests pass them as graph
    inputs, which relaxc refuses (they must be known when the model is imported)."""

    def __init__(self, case: Any) -> None:
        model = copy.deepcopy(case.model)
        inputs, want = case.data_sets[0]
        graph = model.graph
        for vi, arr in list(zip(graph.input, inputs))[1:]:
            graph.initializer.append(numpy_helper.from_array(np.asarray(arr), vi.name))
        del graph.input[1:]
        self.model, self.name = model, case.name
        self.data_sets = [(list(inputs[:1]), want)]


def expected_refusal(case: Any) -> bool:
    """The case relaxc refuses: 3-D ConvTranspose."""
    return case.name == "test_convtranspose_3d"


def test_node_tests_pass_with_their_constant_inputs_folded() -> None:
    cases = node_cases()
    assert len(cases) >= 55
    for case in cases:
        outcome = run_case(WithConstants(case) if len(case.model.graph.input) > 1 else case)
        if expected_refusal(case):
            assert outcome.status == "refused", (case.name, outcome)
        else:
            assert outcome.status == "passed", (case.name, outcome.message)


@needs_cc
def test_node_tests_pass_in_c_for_a_sample() -> None:
    sample = [c for c in node_cases() if not expected_refusal(c)][::4]
    for case in sample:
        wrapped = WithConstants(case) if len(case.model.graph.input) > 1 else case
        outcome = run_case(wrapped, ("c",))
        assert outcome.status == "passed", (case.name, outcome.message)


def test_resize_sizes_given_at_run_time_are_refused_with_a_sentence() -> None:
    """The node test feeds its sizes as a graph input: the import refuses it with a sentence
    (run_case then binds the input to the test's values, as an exported model holds it)."""
    case = next(c for c in node_cases() if c.name == "test_resize_upsample_sizes_nearest")
    with pytest.raises(
        RxError,
        match="its output shape depends on tensor values: its sizes input is computed at run",
    ):
        import_onnx(case.model)
    outcome = run_case(case)
    assert outcome.status == "passed" and outcome.bound == ("sizes",), outcome


# -- against onnxruntime ------------------------------------------------------------------


def resize_model(
    x_shape: tuple,
    attrs: dict,
    scales: Any = None,
    sizes: Any = None,
    opset: int = 19,
    roi: Any = None,
) -> Any:
    inits: dict[str, np.ndarray] = {}
    names = ["x", "", "", ""]
    if roi is not None:
        inits["roi"], names[1] = np.asarray(roi, np.float32), "roi"
    if scales is not None:
        inits["scales"], names[2] = np.asarray(scales, np.float32), "scales"
    if sizes is not None:
        inits["sizes"], names[3] = np.asarray(sizes, np.int64), "sizes"
    while names[-1] == "":
        names.pop()
    node = helper.make_node("Resize", names, ["y"], **attrs)
    return make_model(
        [node], [("x", np.float32, list(x_shape))], [("y", np.float32, None)], inits, opset=opset
    )


EXPORTER_COMBINATIONS = [
    # (attrs, scales, sizes): PyTorch's nearest and bilinear/bicubic, TF's, PaddlePaddle's
    (
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        },
        [1, 1, 2, 2],
        None,
    ),
    (
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "half_pixel",
            "nearest_mode": "round_prefer_floor",
        },
        None,
        [1, 3, 7, 9],
    ),
    (
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "tf_half_pixel_for_nn",
            "nearest_mode": "round_prefer_ceil",
        },
        [1, 1, 1.5, 2],
        None,
    ),
    (
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "align_corners",
            "nearest_mode": "ceil",
        },
        None,
        [1, 3, 3, 4],
    ),
    (
        {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
        [1, 1, 2, 2],
        None,
    ),
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel"}, None, [1, 3, 3, 5]),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None, [1, 3, 9, 11]),
    ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 3, 0.5], None),
    (
        {
            "mode": "cubic",
            "coordinate_transformation_mode": "pytorch_half_pixel",
            "cubic_coeff_a": -0.75,
        },
        [1, 1, 2, 2],
        None,
    ),
    (
        {
            "mode": "cubic",
            "coordinate_transformation_mode": "half_pixel",
            "cubic_coeff_a": -0.5,
            "exclude_outside": 1,
        },
        None,
        [1, 3, 8, 3],
    ),
    (
        {"mode": "linear", "coordinate_transformation_mode": "half_pixel", "antialias": 1},
        None,
        [1, 3, 2, 3],
    ),
]


@pytest.mark.parametrize("attrs, scales, sizes", EXPORTER_COMBINATIONS)
def test_resize_matches_onnxruntime(attrs: dict, scales: Any, sizes: Any) -> None:
    opset = 13 if attrs["coordinate_transformation_mode"] == "tf_half_pixel_for_nn" else 19
    attrs = {k: v for k, v in attrs.items() if opset >= 18 or k != "antialias"}
    model = resize_model((1, 3, 5, 6), attrs, scales, sizes, opset=opset)
    import_and_compare(model, {"x": randn(1, 3, 5, 6, seed=3)})


def test_resize_coordinate_just_above_an_integer_matches_onnxruntime() -> None:
    """half_pixel_symmetric with a scale of 1.25 puts output 0 at 1.1e-16 (its offset's
    rounding): its cubic taps are -1..2, input 0 weighs one, and with exclude_outside that
    stays so. onnxruntime gives x[0]; onnx's reference loses the 1.1e-16 when it adds its edge
    padding, shifts its window a tap down and gives 0 (tests/ir/test_ops_resize.py's property
    leaves such positions out of its comparison with it)."""
    attrs = {
        "mode": "cubic",
        "coordinate_transformation_mode": "half_pixel_symmetric",
        "cubic_coeff_a": -0.5,
        "exclude_outside": 1,
        "antialias": 1,
    }
    model = resize_model((1, 1, 5, 1), attrs, scales=[1, 1, 1.25, 1.6], opset=19)
    x = randn(1, 1, 5, 1, seed=0)
    result = import_and_compare(model, {"x": x})
    (y,) = run_interpreter(result, [x])
    assert y[0, 0, 0, 0] == pytest.approx(x[0, 0, 0, 0], abs=1e-6)


def test_resize_axes_and_keep_aspect_ratio_match_onnxruntime() -> None:
    attrs = {"mode": "linear", "axes": [3, 2], "keep_aspect_ratio_policy": "not_larger"}
    model = resize_model((1, 2, 4, 6), attrs, sizes=[9, 7], opset=18)
    import_and_compare(model, {"x": randn(1, 2, 4, 6, seed=4)})


def test_resize_tf_crop_and_resize_matches_onnxruntime() -> None:
    attrs = {
        "mode": "linear",
        "coordinate_transformation_mode": "tf_crop_and_resize",
        "extrapolation_value": 5.0,
    }
    model = resize_model(
        (1, 1, 4, 4), attrs, sizes=[1, 1, 3, 5], roi=[0, 0, 0.4, -0.3, 1, 1, 0.6, 0.7]
    )
    import_and_compare(model, {"x": randn(1, 1, 4, 4, seed=5)})


def test_resize_10_and_upsample_read_as_asymmetric_floor() -> None:
    x = randn(1, 2, 3, 4, seed=6)
    for op, opset in (("Resize", 10), ("Upsample", 9)):
        for mode in ("nearest", "linear"):
            node = helper.make_node(op, ["x", "scales"], ["y"], mode=mode)
            model = make_model(
                [node],
                [("x", np.float32, [1, 2, 3, 4])],
                [("y", np.float32, None)],
                {"scales": np.array([1, 1, 2, 3], np.float32)},
                opset=opset,
            )
            import_and_compare(model, {"x": x})


def test_resize_sizes_from_shape_arithmetic_with_a_symbolic_batch() -> None:
    """sizes = concat(shape(x)[:2], [8, 10]): folded to (N, 3, 8, 10) with N symbolic."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "zero", "two"], ["nc"]),
        helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest"),
    ]
    inits = {
        "zero": np.array([0], np.int64),
        "two": np.array([2], np.int64),
        "hw": np.array([8, 10], np.int64),
    }
    model = make_model(nodes, [("x", np.float32, ["N", 3, 4, 5])], [("y", np.float32, None)], inits)
    result = import_and_compare(model, {"x": randn(2, 3, 4, 5, seed=7)}, dims={"N": 2})
    assert "sizes=(N, 3, 8, 10)" in result.text("model.onnx")


def test_resize_refusals_name_the_problem() -> None:
    model = resize_model(
        (1, 1, 2, 2),
        {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"},
        scales=[1, 1, 2, 2],
        opset=18,
    )
    with pytest.raises(RxError, match="half_pixel_symmetric' is not one of opset 18"):
        import_onnx(model)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")
    model = make_model(
        [node],
        [("x", np.int32, [1, 1, 2, 2])],
        [("y", np.int32, None)],
        {"scales": np.array([1, 1, 2, 2], np.float32)},
        opset=13,
    )
    with pytest.raises(RxError, match="linear interpolation of i32 tensors is not supported"):
        import_onnx(model)


@pytest.mark.parametrize(
    "attrs, x_shape, w_shape",
    [
        ({"strides": [2, 2]}, (1, 4, 5, 5), (4, 3, 2, 2)),
        (
            {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
            (1, 4, 5, 6),
            (4, 3, 3, 3),
        ),
        ({"group": 2, "dilations": [2, 1], "strides": [1, 2]}, (2, 4, 3, 4), (4, 2, 3, 2)),
        ({"strides": [2, 2], "auto_pad": "SAME_UPPER"}, (1, 2, 4, 4), (2, 3, 3, 3)),
        ({"strides": [3, 2], "output_shape": [10, 8]}, (1, 2, 3, 3), (2, 2, 3, 3)),
        ({"strides": [2]}, (1, 2, 7), (2, 3, 3)),
    ],
)
def test_conv_transpose_matches_onnxruntime(attrs: dict, x_shape: tuple, w_shape: tuple) -> None:
    o = w_shape[1] * attrs.get("group", 1)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    model = make_model(
        [node],
        [("x", np.float32, list(x_shape))],
        [("y", np.float32, None)],
        {"w": randn(*w_shape, seed=1), "b": randn(o, seed=2)},
    )
    import_and_compare(model, {"x": randn(*x_shape, seed=8)})


def test_conv_transpose_3d_is_refused() -> None:
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"])
    model = make_model(
        [node],
        [("x", np.float32, [1, 1, 2, 2, 2])],
        [("y", np.float32, None)],
        {"w": randn(1, 1, 2, 2, 2)},
    )
    with pytest.raises(RxError, match="only 1-D and 2-D ConvTranspose"):
        import_onnx(model)


@pytest.mark.parametrize(
    "op, attrs",
    [("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.6}), ("HardSwish", {})],
)
def test_hard_activations_match_onnxruntime(op: str, attrs: dict) -> None:
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    model = make_model([node], [("x", np.float32, [3, 40])], [("y", np.float32, None)], opset=14)
    import_and_compare(model, {"x": randn(3, 40, seed=9) * 4})

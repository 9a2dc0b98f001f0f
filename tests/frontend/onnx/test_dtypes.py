"""Element types beyond the common ones: UINT64 through the ONNX importer against
onnxruntime (values at and above 2 ** 63, where int64 and double lose them), and on the VM."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from relaxc.frontend.onnx import import_onnx

from .node_cases import RUNNERS
from .util import helper, import_and_compare, make_model

U64 = np.uint64
TOP = 2**64 - 1
A = np.array([[TOP, 2**63 + 5, 2**63, 10], [TOP - 1, 0, 7, 2**53 + 1]], U64)
B = np.array([1, 2, 3, TOP], U64)

U64_BINARY = {
    "Add": (U64, 14),
    "Sub": (U64, 14),
    "Mul": (U64, 14),
    "Div": (U64, 14),
    "Max": (U64, 13),
    "Min": (U64, 13),
    "Equal": (np.bool_, 19),
    "Less": (np.bool_, 13),
    "Greater": (np.bool_, 13),
    "LessOrEqual": (np.bool_, 16),
    "GreaterOrEqual": (np.bool_, 16),
    "BitwiseAnd": (U64, 18),
    "BitwiseOr": (U64, 18),
    "BitwiseXor": (U64, 18),
}


def binary_model(op: str, out: Any, opset: int, **attrs: Any) -> Any:
    node = helper.make_node(op, ["a", "b"], ["y"], **attrs)
    return make_model(
        [node], [("a", U64, (2, 4)), ("b", U64, (4,))], [("y", out, None)], opset=opset
    )


@pytest.mark.parametrize("op", sorted(U64_BINARY))
def test_u64_binary_ops_match_onnxruntime(op: str) -> None:
    out, opset = U64_BINARY[op]
    model = binary_model(op, out, opset)
    result = import_and_compare(model, {"a": A, "b": B})
    (got,) = RUNNERS["vm"](result, [A, B], {})
    (want,) = RUNNERS["interp"](result, [A, B], {})
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.dtype(out)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_u64_bit_shift_matches_onnxruntime(direction: str) -> None:
    shifts = np.array([1, 63, 0, 5], U64)
    node = helper.make_node("BitShift", ["a", "b"], ["y"], direction=direction)
    model = make_model([node], [("a", U64, (2, 4)), ("b", U64, (4,))], [("y", U64, None)], opset=11)
    import_and_compare(model, {"a": A, "b": shifts})


@pytest.mark.parametrize("to", [1, 11, 7, 2])  # FLOAT, DOUBLE, INT64, UINT8
def test_casts_from_u64_match_onnxruntime(to: int) -> None:
    node = helper.make_node("Cast", ["a"], ["y"], to=to)
    out = helper.tensor_dtype_to_np_dtype(to)
    model = make_model([node], [("a", U64, (2, 4))], [("y", out, None)], opset=13)
    import_and_compare(model, {"a": A})


def test_casts_to_u64_match_onnxruntime() -> None:
    x = np.array([0.0, 1.5, 9.2e18, 1.8e19, 3.0, 2.0**63, 17.9, 1e3])
    node = helper.make_node("Cast", ["x"], ["y"], to=13)
    model = make_model([node], [("x", np.float64, (8,))], [("y", U64, None)], opset=13)
    import_and_compare(model, {"x": x})


def test_a_u64_initializer_keeps_its_top_bit() -> None:
    node = helper.make_node("Add", ["a", "w"], ["y"])
    w = np.array([TOP, 1, 2**63, 0], U64)
    model = make_model(
        [node], [("a", U64, (2, 4))], [("y", U64, None)], initializers={"w": w}, opset=14
    )
    result = import_onnx(model)
    assert result.module.functions[0].params[0].type.dtype == "u64"
    import_and_compare(model, {"a": A})


# -- the low-precision types -------------------------------------------------------------

LOWP_X = np.array(
    [
        0.47892547,
        -0.48033667,
        1e6,
        -1e6,
        1e-7,
        -1e-7,
        np.inf,
        -np.inf,
        np.nan,
        0.0,
        -0.0,
        3.5,
        464.0,
        240.0,
        248.0,
        57344.0,
        61440.0,
        7.6,
        -8.6,
        2.5,
        -2.5,
        15.0,
        0.375,
        1.25,
    ],
    np.float32,
)


def round_trip(to: int, opset: int, **attrs: Any) -> Any:
    """float32 -> ``to`` -> float32: the cast to the narrow type, seen as float32."""
    nodes = [
        helper.make_node("Cast", ["x"], ["n"], to=to, **attrs),
        helper.make_node("Cast", ["n"], ["y"], to=1),
    ]
    model = make_model(nodes, [("x", np.float32, ("n",))], [("y", np.float32, None)], opset=opset)
    return model


ORT_CASTS = {
    "e4m3fn": (17, 19, {}),
    "e4m3fn-nosat": (17, 19, {"saturate": 0}),
    "e4m3fnuz": (18, 19, {}),
    "e5m2": (19, 19, {}),
    "e5m2-nosat": (19, 19, {"saturate": 0}),
    "e5m2fnuz": (20, 19, {}),
    "int4": (22, 21, {}),
    "uint4": (21, 21, {}),
}


@pytest.mark.parametrize("name", sorted(ORT_CASTS))
def test_casts_to_the_low_precision_types_match_onnxruntime(name: str) -> None:
    """Where onnxruntime follows ONNX's definition: it rounds a float to int4/uint4 to
    nearest (ties away) and wraps it, where onnx's reference (ml_dtypes, the node tests'
    expected outputs, relaxc) truncates and gives 0 outside the range (the spec leaves that
    undefined), so those compare on integers of the range; and it gives NaN for 61440 to
    f8e5m2 without saturation (the tie above 57344), where the spec's table gives
    infinity (tests/ir/test_dtypes_lowp.py checks that)."""
    to, opset, attrs = ORT_CASTS[name]
    x = LOWP_X[LOWP_X != 61440.0] if name == "e5m2-nosat" else LOWP_X
    if to in (21, 22):
        lo = -8 if to == 22 else 0
        x = np.arange(lo, lo + 16, dtype=np.float32)
    x = np.ascontiguousarray(x)
    model = round_trip(to, opset, **attrs)
    result = import_and_compare(model, {"x": x}, {"n": len(x)})
    (vm,) = RUNNERS["vm"](result, [x], {"n": len(x)})
    (interp,) = RUNNERS["interp"](result, [x], {"n": len(x)})
    np.testing.assert_array_equal(vm, interp)


def test_a_float8_initializer_is_read_as_its_type() -> None:
    import ml_dtypes

    from onnx import numpy_helper

    w = np.array([0.5, -448.0, 3.0, np.nan], np.float32).astype(ml_dtypes.float8_e4m3fn)
    init = numpy_helper.from_array(w, "w")
    nodes = [helper.make_node("Cast", ["w"], ["y"], to=1)]
    graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("y", 1, [4])], [init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    result = import_onnx(model)
    (got,) = RUNNERS["interp"](result, [], {})
    np.testing.assert_array_equal(got[:3], [0.5, -448.0, 3.0])
    assert np.isnan(got[3])

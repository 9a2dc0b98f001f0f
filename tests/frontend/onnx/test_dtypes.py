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
    return make_model([node], [("a", U64, (2, 4)), ("b", U64, (4,))], [("y", out, None)], opset=opset)


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

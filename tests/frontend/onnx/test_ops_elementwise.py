"""The elementwise operators of issue 30 (activations, unary math, comparisons, logic, bit
operations, Mod, Mean, Where): imported at the opsets where each one's signature or types
changed and run by the interpreter against onnxruntime; the onnx package's node tests of
these operators through the interpreter and the VM (and C for a sample); the refusals."""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np
import pytest

from relaxc.frontend.onnx import import_onnx
from relaxc.ir.diagnostics import RxError

from .node_cases import all_cases, run_case
from .node_cases import tested_op as op_of_case
from .util import helper, import_and_compare, make_model, randn, rng

F32 = np.float32
Case = Callable[[], tuple[Any, dict]]
CASES: dict[str, Case] = {}

OPS = (
    "PRelu Elu Selu Celu Softplus Softsign Mish ThresholdedRelu Shrink Gelu Reciprocal Sign "
    "Floor Ceil Round Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh IsNaN IsInf Not "
    "BitwiseNot Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor Mod BitShift "
    "BitwiseAnd BitwiseOr BitwiseXor Mean Where"
).split()


def model_of(op: str, inputs: dict[str, np.ndarray], out_dtype: Any, opset: int, **attrs: Any):
    node = helper.make_node(op, list(inputs), ["out"], **attrs)
    ins = [(k, v.dtype, v.shape) for k, v in inputs.items()]
    return make_model([node], ins, [("out", out_dtype, None)], opset=opset), inputs


def unary(op: str, x: np.ndarray, opset: int, out_dtype: Any = None, **attrs: Any) -> Case:
    return lambda: model_of(op, {"x": x}, out_dtype or x.dtype, opset, **attrs)


def binary(
    op: str, a: np.ndarray, b: np.ndarray, opset: int, out_dtype: Any = None, **attrs: Any
) -> Case:
    return lambda: model_of(op, {"a": a, "b": b}, out_dtype or a.dtype, opset, **attrs)


X = randn(2, 3, 4) * 3
UNIT = rng(1).uniform(-0.99, 0.99, size=(3, 5)).astype(F32)
HALVES = (rng(2).integers(-8, 9, size=(4, 5)) / 2).astype(F32)  # Round's ties
I32 = rng(3).integers(-20, 21, size=(3, 4)).astype(np.int32)
I32B = rng(4).integers(-6, 7, size=(4,)).astype(np.int32)
I32B[I32B == 0] = 3
BOOLS = rng(5).integers(0, 2, size=(2, 3, 4)).astype(bool)
BOOLS2 = rng(6).integers(0, 2, size=(3, 4)).astype(bool)

for _op, _x, _sets in (
    ("Reciprocal", X + 20, (7, 13)),
    ("Floor", X, (7, 13)),
    ("Ceil", X, (7, 13)),
    ("Round", HALVES, (11, 22)),
    ("Sin", X, (7, 22)),
    ("Cos", X, (7,)),
    ("Tan", UNIT, (7,)),
    ("Asin", UNIT, (7,)),
    ("Acos", UNIT, (7,)),
    ("Atan", X, (7,)),
    ("Sinh", UNIT, (9,)),
    ("Cosh", UNIT, (9, 22)),
    ("Asinh", X, (9,)),
    ("Acosh", np.abs(X) + 1, (9,)),
    ("Atanh", UNIT, (9,)),
    ("Softplus", X, (7, 22)),
    ("Softsign", X, (7,)),
    ("Mish", X, (18, 22)),
    ("Sign", X, (9, 13)),
):
    for _opset in _sets:
        CASES[f"{_op}-{_opset}"] = unary(_op, _x, _opset)
CASES["Sign-int32"] = unary("Sign", I32, 13)
CASES["Elu"] = unary("Elu", X, 7)
CASES["Elu-alpha"] = unary("Elu", X, 22, alpha=0.3)
CASES["Selu"] = unary("Selu", X, 7)
CASES["Selu-attrs"] = unary("Selu", X, 22, alpha=2.0, gamma=1.5)
CASES["Celu"] = unary("Celu", X, 12)
CASES["Celu-alpha"] = unary("Celu", X, 12, alpha=2.5)
CASES["ThresholdedRelu"] = unary("ThresholdedRelu", X, 10)
CASES["ThresholdedRelu-alpha"] = unary("ThresholdedRelu", X, 22, alpha=-0.5)
CASES["Shrink"] = unary("Shrink", X, 9)
CASES["Shrink-int32"] = unary("Shrink", I32, 9, bias=2.0, lambd=3.0)
CASES["Gelu-tanh"] = unary("Gelu", X, 20, approximate="tanh")
CASES["Gelu-none"] = unary("Gelu", X, 20)
CASES["IsNaN-9"] = unary("IsNaN", np.array([1.0, np.nan, np.inf], F32), 9, np.bool_)
CASES["IsNaN-20-f64"] = unary("IsNaN", np.array([np.nan, 0.0]), 20, np.bool_)
_INF = np.array([np.inf, -np.inf, 0.0, np.nan, 1.0], F32)
CASES["IsInf"] = unary("IsInf", _INF, 10, np.bool_)
CASES["IsInf-neg"] = unary("IsInf", _INF, 20, np.bool_, detect_positive=0)
CASES["IsInf-pos"] = unary("IsInf", _INF, 10, np.bool_, detect_negative=0)
CASES["Not"] = unary("Not", BOOLS, 7)
CASES["BitwiseNot"] = unary("BitwiseNot", I32, 18)
CASES["BitwiseNot-u8"] = unary("BitwiseNot", I32.astype(np.uint8), 18)

CASES["PRelu-7"] = binary("PRelu", X, randn(4, seed=1), 7)
CASES["PRelu-9-channel"] = binary("PRelu", X, randn(3, 1, seed=1), 9)
CASES["PRelu-16-int32"] = binary("PRelu", I32, I32B, 16)
for _op in ("Equal", "Less", "Greater"):
    CASES[f"{_op}-9-int32"] = binary(_op, I32, I32B, 9 if _op != "Equal" else 7, np.bool_)
    CASES[f"{_op}-13-f32"] = binary(_op, X, X[0, 0], 13, np.bool_)
CASES["Equal-11-bool"] = binary("Equal", BOOLS, BOOLS2, 11, np.bool_)
CASES["Equal-19"] = binary("Equal", I32, I32B, 19, np.bool_)
CASES["Less-9-f64"] = binary("Less", X.astype(np.float64), X[1].astype(np.float64), 9, np.bool_)
for _op in ("LessOrEqual", "GreaterOrEqual"):
    CASES[f"{_op}-12"] = binary(_op, X, np.round(X[1]), 12, np.bool_)
    CASES[f"{_op}-16-int32"] = binary(_op, I32, I32B, 16, np.bool_)
for _op in ("And", "Or", "Xor"):
    CASES[_op] = binary(_op, BOOLS, BOOLS2, 7)
for _op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
    CASES[_op] = binary(_op, I32, I32B, 18)
    CASES[f"{_op}-u8"] = binary(_op, I32.astype(np.uint8), I32B.astype(np.uint8), 18)
CASES["Mod-10-int32"] = binary("Mod", I32, I32B, 10)
CASES["Mod-13-int32-fmod"] = binary("Mod", I32, I32B, 13, fmod=1)
CASES["Mod-13-f32-fmod"] = binary("Mod", X, np.float32(1.5) * np.sign(X[0]), 13, fmod=1)
CASES["Mod-13-u8"] = binary("Mod", np.abs(I32).astype(np.uint8), np.abs(I32B).astype(np.uint8), 13)
_U8 = np.array([[1, 2, 200, 255], [16, 3, 7, 128]], np.uint8)
_SHIFT = np.array([1, 3, 0, 7], np.uint8)
CASES["BitShift-left"] = binary("BitShift", _U8, _SHIFT, 11, direction="LEFT")
CASES["BitShift-right"] = binary("BitShift", _U8, _SHIFT, 11, direction="RIGHT")


def mean_case(opset: int) -> Case:
    def make() -> tuple[Any, dict]:
        feeds = {"a": randn(3, 4), "b": randn(4, seed=1), "c": randn(1, 4, seed=2)}
        return model_of("Mean", feeds, F32, opset)

    return make


CASES["Mean-8"] = mean_case(8)
CASES["Mean-13"] = mean_case(13)
CASES["Mean-one"] = lambda: model_of("Mean", {"a": randn(3, 4)}, F32, 13)


def where_case(x: np.ndarray, y: np.ndarray, opset: int) -> Case:
    return lambda: model_of("Where", {"c": BOOLS2, "x": x, "y": y}, x.dtype, opset)


CASES["Where-9-f32-broadcast"] = where_case(randn(2, 3, 4), randn(4, seed=1), 9)
CASES["Where-16-int64"] = where_case(I32.astype(np.int64), I32B.astype(np.int64), 16)
CASES["Where-16-u8"] = where_case(I32.astype(np.uint8), I32B.astype(np.uint8), 16)
CASES["Where-16-f16"] = where_case(X.astype(np.float16), X[0].astype(np.float16), 16)
CASES["Softplus-f16"] = unary("Softplus", X.astype(np.float16), 22)
CASES["Sin-f64"] = unary("Sin", X.astype(np.float64), 7)


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_matches_onnxruntime(name: str) -> None:
    model, feeds = CASES[name]()
    import_and_compare(model, feeds)


def test_where_on_bools_broadcasts() -> None:
    """onnxruntime has no Where on bools: the interpreter against numpy."""
    from .util import run_interpreter

    model, feeds = where_case(BOOLS, BOOLS2, 16)()
    got = run_interpreter(import_onnx(model), [feeds["c"], feeds["x"], feeds["y"]])
    np.testing.assert_array_equal(got[0], np.where(BOOLS2, BOOLS, BOOLS2))


# ---------------------------------------------------------------------------------------
# The onnx package's node tests.

OUT_OF_SCOPE = (
    "element type STRING",
    "bf16",  # bf16 is computed on the interpreter and the VM only through ml_dtypes
    "bfloat16",
)


@functools.cache
def node_cases() -> tuple[Any, ...]:
    return tuple(c for c in all_cases() if op_of_case(c) in OPS)


@functools.cache
def outcomes() -> dict[str, Any]:
    return {c.name: run_case(c) for c in node_cases()}


def test_node_tests_of_these_ops_pass_or_are_refused_for_another_reason() -> None:
    results = outcomes()
    bad = [
        f"{o.case}: {o.status} {o.message}"
        for o in results.values()
        if o.status != "passed"
        and not (o.status == "refused" and any(s in o.message for s in OUT_OF_SCOPE))
    ]
    assert bad == []
    assert sum(o.status == "passed" for o in results.values()) >= 149


C_SAMPLE = (
    "test_prelu_broadcast",
    "test_elu",
    "test_selu_default",
    "test_softplus",
    "test_mish",
    "test_gelu_tanh_2",
    "test_shrink_soft",
    "test_round",
    "test_atanh",
    "test_isinf_negative",
    "test_isnan",
    "test_not_2d",
    "test_equal_bcast",
    "test_less_equal_bcast",
    "test_xor_bcast4v4d",
    "test_bitwise_not_3d",
    "test_bitwise_xor_i16_3d",
    "test_mean_example",
    "test_where_long_example",
)


def test_a_sample_of_node_tests_passes_in_c() -> None:
    cases = {c.name: c for c in node_cases()}
    sample = [cases[n] for n in C_SAMPLE if n in cases and outcomes()[n].status == "passed"]
    assert len(sample) >= 15
    for case in sample:
        o = run_case(case, ("c",))
        assert o.status == "passed", f"{o.case}: {o.message}"


# ---------------------------------------------------------------------------------------
# Refusals.


def refused(model: Any, *needles: str) -> None:
    with pytest.raises(RxError) as err:
        import_onnx(model)
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_mod_refuses_fmod_0_on_floats() -> None:
    model, _ = binary("Mod", X, X, 13)()
    refused(model, "Mod", "fmod=0 on f32")


def test_gelu_refuses_an_unknown_approximation() -> None:
    node = helper.make_node("Gelu", ["x"], ["y"], approximate="cubic")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", 1, [2])],
        [helper.make_tensor_value_info("y", 1, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    refused(model, "approximate must be 'none' or 'tanh', got 'cubic'")


def test_prelu_refuses_a_slope_larger_than_x() -> None:
    node = helper.make_node("PRelu", ["x", "s"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", 1, [3]), helper.make_tensor_value_info("s", 1, [2, 3])],
        [helper.make_tensor_value_info("y", 1, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    refused(model, "does not broadcast to X's shape")

"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (convert_quantize.py): against
onnxruntime, exactly, on the interpreter, the VM and C; a round trip as a property; their
refusals; the onnx package's node tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.frontend.onnx import import_onnx
from relaxc.ir.diagnostics import RxError

from .node_cases import TIERS, _c, _interp, _vm, all_cases, run_case, select
from .util import feed_order, helper, make_model, randn, run_ort

F32 = np.float32
I64 = np.int64


def _exactly(model: Any, feeds: dict[str, np.ndarray], c: bool = True) -> None:
    """``model`` gives onnxruntime's outputs bit for bit on every backend."""
    result = import_onnx(model)
    want = run_ort(model, feeds)
    args = [feeds[n] for n in feed_order(model)]
    for run in (_interp, _vm, _c) if c else (_interp, _vm):
        got = run(result, args, {})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, run.__name__
            np.testing.assert_array_equal(g, w, err_msg=run.__name__)


def _model(op: str, x: np.ndarray, inits: dict[str, np.ndarray], out: Any, opset: int, **attrs):
    node = helper.make_node(op, ["x", *inits], ["y"], **attrs)
    return make_model(
        [node], [("x", x.dtype.type, list(x.shape))], [("y", out, None)], inits, opset=opset
    )


QTYPES = [np.uint8, np.int8, np.uint16, np.int16]


@pytest.mark.parametrize("qtype", QTYPES)
def test_quantize_per_tensor_rounds_halves_to_even_and_saturates(qtype: Any) -> None:
    info = np.iinfo(qtype)
    zero = np.array(info.min // 2 + info.max // 2 + 3, qtype)
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1e9, -1e9, 0.25, 3.75, -2.5], F32)
    inits = {"s": np.array(0.5, F32), "z": zero}
    _exactly(_model("QuantizeLinear", x, inits, qtype, 21), {"x": x * 0.5})


@pytest.mark.parametrize("opset", [13, 21])
def test_quantize_per_axis(opset: int) -> None:
    x = randn(2, 3, 4) * 40
    inits = {"s": np.array([0.5, 0.25, 2.0], F32), "z": np.array([0, 10, -5], np.int8)}
    _exactly(_model("QuantizeLinear", x, inits, np.int8, opset, axis=1), {"x": x})


def test_quantize_blocked() -> None:
    x = randn(2, 7) * 10
    inits = {
        "s": np.array([[0.5, 0.1, 1.0], [2.0, 0.3, 0.7]], F32),
        "z": np.zeros((2, 3), np.uint8),
    }
    _exactly(_model("QuantizeLinear", x, inits, np.uint8, 21, axis=1, block_size=3), {"x": x})


def test_quantize_without_a_zero_point_gives_uint8() -> None:
    x = randn(5) * 100
    _exactly(_model("QuantizeLinear", x, {"s": np.array(0.7, F32)}, np.uint8, 13), {"x": x})


@pytest.mark.parametrize("qtype", QTYPES + [np.int32])
def test_dequantize_per_tensor(qtype: Any) -> None:
    info = np.iinfo(qtype)
    x = np.random.default_rng(3).integers(max(info.min, -1000), min(info.max, 1000), 12)
    x = x.astype(qtype)
    inits: dict[str, np.ndarray] = {"s": np.array(0.125, F32)}
    if qtype != np.int32:
        inits["z"] = np.array(7, qtype)
    _exactly(_model("DequantizeLinear", x, inits, F32, 21), {"x": x})


def test_dequantize_per_axis_and_blocked() -> None:
    x = np.random.default_rng(4).integers(-128, 127, (3, 4, 5)).astype(np.int8)
    inits = {"s": np.array([0.5, 0.25, 0.1, 2.0], F32), "z": np.array([0, 1, -3, 9], np.int8)}
    _exactly(_model("DequantizeLinear", x, inits, F32, 13, axis=-2), {"x": x})
    blocked = {
        "s": randn(3, 4, 2) ** 2 + 0.1,
        "z": np.random.default_rng(5).integers(-5, 5, (3, 4, 2)).astype(np.int8),
    }
    model = _model("DequantizeLinear", x, blocked, F32, 21, axis=2, block_size=3)
    _exactly(model, {"x": x})


def _dynamic_model() -> Any:
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    outs = [("y", np.uint8, None), ("s", F32, None), ("z", np.uint8, None)]
    return make_model([node], [("x", F32, [3, 8])], outs, opset=11)


@pytest.mark.parametrize("shift", [0.0, 2.0, -3.0])
def test_dynamic_quantize_matches_onnxruntime(shift: float) -> None:
    _exactly(_dynamic_model(), {"x": randn(3, 8) + shift})


def test_dynamic_quantize_of_zeros_has_the_references_scale() -> None:
    """All zeros: ONNX's reference (and its node tests) give the scale 1 / 255, onnxruntime
    1; relaxc follows the reference."""
    from onnx.reference import ReferenceEvaluator

    model, x = _dynamic_model(), np.zeros((3, 8), F32)
    want = ReferenceEvaluator(model).run(None, {"x": x})
    for run in (_interp, _vm, _c):
        got = run(import_onnx(model), [x], {})
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=run.__name__)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.sampled_from(QTYPES),
    st.integers(-6, 6),
    st.lists(st.integers(0, 2**16 - 1), min_size=1, max_size=16),
    st.data(),
)
def test_dequantize_then_quantize_is_the_identity(qtype, exponent, raw, data) -> None:
    """Property: with a power-of-two scale (exact in float32), quantizing the dequantized
    values of any integers with any zero point gives the integers back."""
    info = np.iinfo(qtype)
    q = (np.array(raw) % (int(info.max) - int(info.min) + 1) + int(info.min)).astype(qtype)
    zero = np.array(data.draw(st.integers(int(info.min), int(info.max))), qtype)
    scale = np.array(2.0**exponent, F32)
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s", "z"], ["f"]),
        helper.make_node("QuantizeLinear", ["f", "s", "z"], ["y"]),
    ]
    model = make_model(
        nodes,
        [("x", qtype, list(q.shape))],
        [("y", qtype, None)],
        {"s": scale, "z": zero},
        opset=21,
    )
    got = _interp(import_onnx(model), [q], {})[0]
    np.testing.assert_array_equal(got, q)


def test_a_zero_point_of_another_type_is_refused() -> None:
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq")
    inits = {"s": np.array(0.5, F32), "z": np.array(3, np.uint8)}
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", 3, [4])],  # int8
        [helper.make_tensor_value_info("y", 1, None)],
        initializer=[
            helper.make_tensor(k, 1 if k == "s" else 2, [], [float(v)]) for k, v in inits.items()
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(RxError, match="dq.*zero point is u8, its input i8"):
        import_onnx(model)


NODE_OPS = [
    "DequantizeLinear",
    "QuantizeLinear",
    "DynamicQuantizeLinear",
    "MatMulInteger",
    "ConvInteger",
    "QLinearMatMul",
    "QLinearConv",
]


@pytest.mark.parametrize("k", TIERS)
def test_node_tests_pass(k: int) -> None:
    """The node tests of these ops, the 8-bit float, 4-bit and 2-bit types included."""
    cases = select(all_cases(), NODE_OPS)
    assert len(cases) >= 42
    outcomes = {c.name: run_case(c) for c in cases[::k]}
    assert {n: o.status for n, o in outcomes.items() if o.status != "passed"} == {}


@pytest.mark.parametrize(
    "name", ["test_quantizelinear_blocked_asymmetric", "test_dynamicquantizelinear"]
)
def test_node_tests_pass_in_c(name: str) -> None:
    case = next(c for c in all_cases() if c.name == name)
    assert run_case(case, ("interp", "vm", "c")).status == "passed"


@pytest.mark.parametrize(
    ("a_type", "b_type", "zeros"),
    [(np.uint8, np.uint8, "scalar"), (np.uint8, np.int8, "vector"), (np.int8, np.int8, None)],
)
def test_matmul_integer_matches_onnxruntime(a_type, b_type, zeros) -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(np.iinfo(a_type).min, np.iinfo(a_type).max, (2, 3, 5)).astype(a_type)
    b = rng.integers(np.iinfo(b_type).min, np.iinfo(b_type).max, (5, 4)).astype(b_type)
    inits: dict[str, np.ndarray] = {}
    names = ["a", "b"]
    if zeros == "scalar":
        inits = {"az": np.array(12, a_type), "bz": np.array(3, b_type)}
    elif zeros == "vector":
        inits = {"az": np.array([200], a_type), "bz": np.array([0, -5, 9, 100], b_type)}
    node = helper.make_node("MatMulInteger", names + list(inits), ["y"])
    model = make_model(
        [node],
        [("a", a_type, list(a.shape)), ("b", b_type, list(b.shape))],
        [("y", np.int32, None)],
        inits,
        opset=10,
    )
    _exactly(model, {"a": a, "b": b}, c=zeros != "scalar")


def test_conv_integer_matches_onnxruntime() -> None:
    rng = np.random.default_rng(8)
    x = rng.integers(0, 255, (1, 3, 7, 6)).astype(np.uint8)
    inits = {
        "w": rng.integers(0, 255, (4, 3, 3, 3)).astype(np.uint8),
        "xz": np.array(128, np.uint8),
        "wz": np.array(100, np.uint8),
    }
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 0, 1, 2])
    model = make_model(
        [node], [("x", np.uint8, list(x.shape))], [("y", np.int32, None)], inits, opset=10
    )
    _exactly(model, {"x": x})


def test_matmul_integer_with_a_zero_point_per_row_of_a() -> None:
    """Per-row zero points of a (which onnxruntime's CPU kernel does not take), against
    the definition."""
    rng = np.random.default_rng(9)
    a = rng.integers(0, 255, (3, 5)).astype(np.uint8)
    b = rng.integers(-128, 127, (5, 2)).astype(np.int8)
    az, bz = np.array([1, 200, 7], np.uint8), np.array([3, -4], np.int8)
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    model = make_model(
        [node],
        [("a", np.uint8, [3, 5]), ("b", np.int8, [5, 2])],
        [("y", np.int32, None)],
        {"az": az, "bz": bz},
        opset=10,
    )
    want = (a.astype(np.int32) - az[:, None]) @ (b.astype(np.int32) - bz[None, :])
    for run in (_interp, _vm):
        np.testing.assert_array_equal(run(import_onnx(model), [a, b], {})[0], want)


def _qlinear_matmul_model(a_type, b_type, n_scales: int) -> Any:
    rng = np.random.default_rng(11)
    inits = {
        "sa": np.array(0.02, F32),
        "za": np.array(7, a_type),
        "b": rng.integers(np.iinfo(b_type).min, np.iinfo(b_type).max, (6, 4)).astype(b_type),
        "sb": (rng.random(n_scales) * 0.05 + 0.01).astype(F32).reshape(-1 if n_scales > 1 else ()),
        "zb": np.array(0, b_type) if n_scales == 1 else np.zeros(n_scales, b_type),
        "sy": np.array(0.03, F32),
        "zy": np.array(5, a_type),
    }
    names = ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"]
    node = helper.make_node("QLinearMatMul", names, ["y"])
    return make_model([node], [("a", a_type, [3, 6])], [("y", a_type, None)], inits, opset=21)


def _against_the_reference_and_onnxruntime(model: Any, feeds: dict[str, np.ndarray]) -> None:
    """Bit for bit with ONNX's reference on every backend; onnxruntime's requantization
    (a float32 multiplier) may round a tie the other way: within 1 of it."""
    from onnx.reference import ReferenceEvaluator

    want = ReferenceEvaluator(model).run(None, feeds)[0]
    ort = run_ort(model, feeds)[0]
    args = [feeds[n] for n in feed_order(model)]
    for run in (_interp, _vm, _c):
        got = run(import_onnx(model), args, {})[0]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want, err_msg=run.__name__)
        assert np.abs(got.astype(np.int32) - ort.astype(np.int32)).max() <= 1


@pytest.mark.parametrize(
    ("a_type", "b_type", "n_scales"),
    [(np.uint8, np.uint8, 1), (np.int8, np.int8, 1), (np.uint8, np.int8, 4)],
)
def test_qlinear_matmul(a_type, b_type, n_scales: int) -> None:
    rng = np.random.default_rng(12)
    a = rng.integers(np.iinfo(a_type).min, np.iinfo(a_type).max, (3, 6)).astype(a_type)
    _against_the_reference_and_onnxruntime(
        _qlinear_matmul_model(a_type, b_type, n_scales), {"a": a}
    )


def test_qlinear_conv_with_per_channel_scales_and_a_bias() -> None:
    rng = np.random.default_rng(13)
    x = rng.integers(0, 255, (1, 2, 6, 5)).astype(np.uint8)
    inits = {
        "sx": np.array(0.05, F32),
        "zx": np.array(120, np.uint8),
        "w": rng.integers(-128, 127, (3, 2, 3, 3)).astype(np.int8),
        "sw": np.array([0.01, 0.02, 0.005], F32),
        "zw": np.zeros(3, np.int8),
        "sy": np.array(0.2, F32),
        "zy": np.array(100, np.uint8),
        "bias": np.array([50, -300, 1000], np.int32),
    }
    node = helper.make_node("QLinearConv", ["x", *inits], ["y"], pads=[1, 1, 1, 1], strides=[2, 1])
    model = make_model(
        [node], [("x", np.uint8, list(x.shape))], [("y", np.uint8, None)], inits, opset=10
    )
    _against_the_reference_and_onnxruntime(model, {"x": x})


@pytest.mark.parametrize(
    ("target", "saturate"),
    [("FLOAT8E4M3FN", 1), ("FLOAT8E4M3FN", 0), ("FLOAT8E5M2", 1), ("INT4", 1), ("UINT2", 1)],
)
def test_quantize_to_the_narrow_types_is_the_references(target: str, saturate: int) -> None:
    """Values beyond the type's range (saturated or not), ties and NaN, against ONNX's
    reference, on the interpreter and the VM."""
    from onnx import TensorProto
    from onnx.reference import ReferenceEvaluator

    code = getattr(TensorProto, target)
    x = np.array([0.0, 0.3, -2.5, 7.5, 1e4, -1e4, 3.25, np.nan], F32)
    if not target.startswith("FLOAT8"):
        x = x[:-1]  # a NaN has no integer value: ONNX leaves it undefined
    attrs = {"output_dtype": code}
    if target.startswith("FLOAT8"):
        attrs["saturate"] = saturate
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [len(x)])],
        [helper.make_tensor_value_info("y", code, None)],
        initializer=[helper.make_tensor("s", TensorProto.FLOAT, [], [0.5])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    for run in (_interp, _vm):
        got = run(import_onnx(model), [x], {})[0]
        assert got.dtype == want.dtype, run.__name__
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=run.__name__)

"""Each supported ONNX operator, imported and run by the reference interpreter, matches
onnxruntime (at the opsets where the operator's signature changed)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from .util import helper, import_and_compare, make_model, randn, rng

F32 = np.float32
Case = Callable[[], tuple[Any, dict]]
CASES: dict[str, Case] = {}


def case(name: str):
    def register(fn: Case) -> Case:
        CASES[name] = fn
        return fn

    return register


def unary_model(op: str, x: np.ndarray, opset: int = 17, out_dtype: Any = None, **attrs: Any):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    out = [("y", out_dtype or x.dtype, None)]
    return make_model([node], [("x", x.dtype, x.shape)], out, opset=opset), {"x": x}


for _op in ("Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Abs", "Neg"):
    CASES[_op] = (lambda op: lambda: unary_model(op, randn(2, 3, 4)))(_op)
CASES["Sqrt"] = lambda: unary_model("Sqrt", np.abs(randn(3, 5)) + 0.1)
CASES["Log"] = lambda: unary_model("Log", np.abs(randn(3, 5)) + 0.1)
CASES["LeakyRelu"] = lambda: unary_model("LeakyRelu", randn(2, 8), alpha=0.2)
CASES["LeakyRelu-default"] = lambda: unary_model("LeakyRelu", randn(2, 8))
CASES["Identity"] = lambda: unary_model("Identity", randn(4))
CASES["Dropout-7"] = lambda: unary_model("Dropout", randn(3, 4), opset=7, ratio=0.5)
CASES["Dropout-13"] = lambda: unary_model("Dropout", randn(3, 4), opset=13)
CASES["Softmax-11-axis1"] = lambda: unary_model("Softmax", randn(2, 3, 4), opset=11, axis=1)
CASES["Softmax-11-last"] = lambda: unary_model("Softmax", randn(2, 3, 4), opset=11, axis=2)
CASES["Softmax-13-axis1"] = lambda: unary_model("Softmax", randn(2, 3, 4), opset=13, axis=1)
CASES["Softmax-13-default"] = lambda: unary_model("Softmax", randn(2, 3, 4), opset=13)
CASES["LRN"] = lambda: unary_model(
    "LRN", randn(1, 7, 5, 5), size=3, alpha=1e-3, beta=0.75, bias=2.0
)
CASES["GlobalAveragePool"] = lambda: unary_model("GlobalAveragePool", randn(2, 3, 5, 6))
CASES["Flatten"] = lambda: unary_model("Flatten", randn(2, 3, 4, 5), axis=2)
CASES["Flatten-0"] = lambda: unary_model("Flatten", randn(2, 3), axis=0)
CASES["Flatten-neg"] = lambda: unary_model("Flatten", randn(2, 3, 4), axis=-1)
CASES["Transpose"] = lambda: unary_model("Transpose", randn(2, 3, 4), perm=[1, 2, 0])
CASES["Transpose-default"] = lambda: unary_model("Transpose", randn(2, 3, 4))
CASES["Cast-f32-i32"] = lambda: unary_model("Cast", randn(3, 4) * 10, to=6, out_dtype=np.int32)
CASES["Cast-f32-f64"] = lambda: unary_model("Cast", randn(3, 4), to=11, out_dtype=np.float64)
CASES["Clip-6"] = lambda: unary_model("Clip", randn(3, 4), opset=6 + 1, min=-0.5, max=0.25)
CASES["MaxPool"] = lambda: unary_model(
    "MaxPool", randn(1, 2, 7, 7), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
)
CASES["MaxPool-same-upper"] = lambda: unary_model(
    "MaxPool", randn(1, 2, 7, 8), kernel_shape=[2, 3], strides=[2, 2], auto_pad="SAME_UPPER"
)
CASES["MaxPool-ceil-dilated"] = lambda: unary_model(
    "MaxPool",
    randn(1, 2, 9, 9),
    opset=12,
    kernel_shape=[2, 2],
    strides=[2, 2],
    ceil_mode=1,
    dilations=[2, 1],
)
CASES["AveragePool"] = lambda: unary_model(
    "AveragePool", randn(1, 3, 6, 6), kernel_shape=[3, 3], pads=[1, 1, 1, 1]
)
CASES["AveragePool-include-pad"] = lambda: unary_model(
    "AveragePool", randn(1, 3, 6, 6), kernel_shape=[3, 3], pads=[1, 0, 1, 2], count_include_pad=1
)
CASES["AveragePool-same-lower"] = lambda: unary_model(
    "AveragePool", randn(1, 1, 5, 5), kernel_shape=[2, 2], auto_pad="SAME_LOWER"
)
CASES["AveragePool-ceil"] = lambda: unary_model(
    "AveragePool", randn(1, 1, 7, 7), kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1
)
CASES["ReduceMean-13"] = lambda: unary_model("ReduceMean", randn(2, 3, 4), opset=13, axes=[1, -1])
CASES["ReduceMean-13-nokeep"] = lambda: unary_model(
    "ReduceMean", randn(2, 3, 4), opset=13, axes=[0], keepdims=0
)
CASES["ReduceMean-13-all"] = lambda: unary_model("ReduceMean", randn(2, 3, 4), opset=13)
CASES["Squeeze-11"] = lambda: unary_model("Squeeze", randn(2, 1, 3, 1), opset=11, axes=[1, -1])
CASES["Squeeze-11-all"] = lambda: unary_model("Squeeze", randn(2, 1, 3, 1), opset=11)
CASES["Unsqueeze-11"] = lambda: unary_model("Unsqueeze", randn(2, 3), opset=11, axes=[0, 3])
CASES["Slice-9"] = lambda: unary_model(
    "Slice", randn(5, 6), opset=9, starts=[1, -4], ends=[100, -1], axes=[0, 1]
)


def binary_model(op: str, a: np.ndarray, b: np.ndarray, opset: int = 17, const_b: bool = False):
    node = helper.make_node(op, ["a", "b"], ["y"])
    inputs = [("a", a.dtype, a.shape)] + ([] if const_b else [("b", b.dtype, b.shape)])
    feeds = {"a": a} if const_b else {"a": a, "b": b}
    model = make_model(
        [node], inputs, [("y", a.dtype, None)], {"b": b} if const_b else None, opset=opset
    )
    return model, feeds


for _op in ("Add", "Sub", "Mul", "Div"):
    CASES[_op] = (lambda op: lambda: binary_model(op, randn(2, 3, 4), randn(3, 1, seed=1)))(_op)
    CASES[f"{_op}-const"] = (
        lambda op: lambda: binary_model(op, randn(2, 3), randn(3, seed=1) + 2, const_b=True)
    )(_op)
CASES["Div-int"] = lambda: binary_model(
    "Div", np.array([7, -7, 9, 100], np.int64), np.array([2, 2, -4, 7], np.int64)
)
CASES["Pow"] = lambda: binary_model("Pow", np.abs(randn(3, 4)) + 0.5, randn(4, seed=2))
CASES["Pow-int-exponent"] = lambda: binary_model(
    "Pow", randn(3, 4), np.array(2, np.int64), const_b=True
)
CASES["MatMul"] = lambda: binary_model("MatMul", randn(2, 3, 4, 5), randn(3, 5, 2, seed=1))
CASES["MatMul-weight"] = lambda: binary_model(
    "MatMul", randn(6, 4), randn(4, 3, seed=1), const_b=True
)
CASES["MatMul-1d-left"] = lambda: binary_model("MatMul", randn(4), randn(2, 4, 3, seed=1))
CASES["MatMul-1d-right"] = lambda: binary_model("MatMul", randn(2, 3, 4), randn(4, seed=1))


@case("Sum")
def _sum():
    node = helper.make_node("Sum", ["a", "b", "c"], ["y"])
    a, b, c = randn(2, 3), randn(3, seed=1), randn(1, 3, seed=2)
    return make_model(
        [node], [("a", F32, [2, 3]), ("b", F32, [3]), ("c", F32, [1, 3])], [("y", F32, None)]
    ), {"a": a, "b": b, "c": c}


@case("Clip-13")
def _clip13():
    node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
    return make_model(
        [node],
        [("x", F32, [4, 4])],
        [("y", F32, None)],
        {"lo": np.array(-0.3, F32), "hi": np.array(0.6, F32)},
        opset=13,
    ), {"x": randn(4, 4)}


@case("Clip-13-min-only")
def _clip13min():
    node = helper.make_node("Clip", ["x", "lo"], ["y"])
    return make_model(
        [node], [("x", F32, [4, 4])], [("y", F32, None)], {"lo": np.array(0.1, F32)}, opset=13
    ), {"x": randn(4, 4)}


@case("Conv")
def _conv():
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 2, 0, 1], strides=[1, 2])
    return make_model(
        [node],
        [("x", F32, [2, 3, 8, 9])],
        [("y", F32, None)],
        {"w": randn(4, 3, 3, 3, seed=1), "b": randn(4, seed=2)},
    ), {"x": randn(2, 3, 8, 9)}


@case("Conv-group-dilated")
def _conv_group():
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=2, dilations=[2, 2], pads=[2, 1, 2, 1])
    return make_model(
        [node], [("x", F32, [1, 4, 9, 9])], [("y", F32, None)], {"w": randn(6, 2, 3, 3, seed=1)}
    ), {"x": randn(1, 4, 9, 9)}


@case("Conv-same-lower")
def _conv_same():
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2], auto_pad="SAME_LOWER")
    return make_model(
        [node], [("x", F32, [1, 2, 8, 7])], [("y", F32, None)], {"w": randn(3, 2, 4, 4, seed=1)}
    ), {"x": randn(1, 2, 8, 7)}


@case("BatchNormalization")
def _bn():
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    c = 5
    init = {
        "s": randn(c, seed=1),
        "b": randn(c, seed=2),
        "m": randn(c, seed=3),
        "v": np.abs(randn(c, seed=4)) + 0.5,
    }
    return make_model([node], [("x", F32, [2, c, 3, 3])], [("y", F32, None)], init), {
        "x": randn(2, c, 3, 3)
    }


@case("BatchNormalization-7")
def _bn7():
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    init = {
        "s": randn(3, seed=1),
        "b": randn(3, seed=2),
        "m": randn(3, seed=3),
        "v": np.abs(randn(3, seed=4)),
    }
    return make_model([node], [("x", F32, [2, 3])], [("y", F32, None)], init, opset=7), {
        "x": randn(2, 3)
    }


@case("Gemm")
def _gemm():
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1)
    return make_model(
        [node],
        [("a", F32, [4, 6])],
        [("y", F32, None)],
        {"b": randn(5, 6, seed=1), "c": randn(5, seed=2)},
    ), {"a": randn(4, 6)}


@case("Gemm-alpha-beta-transA")
def _gemm2():
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)
    return make_model(
        [node],
        [("a", F32, [6, 4]), ("b", F32, [6, 5])],
        [("y", F32, None)],
        {"c": randn(4, 1, seed=2)},
    ), {"a": randn(6, 4), "b": randn(6, 5, seed=1)}


@case("Gemm-no-c")
def _gemm3():
    node = helper.make_node("Gemm", ["a", "b"], ["y"])
    return make_model(
        [node], [("a", F32, [3, 4])], [("y", F32, None)], {"b": randn(4, 2, seed=1)}
    ), {"a": randn(3, 4)}


@case("Concat")
def _concat():
    node = helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=-2)
    return make_model(
        [node],
        [("a", F32, [2, 1, 3]), ("b", F32, [2, 4, 3])],
        [("y", F32, None)],
        {"c": randn(2, 2, 3, seed=3)},
    ), {"a": randn(2, 1, 3), "b": randn(2, 4, 3, seed=1)}


def split_model(opset: int, n: int, sizes: list[int] | None, shape=(2, 9), **attrs):
    outs = [f"y{i}" for i in range(n)]
    init = {}
    ins = ["x"]
    if sizes is not None and opset >= 13:
        init["split"] = np.array(sizes, np.int64)
        ins.append("split")
    elif sizes is not None:
        attrs["split"] = sizes
    node = helper.make_node("Split", ins, outs, axis=1, **attrs)
    return make_model(
        [node], [("x", F32, list(shape))], [(o, F32, None) for o in outs], init, opset=opset
    ), {"x": randn(*shape)}


CASES["Split-11-equal"] = lambda: split_model(11, 3, None)
CASES["Split-11-sizes"] = lambda: split_model(11, 3, [2, 3, 4])
CASES["Split-13-sizes"] = lambda: split_model(13, 2, [5, 4])
CASES["Split-18-num-outputs"] = lambda: split_model(18, 2, None, shape=(2, 9), num_outputs=2)
CASES["Split-18-equal"] = lambda: split_model(18, 3, None, num_outputs=3)


@case("Reshape")
def _reshape():
    node = helper.make_node("Reshape", ["x", "s"], ["y"])
    return make_model(
        [node], [("x", F32, [2, 3, 4])], [("y", F32, None)], {"s": np.array([0, -1, 2], np.int64)}
    ), {"x": randn(2, 3, 4)}


@case("Squeeze-13")
def _squeeze13():
    node = helper.make_node("Squeeze", ["x", "axes"], ["y"])
    return make_model(
        [node],
        [("x", F32, [1, 3, 1])],
        [("y", F32, None)],
        {"axes": np.array([0], np.int64)},
        opset=13,
    ), {"x": randn(1, 3, 1)}


@case("Unsqueeze-13")
def _unsqueeze13():
    node = helper.make_node("Unsqueeze", ["x", "axes"], ["y"])
    return make_model(
        [node],
        [("x", F32, [3, 2])],
        [("y", F32, None)],
        {"axes": np.array([-1, 1], np.int64)},
        opset=13,
    ), {"x": randn(3, 2)}


@case("Gather")
def _gather():
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    return make_model(
        [node],
        [("x", F32, [3, 5, 2])],
        [("y", F32, None)],
        {"i": np.array([[0, -1], [4, 2]], np.int64)},
    ), {"x": randn(3, 5, 2)}


@case("Gather-scalar")
def _gather_scalar():
    node = helper.make_node("Gather", ["x", "i"], ["y"])
    return make_model(
        [node], [("x", F32, [3, 5])], [("y", F32, None)], {"i": np.array(-2, np.int64)}
    ), {"x": randn(3, 5)}


@case("Gather-embedding")
def _gather_runtime():
    node = helper.make_node("Gather", ["table", "ids"], ["y"])
    return make_model(
        [node], [("ids", np.int64, [2, 3])], [("y", F32, None)], {"table": randn(10, 4)}
    ), {"ids": rng(1).integers(0, 10, (2, 3)).astype(np.int64)}


@case("Slice-13")
def _slice13():
    node = helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])
    init = {
        "s": np.array([-1, 1], np.int64),
        "e": np.array([-9223372036854775807, 100], np.int64),
        "a": np.array([0, 2], np.int64),
        "st": np.array([-2, 3], np.int64),
    }
    return make_model([node], [("x", F32, [6, 3, 8])], [("y", F32, None)], init, opset=13), {
        "x": randn(6, 3, 8)
    }


@case("Slice-int-max-end-negative-step")
def _slice_int_max():
    # Regression (found by test_properties): INT64_MAX as the end of a backwards slice means
    # "to the beginning", as onnxruntime reads it, not "clamp to the last element" (empty).
    node = helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])
    init = {
        "s": np.array([0, 3], np.int64),
        "e": np.array([2**63 - 1, 2**31 - 1], np.int64),
        "a": np.array([1, 2], np.int64),
        "st": np.array([-1, -2], np.int64),
    }
    return make_model([node], [("x", F32, [2, 1, 5])], [("y", F32, None)], init, opset=13), {
        "x": randn(2, 1, 5)
    }


@case("LayerNormalization")
def _layernorm():
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-6)
    return make_model(
        [node],
        [("x", F32, [2, 3, 8])],
        [("y", F32, None)],
        {"s": randn(8, seed=1), "b": randn(8, seed=2)},
    ), {"x": randn(2, 3, 8)}


@case("LayerNormalization-2axes-no-bias")
def _layernorm2():
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=1)
    return make_model(
        [node], [("x", F32, [2, 3, 4])], [("y", F32, None)], {"s": randn(3, 4, seed=1)}
    ), {"x": randn(2, 3, 4)}


@case("Constant")
def _constant():
    c = helper.make_node(
        "Constant", [], ["c"], value=helper.make_tensor("v", 1, [3], [1.0, 2.0, 3.0])
    )
    c2 = helper.make_node("Constant", [], ["c2"], value_float=0.5)
    add = helper.make_node("Add", ["x", "c"], ["t"])
    mul = helper.make_node("Mul", ["t", "c2"], ["y"])
    return make_model([c, c2, add, mul], [("x", F32, [2, 3])], [("y", F32, None)], opset=13), {
        "x": randn(2, 3)
    }


@case("ConstantOfShape-folded")
def _cos():
    shape = helper.make_node("Constant", [], ["s"], value=helper.make_tensor("v", 7, [2], [2, 3]))
    fill = helper.make_node(
        "ConstantOfShape", ["s"], ["c"], value=helper.make_tensor("f", 1, [1], [0.25])
    )
    add = helper.make_node("Add", ["x", "c"], ["y"])
    return make_model([shape, fill, add], [("x", F32, [2, 3])], [("y", F32, None)]), {
        "x": randn(2, 3)
    }


@case("Shape-Reshape-static")
def _shape_static():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    init = {
        "zero": np.array(0, np.int64),
        "ax": np.array([0], np.int64),
        "minus1": np.array([-1], np.int64),
    }
    return make_model(nodes, [("x", F32, [2, 3, 4])], [("y", F32, None)], init), {
        "x": randn(2, 3, 4)
    }


@case("Max-Min")
def _max_min():
    nodes = [helper.make_node("Max", ["a", "b"], ["m"]), helper.make_node("Min", ["m", "c"], ["y"])]
    return make_model(
        nodes, [("a", F32, [3]), ("b", F32, [3]), ("c", F32, [1])], [("y", F32, None)]
    ), {"a": randn(3), "b": randn(3, seed=1), "c": randn(1, seed=2)}


@case("ReduceSum-13")
def _reduce_sum():
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    return make_model(
        [node],
        [("x", F32, [2, 3, 4])],
        [("y", F32, None)],
        {"axes": np.array([1], np.int64)},
        opset=13,
    ), {"x": randn(2, 3, 4)}


@case("ReduceMean-18")
def _reduce_mean18():
    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"])
    return make_model(
        [node],
        [("x", F32, [2, 3, 4])],
        [("y", F32, None)],
        {"axes": np.array([2], np.int64)},
        opset=18,
    ), {"x": randn(2, 3, 4)}


@case("Expand")
def _expand():
    node = helper.make_node("Expand", ["x", "s"], ["y"])
    return make_model(
        [node], [("x", F32, [3, 1])], [("y", F32, None)], {"s": np.array([2, 3, 4], np.int64)}
    ), {"x": randn(3, 1)}


@case("constant-subgraph-folds")
def _folded_chain():
    # w is computed from initializers only: Transpose(Mul(w0, 2)) folds to one weight.
    nodes = [
        helper.make_node("Mul", ["w0", "two"], ["w1"]),
        helper.make_node("Transpose", ["w1"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    init = {"w0": randn(3, 4, seed=1), "two": np.array(2.0, F32)}
    return make_model(nodes, [("x", F32, [2, 4])], [("y", F32, None)], init), {"x": randn(2, 4)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_matches_onnxruntime(name: str) -> None:
    model, feeds = CASES[name]()
    import_and_compare(model, feeds)


def test_constant_subgraph_becomes_one_weight() -> None:
    model, feeds = CASES["constant-subgraph-folds"]()
    result = import_and_compare(model, feeds)
    assert list(result.weights) == ["w"]  # named after the folded value, not its sources
    np.testing.assert_allclose(result.weights["w"], (randn(3, 4, seed=1) * 2).T)
    ops = [b.value.op for b in result.module.functions[0].body]
    assert ops == ["const", "matmul"]


def test_small_constants_are_inline_literals() -> None:
    model, feeds = CASES["Constant"]()
    result = import_and_compare(model, feeds)
    assert result.weights == {}
    consts = [b.value.args[0] for b in result.module.functions[0].body if b.value.op == "const"]
    assert len(consts) == 2 and not any(isinstance(c, str) for c in consts)

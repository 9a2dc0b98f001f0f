"""The CNN converters (convert_cnn.py) against onnxruntime on random inputs, their refusals,
and the onnx package's node tests of their operators through the interpreter and the VM
(and C for one case in four)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from relaxc.frontend.onnx import import_onnx
from relaxc.frontend.printer import print_module
from relaxc.ir.diagnostics import RxError

from . import node_cases
from .node_cases import all_cases, run_case
from .util import helper, import_and_compare, make_model, numpy_helper, randn

F32 = np.float32


def _node_model(
    op: str,
    x_shape: tuple,
    y_shape: Any = None,
    inits: dict | None = None,
    opset: int = 19,
    outputs: tuple = ("y",),
    **attrs: Any,
) -> Any:
    inits = inits or {}
    names = [o[0] if isinstance(o, tuple) else o for o in outputs]
    node = helper.make_node(op, ["x", *inits], names, **attrs)
    return make_model(
        [node],
        [("x", F32, x_shape)],
        [o if isinstance(o, tuple) else (o, F32, None) for o in outputs],
        initializers=inits,
        opset=opset,
    )


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs",
    [
        ((2, 4, 11), (6, 2, 3), dict(group=2, strides=[2], pads=[1, 2], dilations=[2])),
        ((1, 3, 9), (4, 3, 4), dict(auto_pad="SAME_LOWER")),
        (
            (1, 4, 5, 6, 5),
            (6, 2, 2, 3, 2),
            dict(group=2, strides=[1, 2, 1], pads=[1, 0, 1, 0, 1, 1]),
        ),
        ((1, 2, 5, 5, 4), (3, 2, 3, 3, 3), dict(auto_pad="SAME_UPPER", strides=[2, 2, 1])),
    ],
)
def test_conv_1d_and_3d_match_onnxruntime(x_shape, w_shape, attrs) -> None:
    w, b = randn(*w_shape, seed=1), randn(w_shape[0], seed=2)
    model = _node_model("Conv", x_shape, inits={"w": w, "b": b}, **attrs)
    result = import_and_compare(model, {"x": randn(*x_shape)})
    assert ("conv_nd(" in print_module(result.module)) == (len(x_shape) == 5)


@pytest.mark.parametrize(
    "op, x_shape, attrs",
    [
        ("MaxPool", (2, 3, 10), dict(kernel_shape=[3], strides=[2], pads=[1, 1], ceil_mode=1)),
        (
            "MaxPool",
            (1, 2, 6, 7, 5),
            dict(kernel_shape=[2, 3, 2], dilations=[2, 1, 1], strides=[1, 2, 2]),
        ),
        (
            "MaxPool",
            (1, 2, 6, 7, 5),
            dict(kernel_shape=[3, 3, 3], auto_pad="SAME_UPPER", strides=[2, 2, 2]),
        ),
        ("AveragePool", (2, 3, 10), dict(kernel_shape=[3], pads=[1, 2], count_include_pad=1)),
        (
            "AveragePool",
            (1, 2, 6, 7, 5),
            dict(kernel_shape=[3, 2, 3], pads=[1, 0, 1, 1, 1, 0], ceil_mode=1, strides=[2, 2, 2]),
        ),
        (
            "AveragePool",
            (1, 2, 6, 7, 5),
            dict(kernel_shape=[2, 2, 2], auto_pad="SAME_LOWER", count_include_pad=1),
        ),
        ("LpPool", (1, 3, 7, 8), dict(kernel_shape=[2, 3], strides=[2, 1], pads=[1, 1, 0, 1], p=3)),
        ("LpPool", (2, 3, 9), dict(kernel_shape=[3], p=1)),
        ("GlobalMaxPool", (2, 3, 4, 5, 3), {}),
        ("GlobalLpPool", (2, 3, 4, 5), dict(p=3)),
    ],
)
def test_pools_and_mvn_match_onnxruntime(op: str, x_shape: tuple, attrs: dict) -> None:
    import_and_compare(_node_model(op, x_shape, opset=18, **attrs), {"x": randn(*x_shape)})


def test_instance_and_group_norm_match_onnxruntime() -> None:
    s, b = randn(4, seed=1), randn(4, seed=2)
    model = _node_model("InstanceNormalization", (2, 4, 5, 3), inits={"s": s, "b": b}, epsilon=1e-3)
    import_and_compare(model, {"x": randn(2, 4, 5, 3)})


def _raw_model(node: Any, inputs: dict, inits: dict, opset: int) -> Any:
    """A model onnx's checker is not asked about (it calls GroupNormalization-18 deprecated)."""
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(k, 1, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info("y", 1, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _group_norm(x: np.ndarray, s: np.ndarray, b: np.ndarray, groups: int) -> np.ndarray:
    xg = x.astype(np.float64).reshape(x.shape[0], groups, -1)
    mean, var = xg.mean(-1, keepdims=True), xg.var(-1, keepdims=True)
    norm = ((xg - mean) / np.sqrt(var + 1e-5)).reshape(x.shape)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return norm * s.reshape(shape) + b.reshape(shape)


def test_group_norm_18_repeats_its_per_group_parameters_for_each_channel() -> None:
    from .util import run_interpreter

    x, s, b = randn(2, 4, 5, 3), randn(2, seed=3), randn(2, seed=4)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)
    model = _raw_model(node, {"x": x.shape}, {"s": s, "b": b}, 18)
    (got,) = run_interpreter(import_onnx(model), [x])
    want = _group_norm(x, np.repeat(s, 2), np.repeat(b, 2), 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_group_norm_21_takes_per_channel_parameters() -> None:
    x = randn(2, 6, 5)
    s, b = randn(6, seed=1), randn(6, seed=2)
    result = import_onnx(
        _node_model(
            "GroupNormalization",
            (2, 6, 5),
            inits={"s": s, "b": b},
            opset=21,
            outputs=(("y", F32, (2, 6, 5)),),
            num_groups=3,
        )
    )
    from .util import run_interpreter

    (got,) = run_interpreter(result, [x])
    np.testing.assert_allclose(got, _group_norm(x, s, b, 3), rtol=1e-5, atol=1e-5)


def test_layer_norm_mean_and_inv_std_dev_match_onnxruntime() -> None:
    s, b = randn(4, 5, seed=1), randn(4, 5, seed=2)
    model = _node_model(
        "LayerNormalization",
        (3, 4, 5),
        inits={"s": s, "b": b},
        opset=17,
        outputs=("y", "mean", "inv"),
        axis=1,
    )
    import_and_compare(model, {"x": randn(3, 4, 5)})


def test_max_pool_indices_output_matches_onnxruntime() -> None:
    model = _node_model(
        "MaxPool", (1, 1, 4, 4), outputs=("y", ("i", np.int64, (1, 1, 3, 3))), kernel_shape=[2, 2]
    )
    import_and_compare(model, {"x": randn(1, 1, 4, 4)})


def test_group_norm_18_parameters_computed_at_run_time_are_refused() -> None:
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)
    model = _raw_model(node, {"x": (1, 4, 3), "s": (2,), "b": (2,)}, {}, 18)
    with pytest.raises(RxError, match="per group .* must be a constant"):
        import_onnx(model)


def test_a_conv_kernel_shape_contradicting_the_weight_is_refused() -> None:
    w = numpy_helper.to_array(numpy_helper.from_array(randn(2, 1, 3)))
    model = _node_model("Conv", (1, 1, 8), inits={"w": w}, kernel_shape=[2])
    with pytest.raises(RxError, match="kernel_shape"):
        import_onnx(model)


# -- the onnx package's node tests ------------------------------------------------------

OPS = (
    "Conv",
    "MaxPool",
    "AveragePool",
    "LpPool",
    "GlobalMaxPool",
    "GlobalLpPool",
    "GlobalAveragePool",
    "InstanceNormalization",
    "GroupNormalization",
    "MeanVarianceNormalization",
    "LayerNormalization",
    "LRN",
    "BatchNormalization",
)

NOT_PASSED = {
    # training-only and the argmax indices: refused with a sentence
    "test_batchnorm_epsilon_training_mode": "refused",
    "test_batchnorm_example_training_mode": "refused",
}


@functools.cache
def cases() -> tuple[Any, ...]:
    return tuple(
        c for c in all_cases() if node_cases.tested_op(c) in OPS and "_expanded" not in c.name
    )


def test_the_node_tests_cover_every_cnn_operator() -> None:
    # GlobalLpPool has no node test (its converter is checked against onnxruntime above)
    assert {node_cases.tested_op(c) for c in cases()} == set(OPS) - {"GlobalLpPool"}


@pytest.mark.parametrize("k", range(4))
def test_node_tests_pass_on_interpreter_and_vm_and_c_for_one_in_four(k: int) -> None:
    failures = []
    for i, case in enumerate(cases()):
        if i % 4 != k:
            continue
        backends = ("interp", "vm", "c") if i % 16 == k else ("interp", "vm")
        outcome = run_case(case, backends)
        want = NOT_PASSED.get(case.name, "passed")
        if outcome.status != want:
            failures.append(f"{case.name}: {outcome.status} ({outcome.message})")
    assert failures == []

"""What the importer refuses, and how it says so: one plain sentence naming the model's
nodes, inputs or options — never a traceback."""

from __future__ import annotations

import numpy as np
import pytest

from relaxc.frontend.onnx import import_onnx
from relaxc.ir.diagnostics import RxError

from .models import attention_block
from .util import helper, make_model, numpy_helper, onnx, randn

F32 = np.float32


def raw_model(nodes, inputs, outputs, initializers=(), opset: int = 17, domains=()):
    """A model built without onnx's checker (for graphs the checker itself would refuse)."""
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    ops = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, 1) for d in domains)]
    return helper.make_model(graph, opset_imports=ops)


def f32_info(name: str, shape):
    return helper.make_tensor_value_info(name, 1, shape)


def refused(model_or_path, *needles: str, **kw) -> str:
    with pytest.raises(RxError) as err:
        import_onnx(model_or_path, **kw)
    message = str(err.value)
    for needle in needles:
        assert needle in message, message
    return message


def test_every_unsupported_operator_is_listed_at_once() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("DeformConv", ["a", "a", "a"], ["v"], name="dc_1"),
        helper.make_node("RoiAlign", ["v", "sc", "k"], ["r"], name="up_1"),
        helper.make_node("RoiAlign", ["r", "sc", "k"], ["r2"], name="up_2"),
        helper.make_node("FancyOp", ["r2"], ["y"], name="mine", domain="com.example"),
    ]
    model = raw_model(
        nodes,
        [f32_info("x", [1, 1, 4, 4])],
        [f32_info("y", None)],
        [
            numpy_helper.from_array(np.array([2], np.int64), "k"),
            numpy_helper.from_array(np.ones(4, F32), "sc"),
        ],
        domains=["com.example"],
    )
    message = refused(
        model,
        "3 operators",
        "4 nodes",
        "RoiAlign (nodes 'up_1', 'up_2')",
        "DeformConv (node 'dc_1')",
        "com.example.FancyOp (node 'mine')",
    )
    assert "'ok'" not in message


def test_opsets_after_28_are_refused() -> None:
    model = raw_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [f32_info("x", [2])],
        [f32_info("y", [2])],
        opset=29,
    )
    refused(model, "opset 29", "7 to 28")


def test_an_op_older_than_at_opset_7_is_refused_one_unchanged_reads() -> None:
    nodes = [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    model = raw_model(nodes, [f32_info("x", [2])], [f32_info("y", [2])], opset=6)
    refused(model, "#0 (Add): opset 6 has Add version 6, older than", "can upgrade")
    relu = raw_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [f32_info("x", [2])],
        [f32_info("y", [2])],
        opset=6,
    )
    assert import_onnx(relu).opset == 6  # Relu-6 is Relu at opset 7 too


def test_not_an_onnx_file(tmp_path) -> None:
    bad = tmp_path / "m.onnx"
    bad.write_bytes(b"\x00\xffthis is not protobuf" * 10)
    refused(bad, str(bad), "not an ONNX model")
    refused(tmp_path / "missing.onnx", "does not exist")
    refused(tmp_path, "is a directory")


def test_a_used_dropout_mask_is_refused() -> None:
    nodes = [
        helper.make_node("Dropout", ["x"], ["y", "mask"], name="drop"),
        helper.make_node("Cast", ["mask"], ["m"], to=1),
    ]
    # before opset 12 the mask has no value ONNX defines outside training
    model = make_model(nodes, [("x", F32, [3])], [("y", F32, None), ("m", F32, None)], opset=11)
    refused(model, "node 'drop' (Dropout)", "'mask'", "dropout mask")


def test_an_unused_dropout_mask_is_fine() -> None:
    model = make_model(
        [helper.make_node("Dropout", ["x"], ["y", "mask"])],
        [("x", F32, [3])],
        [("y", F32, None)],
        opset=13,
    )
    assert import_onnx(model).module.functions[0].body == ()


def test_a_reshape_to_a_computed_shape_names_the_node() -> None:
    nodes = [
        helper.make_node("Cast", ["s"], ["si"], to=7),
        helper.make_node("Reshape", ["x", "si"], ["y"], name="reshape_it"),
    ]
    model = make_model(nodes, [("x", F32, [6]), ("s", F32, [2])], [("y", F32, None)])
    refused(model, "node 'reshape_it' (Reshape)", "its output shape depends on tensor values")


def test_unknown_input_dims_need_a_shape_option() -> None:
    model = raw_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", 1, [None, 3])],
        [f32_info("y", None)],
    )
    refused(model, "input 'x' has an unknown dimension 0", "--shape x=")
    result = import_onnx(model, input_shapes={"x": ["batch", 3]})
    assert "batch" in str(result.module.functions[0].params[0].type)
    refused(model, "--shape names 'y'", "inputs are x", input_shapes={"y": [1]})


def test_bounds_must_name_a_symbolic_dim() -> None:
    model, _ = attention_block()
    refused(model, "--bound names 'n'", "seq", upper_bounds={"n": 4})
    refused(model, "at least 1", upper_bounds={"seq": 0})


def test_unsupported_dtypes_are_named() -> None:
    model = raw_model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", 8, [2])],
        [helper.make_tensor_value_info("y", 8, [2])],
    )
    refused(model, "input 'x'", "STRING")
    bf16 = helper.make_tensor("w", 16, [2], [1, 2])
    model = raw_model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [f32_info("x", [2])],
        [f32_info("y", None)],
        [bf16],
    )
    # with ml_dtypes (the onnx extra) bf16 is held and computed: the mismatch is what is wrong
    refused(model, "node #0 (Add)", "dtype mismatch, f32 and bf16")


def test_conversion_errors_name_the_node_and_the_reason() -> None:
    model = make_model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1d", kernel_shape=[2])],
        [("x", F32, [1, 2, 8])],
        [("y", F32, None)],
        {"w": randn(3, 2, 3)},
    )
    refused(model, "node 'conv1d' (Conv)", "kernel_shape [2] does not match the weight's [3]")
    model = make_model(
        [helper.make_node("Add", ["a", "b"], ["y"], name="bad_add")],
        [("a", F32, [2, 3])],
        [("y", F32, [2, 3])],
        {"b": np.ones((2, 3), F32)},
        opset=13,
    )
    model.graph.initializer[0].CopyFrom(
        numpy_helper.from_array(np.ones((4, 3), F32), "b")
    )  # breaks broadcasting
    refused(model, "node 'bad_add' (Add)", "add")
    nodes = [
        helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], storage_order=1, name="mp")
    ]
    model = make_model(nodes, [("x", F32, [1, 1, 4, 4])], [("y", F32, None)])
    import_onnx(model)  # storage_order orders only the Indices output, unused here


def test_unnamed_nodes_are_named_by_position() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("DeformConv", ["a", "a", "a"], ["y"]),
    ]
    model = raw_model(nodes, [f32_info("x", [4])], [f32_info("y", None)])
    refused(model, "DeformConv (node #1)")


def test_onnx_checker_is_not_required_for_old_ir_initializer_inputs() -> None:
    # IR version 3 models list initializers among the graph inputs too.
    w = numpy_helper.from_array(np.full((3,), 2.0, F32), "w")
    model = raw_model(
        [helper.make_node("Mul", ["x", "w"], ["y"])],
        [f32_info("x", [3]), f32_info("w", [3])],
        [f32_info("y", None)],
        [w],
    )
    params = import_onnx(model).module.functions[0].params
    assert [p.name for p in params] == ["x"]
    assert onnx is not None


def test_without_the_onnx_package_the_error_says_how_to_install(monkeypatch, tmp_path) -> None:
    import relaxc.frontend.onnx.model as model_module

    monkeypatch.setattr(model_module, "onnx", None)
    refused(tmp_path / "m.onnx", "needs the onnx package", "pip install 'relaxc[onnx]'")

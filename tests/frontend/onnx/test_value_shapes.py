"""Nodes whose output shape depends on tensor values are refused with one sentence naming
the node and saying so (relaxc fixes every shape when it imports), in the API and on the
command line (exit code 1, no traceback)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from relaxc.cli.main import cli
from relaxc.frontend.onnx import import_onnx

from .test_errors import refused
from .util import helper, make_model, save

F32, I64 = np.float32, np.int64
VALUES = "its output shape depends on tensor values"


def _cli(model, tmp_path: Path) -> str:
    path = save(model, tmp_path)
    result = CliRunner().invoke(
        cli, ["import", str(path), "-o", str(tmp_path / "m.rx")], env={"RELAXC_DEBUG": None}
    )
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "m.rx").exists()
    return result.output


FINDERS = {
    "NonZero": (
        [helper.make_node("NonZero", ["x"], ["y"], name="where_nonzero")],
        [("x", F32, [2, 3])],
        [("y", I64, None)],
        "how many elements are nonzero",
    ),
    "NonMaxSuppression": (
        [helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["y"], name="nms")],
        [("boxes", F32, [1, 6, 4]), ("scores", F32, [1, 1, 6])],
        [("y", I64, None)],
        "how many boxes it keeps",
    ),
    "Unique": (
        [helper.make_node("Unique", ["x"], ["y"], name="uniq", sorted=1)],
        [("x", F32, [5])],
        [("y", F32, None)],
        "how many distinct values",
    ),
}


@pytest.mark.parametrize("op", sorted(FINDERS))
def test_ops_that_find_elements_are_refused_naming_the_node(op: str, tmp_path: Path) -> None:
    nodes, inputs, outputs, why = FINDERS[op]
    model = make_model(nodes, inputs, outputs, opset=17)
    name = nodes[0].name
    refused(model, f"{op} (", VALUES, why, f"node '{name}'")
    output = _cli(model, tmp_path)
    assert VALUES in output and f"'{name}'" in output


# Each: a node whose shape input is computed from tensor data (a ReduceMax or Cast of an input).
RUNTIME_SHAPES = {
    "Reshape": (
        [
            helper.make_node("Cast", ["s"], ["si"], to=7),
            helper.make_node("Reshape", ["x", "si"], ["y"], name="n"),
        ],
        [("x", F32, [6]), ("s", F32, [2])],
        "the target shape",
    ),
    "Expand": (
        [
            helper.make_node("Cast", ["s"], ["si"], to=7),
            helper.make_node("Expand", ["x", "si"], ["y"], name="n"),
        ],
        [("x", F32, [1, 3]), ("s", F32, [2])],
        "the target shape",
    ),
    "ConstantOfShape": (
        [
            helper.make_node("Cast", ["s"], ["si"], to=7),
            helper.make_node("ConstantOfShape", ["si"], ["y"], name="n"),
        ],
        [("s", F32, [2])],
        "its shape input",
    ),
    "Tile": (
        [
            helper.make_node("Cast", ["s"], ["si"], to=7),
            helper.make_node("Tile", ["x", "si"], ["y"], name="n"),
        ],
        [("x", F32, [2, 3]), ("s", F32, [2])],
        "the repeats input",
    ),
    "Compress": (
        [
            helper.make_node("Cast", ["c"], ["cb"], to=9),
            helper.make_node("Compress", ["x", "cb"], ["y"], name="n", axis=0),
        ],
        [("x", F32, [4, 2]), ("c", F32, [4])],
        "its condition",
    ),
    "Range": (
        [
            helper.make_node("ReduceMax", ["s"], ["m"], keepdims=0),
            helper.make_node("Cast", ["m"], ["mi"], to=7),
            helper.make_node("Range", ["zero", "mi", "one"], ["y"], name="n"),
        ],
        [("s", F32, [3])],
        "its limit input",
    ),
    "Slice": (
        [
            helper.make_node("Cast", ["s"], ["si"], to=7),
            helper.make_node("Slice", ["x", "zero1", "si"], ["y"], name="n"),
        ],
        [("x", F32, [6]), ("s", F32, [1])],
        "ends",
    ),
    "TopK": (
        [
            helper.make_node("Cast", ["s"], ["si"], to=7),
            helper.make_node("TopK", ["x", "si"], ["y", "i"], name="n"),
        ],
        [("x", F32, [6]), ("s", F32, [1])],
        "the K input",
    ),
    "Pad": (
        [
            helper.make_node("Cast", ["s"], ["si"], to=7),
            helper.make_node("Pad", ["x", "si"], ["y"], name="n"),
        ],
        [("x", F32, [3]), ("s", F32, [2])],
        "the pads input",
    ),
}
CONSTANTS = {
    "zero": np.array(0, I64),
    "one": np.array(1, I64),
    "zero1": np.array([0], I64),
}


@pytest.mark.parametrize("op", sorted(RUNTIME_SHAPES))
def test_a_shape_from_tensor_values_is_refused_naming_the_node(op: str, tmp_path: Path) -> None:
    nodes, inputs, what = RUNTIME_SHAPES[op]
    used = {n for node in nodes for n in node.input}
    inits = {k: v for k, v in CONSTANTS.items() if k in used}
    outputs = [("y", F32, None)] if op not in ("Range",) else [("y", I64, None)]
    model = make_model(nodes, inputs, outputs, inits, opset=17)
    refused(model, f"node 'n' ({op})", VALUES, what, "computed at run time")
    assert VALUES in _cli(model, tmp_path)


def test_a_shape_of_symbolic_dims_where_a_number_is_needed_says_so() -> None:
    """TopK's k from Shape(x)[0] of a symbolic batch: not data, but not a number either."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
        helper.make_node("TopK", ["x", "s"], ["y", "i"], name="topk"),
    ]
    model = make_model(nodes, [("x", F32, ["n"])], [("y", F32, ["n"]), ("i", I64, ["n"])])
    message = refused(model, "node 'topk' (TopK)", "(n), computed from symbolic dims", "--shape")
    assert "run time" not in message
    import_onnx(model, input_shapes={"x": [5]})  # with a static shape it imports

"""Real architectures of the ONNX model zoo (the "light" test models the onnx package ships,
whose weights are ConstantOfShape subgraphs): imported, they fold into named weights; with the
weights replaced by random ones, they compute onnxruntime's numbers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from relaxc.frontend.onnx import import_onnx
from relaxc.passes.assemble import assemble_pipeline
from relaxc.passes.memory_report import memory_report
from relaxc.passes.pipeline import Pipeline

from .util import feed_order, flatten, numpy_helper, onnx, run_interpreter, run_ort

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ZOO = sorted(p.stem.removeprefix("light_") for p in LIGHT.glob("light_*.onnx"))


def zoo_model(name: str):
    return onnx.load(str(LIGHT / f"light_{name}.onnx"))


def with_random_weights(model, seed: int = 0):
    """``model`` with each ConstantOfShape weight replaced by a random initializer (BN
    variances positive, scales near 1), so that a wrong kernel or index shows in the output."""
    rng = np.random.default_rng(seed)
    consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    role = {}
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            for k, name in enumerate(node.input[1:], start=1):
                role[name] = ("scale", "bias", "mean", "var")[k - 1]
    keep = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in consts:
            keep.append(node)
            continue
        shape = [int(d) for d in consts[node.input[0]]]
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else 1
        kind = role.get(node.output[0])
        if kind == "var":
            arr = rng.uniform(0.5, 1.5, shape)
        elif kind == "scale":
            arr = 1.0 + 0.1 * rng.standard_normal(shape)
        elif len(shape) == 1:
            arr = 0.1 * rng.standard_normal(shape)
        else:
            arr = rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)
        model.graph.initializer.append(
            numpy_helper.from_array(arr.astype(np.float32), node.output[0])
        )
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return model


@pytest.mark.parametrize("name", ZOO)
def test_zoo_architectures_import_and_plan(name: str) -> None:
    result = import_onnx(LIGHT / f"light_{name}.onnx")
    fn = result.module.functions[0]
    ops = {b.value.op for b in fn.body}
    assert "full" not in ops  # every ConstantOfShape weight was folded into a named weight
    assert result.weights and all(a.dtype == np.float32 for a in result.weights.values())
    (report,) = memory_report(Pipeline(assemble_pipeline("vm")).run(result.module))
    assert 0 < report.lower_bound <= report.arena_bytes < report.naive_bytes


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "inception_v1"])
def test_zoo_architectures_with_random_weights_match_onnxruntime(name: str) -> None:
    model = with_random_weights(zoo_model(name))
    (inp,) = feed_order(model)
    info = next(i for i in model.graph.input if i.name == inp)
    shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    want = run_ort(model, {inp: x})
    got = run_interpreter(import_onnx(model), [x])
    assert got[0].shape == want[0].shape
    assert want[0].std() > 1e-5  # random weights make the classes differ
    np.testing.assert_allclose(got[0], want[0], rtol=2e-3, atol=1e-6)
    assert flatten(got)[0].argmax() == want[0].argmax()

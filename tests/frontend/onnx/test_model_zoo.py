"""Real architectures of the ONNX model zoo (the "light" test models the onnx package ships,
whose weights are ConstantOfShape subgraphs): imported, they fold into named weights; with the
weights replaced by random ones, they compute onnxruntime's numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from relaxc.frontend.onnx import import_onnx
from relaxc.passes.assemble import assemble_pipeline
from relaxc.cli.report.analysis import memory_report
from relaxc.passes.pipeline import Pipeline

from .util import feed_order, flatten, run_interpreter, run_ort

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from zoo_models import light_dir, with_random_weights, zoo_model, zoo_names  # noqa: E402

LIGHT = light_dir()
ZOO = zoo_names()

__all__ = ["LIGHT", "ZOO", "with_random_weights", "zoo_model"]


@pytest.mark.parametrize("name", ZOO)
def test_zoo_architectures_import_and_plan(name: str) -> None:
    result = import_onnx(LIGHT / f"light_{name}.onnx")
    fn = result.module.functions[0]
    ops = {b.value.op for b in fn.body}
    assert "full" not in ops  # every ConstantOfShape weight was folded into a named weight
    assert result.weights and all(a.dtype == np.float32 for a in result.weights.values())
    (report,) = memory_report(Pipeline(assemble_pipeline("vm")).run(result.module))
    assert 0 < report.lower_bound <= report.arena_bytes < report.naive_bytes
    assert report.baseline_bytes and report.saving and report.saving > 0


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

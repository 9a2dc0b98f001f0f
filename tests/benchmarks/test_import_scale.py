"""benchmarks/import_scale.py: the table of import time and peak RSS, at tiny sizes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from import_scale import generated_model, main  # noqa: E402


def test_the_generated_model_has_the_asked_size_and_is_valid() -> None:
    import onnx

    model = generated_model(100)
    assert 100 <= len(model.graph.node) < 104
    onnx.checker.check_model(model)
    assert {n.op_type for n in model.graph.node} >= {"MatMul", "Shape", "Reshape", "Relu"}


def test_it_prints_a_row_per_size(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sizes", "20,40"]) == 0
    out = capsys.readouterr().out
    assert "peak RSS MiB" in out and "time/node vs smallest" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [int(r[0]) for r in rows] == [20, 40]


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--sizes", "5"])
    assert stop.value.code == 2

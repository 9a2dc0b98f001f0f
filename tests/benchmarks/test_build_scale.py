"""benchmarks/build_scale.py: the tables of peak RSS and per-step times, at tiny sizes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from build_scale import main  # noqa: E402


def test_it_prints_peak_memory_beside_time_and_every_pass(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--sizes", "60", "--steps", "30,60"]) == 0
    out = capsys.readouterr().out
    assert "peak RSS MiB" in out and "wall s" in out
    for step in ("parse", "ReorderForMemory", "ComputeInPlace", "+ verify", "report"):
        assert step in out
    assert "chain_program" in out and "layered_program" in out


def test_bad_sizes_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--steps", "5"])
    assert stop.value.code == 2

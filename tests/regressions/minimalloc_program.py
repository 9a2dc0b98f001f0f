"""A MiniMalloc benchmark instance written as an .rx program (issue 17's "program encoding"):
the encoding of ``benchmarks/planning_instances.py`` (one writer for the benchmark and the
tests).

Each buffer ``(lower, upper, size)`` becomes ``%b = zeros((size / 4,), f32)`` at time
``lower`` and is folded into a running 0-d accumulator at time ``upper`` (``sum`` then
``add``), so the program's planned buffers are the instance's, with a few small tensors
mixed in as in any real model.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from planning_instances import DATA as _ROOT  # noqa: E402
from planning_instances import program_text, read_instance  # noqa: E402

DATA = _ROOT / "challenging"


def program(name: str) -> str:
    """The .rx program of challenging instance ``name`` ("D": ``D.*.csv``)."""
    return program_text(read_instance(next(DATA.glob(f"{name}.*.csv"))))

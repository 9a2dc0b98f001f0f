"""One named test per bug the hostile inputs found; each failed before its fix.

Each docstring gives the input, the symptom, the cause and the fix.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tempfile
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.vm import codegen, load_file
from relaxc.backend.vm import loader as vm_loader

from .harness import SAMPLES, changed, check_problems, crash_problems, invoke, run_subprocesses, snapshot

RELAY = (SAMPLES / "relay_memory.rx").read_text()


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _fn(params: str, body: str = "", ret: str = "Tensor[(1,), f32]", result: str = "%x", bounds: str = "") -> str:
    attrs = f" attrs {{upper_bounds = {{{bounds}}}}}" if bounds else ""
    return f"fn @main({params}) -> {ret}{attrs} {{\n{body}  return {result}\n}}\n"


def _ones(rank: int) -> str:
    return "(" + ", ".join(["1"] * rank) + ")"


# ---------------------------------------------------------------------------------------
# 1. A dtype (or inf/nan) inside a dimension expression


@pytest.mark.parametrize("expr, col, word", [
    ("u32 * 10", 22, "'u32' is a dtype"),
    ("n * f32", 26, "'f32' is a dtype"),
    ("max(n, i8)", 29, "'i8' is a dtype"),
    ("-f32", 23, "'f32' is a dtype"),
    ("inf * 2", 22, "'inf' is a number"),
    ("n + -nan", 27, "'nan' is a number"),
])
@pytest.mark.parametrize("command", ["check", "run", "report"])
def test_dtype_in_a_dimension_expression(tmp_path: Path, expr: str, col: int, word: str, command: str) -> None:
    """``reshape(%x1, (u32 * 10,))`` (a mutation of relay_memory.rx): every command ended in
    "internal error: AttributeError: 'DType' object has no attribute 'lhs'" (exit 3). The
    parser built ``BinOp('*', DType('u32'), 10)``: a dimension's name may be a dtype or
    inf/nan, and arithmetic took any value. Now the parser refuses it at the operand."""
    path = _write(tmp_path, "m.rx", RELAY.replace("(n * 10,))", f"({expr},))"))
    o = invoke(command, path)
    assert crash_problems(o, codes=(1,)) == [], o
    assert o.stderr.startswith(f"{path}:14:{col}: error: {word}, not a dimension"), o
    assert check_problems(invoke("check", path), path, path.read_text()) == []

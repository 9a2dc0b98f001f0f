"""Helpers for Before/Expected pass tests and differential checks."""

from __future__ import annotations

import difflib
from typing import Any, Mapping

import numpy as np

from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.ir.nodes import Module
from relaxc.ir.verifier import verify_module
from relaxc.passes.base import Pass


def run_pass(p: Pass, before: str) -> Module:
    m = parse_module(before, "before.rx")
    verify_module(m)
    after = p(m)
    verify_module(after)
    return after


def assert_pass(p: Pass, before: str, expected: str) -> Module:
    """Run ``p`` on ``before`` and compare with ``expected`` (parsed, so layout is free)."""
    after = run_pass(p, before)
    want = parse_module(expected, "expected.rx")
    if after != want:
        diff = "\n".join(
            difflib.unified_diff(
                print_module(want).splitlines(),
                print_module(after).splitlines(),
                "expected",
                "actual",
                lineterm="",
            )
        )
        raise AssertionError(f"{p.name} output differs from the expected module:\n{diff}")
    return after


def assert_same_results(a: Any, b: Any) -> None:
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_results(x, y)
    else:
        np.testing.assert_array_equal(a, b)


def run_both(
    before: Module,
    after: Module,
    dims: Mapping[str, int] | None = None,
    weights: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    entry: str = "main",
) -> tuple[Any, Any]:
    fn = before.get(entry)
    assert fn is not None
    args = random_inputs(fn, resolve_dims(fn, dict(dims or {})), seed)
    a = Interpreter(before, weights).run(entry, args, dims)
    b = Interpreter(after, weights).run(entry, args, dims)
    return a, b

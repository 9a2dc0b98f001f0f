"""The C kernels of the second reduction family (log_softmax) against the reference
kernels."""

from __future__ import annotations

from pathlib import Path

import pytest

from .cbuild import needs_cc
from .test_ops_reduce import check

pytestmark = needs_cc


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_log_softmax(tmp_path: Path, dtype: str, axis: int) -> None:
    body = f"  %y = log_softmax(%x, axis={axis})"
    check(tmp_path, f"%x: Tensor[(3, 4, 5), {dtype}]", body)


def test_log_softmax_over_a_symbolic_axis(tmp_path: Path) -> None:
    check(tmp_path, "%x: Tensor[(2, n), f32]", "  %y = log_softmax(%x, axis=1)", {"n": 7})

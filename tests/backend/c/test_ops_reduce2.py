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


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "i32", "i64", "u32", "u8", "i8"])
def test_cumulative(tmp_path: Path, op: str, dtype: str) -> None:
    body = "\n".join(
        f"  %y{k} = {op}(%x, axis={axis}, exclusive={ex}, reverse={rev})"
        for k, (axis, ex, rev) in enumerate(
            [
                (0, "false", "false"),
                (1, "true", "false"),
                (2, "false", "true"),
                (-1, "true", "true"),
            ]
        )
    )
    check(tmp_path, f"%x: Tensor[(3, 4, 5), {dtype}]", body)


def test_cumsum_and_cumprod_over_a_symbolic_axis(tmp_path: Path) -> None:
    body = "  %s = cumsum(%x, axis=1, reverse=true)\n  %p = cumprod(%x, axis=1, exclusive=true)"
    check(tmp_path, "%x: Tensor[(2, n), f32]", body, {"n": 6})


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "i32", "i64", "u8", "i8"])
@pytest.mark.parametrize(("axis", "largest"), [(0, "true"), (1, "false"), (-1, "true")])
def test_topk_indices(tmp_path: Path, dtype: str, axis: int, largest: str) -> None:
    body = f"  %y = topk_indices(%x, k=2, axis={axis}, largest={largest})"
    check(tmp_path, f"%x: Tensor[(3, 4, 5), {dtype}]", body)


def test_topk_indices_of_a_symbolic_row(tmp_path: Path) -> None:
    check(tmp_path, "%x: Tensor[(2, n), f32]", "  %y = topk_indices(%x, k=3)", {"n": 9})

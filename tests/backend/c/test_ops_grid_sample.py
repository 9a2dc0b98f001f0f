"""grid_sample in C against the reference kernel: every mode, padding mode and alignment, on
2-D and 3-D (and 1-D) spatial inputs, float dtypes (nearest on integers too), a symbolic
batch; the grid's coordinates reach past the border so that padding matters, and the
checker's third draw puts NaN and infinities into the grid."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from .cbuild import needs_cc
from .test_ops_reduce import check

pytestmark = needs_cc


def wide(grid: str, dtype: str) -> str:
    """Lines binding ``%{grid}w``, the grid times 2.5 (the random draws are in [-1, 1))."""
    return f"  %s{grid} = const(2.5, {dtype})\n  %{grid}w = multiply(%{grid}, %s{grid})\n"


COMBOS = list(itertools.product(["nearest", "linear", "cubic"], ["zeros", "border", "reflection"]))


@pytest.mark.parametrize("align", ["false", "true"])
@pytest.mark.parametrize("mode,padding", COMBOS)
def test_grid_sample_2d(tmp_path: Path, mode: str, padding: str, align: str) -> None:
    body = wide("g", "f32") + (
        f'  %y = grid_sample(%x, %gw, mode="{mode}", padding_mode="{padding}", '
        f"align_corners={align})"
    )
    check(tmp_path, "%x: Tensor[(n, 2, 3, 4), f32], %g: Tensor[(n, 5, 3, 2), f32]", body, {"n": 2})


@pytest.mark.parametrize("mode,padding", COMBOS)
def test_grid_sample_3d_and_1d(tmp_path: Path, mode: str, padding: str) -> None:
    attrs = f'mode="{mode}", padding_mode="{padding}"'
    body = (
        wide("g", "f64")
        + wide("b", "f32")
        + f"  %y = grid_sample(%x, %gw, {attrs}, align_corners=true)\n"
        + f"  %z = grid_sample(%a, %bw, {attrs})\n"
        + f"  %u = grid_sample(%a, %b, {attrs})"
    )
    params = (
        "%x: Tensor[(1, 2, 2, 3, 4), f64], %g: Tensor[(1, 2, 3, 2, 3), f64], "
        "%a: Tensor[(2, 1, 5), f32], %b: Tensor[(2, 6, 1), f32]"
    )
    check(tmp_path, params, body)


@pytest.mark.parametrize("dtype", ["f16", "i32", "u8"])
def test_grid_sample_other_dtypes(tmp_path: Path, dtype: str) -> None:
    body = (
        wide("g", "f16") + '  %y = grid_sample(%x, %gw, mode="nearest", padding_mode="reflection")'
    )
    if dtype == "f16":
        body += '\n  %z = grid_sample(%x, %gw, mode="cubic", padding_mode="border")'
    check(tmp_path, f"%x: Tensor[(1, 3, 4, 2), {dtype}], %g: Tensor[(1, 3, 3, 2), f16]", body)

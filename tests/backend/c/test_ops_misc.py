"""The C kernels of the small ops (bitcast, det) against the reference kernels."""

from __future__ import annotations

from pathlib import Path

import pytest

from .cbuild import needs_cc
from .test_ops_reduce import check

pytestmark = needs_cc


@pytest.mark.parametrize(
    ("src", "dst"),
    [("f32", "i32"), ("i32", "f32"), ("f64", "i64"), ("u16", "f16"), ("i8", "u8"), ("bool", "u8")],
)
def test_bitcast(tmp_path: Path, src: str, dst: str) -> None:
    check(tmp_path, f"%x: Tensor[(3, 4), {src}]", f"  %y = bitcast(%x, dtype={dst})")


def test_bitcast_of_a_symbolic_shape(tmp_path: Path) -> None:
    check(tmp_path, "%x: Tensor[(n, 2), u32]", "  %y = bitcast(%x, dtype=i32)", {"n": 5})


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16"])
@pytest.mark.parametrize("shape", ["(1, 1)", "(3, 3)", "(2, 4, 4)", "(n, 2, 2)"])
def test_det(tmp_path: Path, dtype: str, shape: str) -> None:
    dims = {"n": 3} if "n" in shape else None
    check(tmp_path, f"%x: Tensor[{shape}, {dtype}]", "  %y = det(%x)", dims)

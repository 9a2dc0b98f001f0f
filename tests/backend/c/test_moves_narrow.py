"""The kernels that only move elements (backend/c/kernels MOVES_BITS: concat, split,
transpose, strided_slice, take, tile, gather_elements, gather_nd) on bf16 and the
low-precision types, which C stores as their bits: the interpreter's bits, in C; a kernel
that computes stays refused on them."""

from __future__ import annotations

import numpy as np
import pytest

from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError
from relaxc.ir.types import numpy_dtype

from .cbuild import build, needs_cc, run_c

pytest.importorskip("ml_dtypes")

PROGRAM = """
fn @main(%x: Tensor[(2, 3, 4), T], %y: Tensor[(2, 3, 4), T], %i: Tensor[(2,), i64],
         %e: Tensor[(2, 3, 1), i64], %n: Tensor[(2, 2), i64])
    -> Tuple[Tensor[(4, 3, 2), T], Tensor[(2, 6, 4), T], Tensor[(2, 3, 2), T],
             Tensor[(2, 3, 4), T], Tensor[(4, 3, 4), T], Tensor[(2, 1, 4), T],
             Tensor[(2, 3, 1), T], Tensor[(2, 4), T]] {
  %t = transpose(%x, axes=(2, 1, 0))
  %c = concat(%x, %y, axis=1)
  %s = strided_slice(%x, begin=(1,), end=(4,), strides=(2,), axes=(2,))
  %g = take(%x, %i, axis=0)
  %tl = tile(%x, repeats=(2, 1, 1))
  %parts = split(%x, indices_or_sections=3, axis=1)
  %p0 = %parts.0
  %ge = gather_elements(%x, %e, axis=2)
  %gn = gather_nd(%x, %n)
  return (%t, %c, %s, %g, %tl, %p0, %ge, %gn)
}
"""

NARROW = ["bf16", "f8e4m3fn", "f8e5m2", "i4", "u2"]


def _inputs(dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(len(dtype))
    kind = np.dtype(numpy_dtype(dtype)).kind
    raw = rng.integers(-2, 2, (2, 2, 3, 4)) if kind in "iu" else rng.normal(size=(2, 2, 3, 4))
    if dtype == "u2":
        raw = np.abs(raw)
    x, y = raw.astype(numpy_dtype(dtype))
    return [
        x,
        y,
        np.array([1, -2], np.int64),
        np.array([[[3], [0], [-1]], [[1], [2], [0]]], np.int64),
        np.array([[1, 2], [0, -1]], np.int64),
    ]


@needs_cc
@pytest.mark.parametrize("dtype", NARROW)
def test_moves_on_narrow_types_are_the_interpreters_bits(dtype: str, tmp_path) -> None:
    text = PROGRAM.replace(", T]", f", {dtype}]")
    args = _inputs(dtype)
    want = Interpreter(parse_module(text, "m.rx"), {}).run("main", args, {})
    got = run_c(build(text, tmp_path, prefix="moves"), args, {})
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        bits = f"u{g.dtype.itemsize}"
        np.testing.assert_array_equal(g.view(bits), w.view(bits))


def test_a_kernel_that_computes_is_still_refused_on_bf16(tmp_path) -> None:
    text = """fn @main(%x: Tensor[(4,), bf16]) -> Tensor[(4,), bf16] {
  %y = exp(%x)
  return %y
}"""
    with pytest.raises(RxError, match="exp on bf16: dtype bf16 has no C representation"):
        build(text, tmp_path, prefix="refused")

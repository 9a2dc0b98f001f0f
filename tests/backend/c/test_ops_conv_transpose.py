"""conv2d_transpose in C against the reference kernel: groups, strides, padding, dilation,
output padding, bias, a symbolic batch dim, every float dtype and an integer one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module

from .cbuild import assert_close, build, needs_cc, run_c

pytestmark = needs_cc

PROGRAM = """
fn @main(%x: Tensor[(n, 4, 3, 5), {t}], %w: Tensor[(4, 3, 3, 2), {t}], %b: Tensor[(6,), {t}]) -> Tuple[Tensor[(n, 3, 5, 6), {t}], Tensor[(n, 6, 8, 10), {t}], Tensor[(n, 6, 6, 7), {t}]] {{
  %plain = conv2d_transpose(%x, %wg1)
  %strided = conv2d_transpose(%x, %w, %b, strides=(2, 2), padding=(0, 1, 0, 0), output_padding=(1, 1), groups=2)
  %dilated = conv2d_transpose(%x, %w, %b, strides=(1, 1), dilation=(2, 2), padding=(1, 0, 0, 0), groups=2)
  return (%plain, %strided, %dilated)
}}
"""  # noqa: E501


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "i32"])
def test_conv2d_transpose_matches_the_reference(tmp_path: Path, dtype: str) -> None:
    # %wg1: one group of 4 input channels into 3 (its own parameter)
    text = PROGRAM.format(t=dtype).replace(
        "%b: Tensor[(6,), {t}])".format(t=dtype),
        f"%b: Tensor[(6,), {dtype}], %wg1: Tensor[(4, 3, 3, 2), {dtype}])",
    )
    module = parse_module(text, "t.rx")
    built = build(text, tmp_path, prefix=f"ct_{dtype}", sanitize=dtype == "f32")
    rng = np.random.default_rng(9)
    npt = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32}[dtype]
    if dtype == "i32":
        args = [
            rng.integers(-50, 50, size=s).astype(npt)
            for s in [(2, 4, 3, 5), (4, 3, 3, 2), (6,), (4, 3, 3, 2)]
        ]
    else:
        args = [
            rng.normal(size=s).astype(npt) for s in [(2, 4, 3, 5), (4, 3, 3, 2), (6,), (4, 3, 3, 2)]
        ]
    want = Interpreter(module).run("main", args, {"n": 2})
    got = run_c(built, args, {"n": 2})
    assert_close(got, want, f"{dtype} conv2d_transpose")

"""resize, hard_sigmoid and hard_swish in C against the reference kernels, every float dtype
(and nearest on integers), with a symbolic batch dim; the C reads the taps the numpy kernel
computes, in its order, so nearest is exact and the sums agree to the last rounding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module

from .cbuild import assert_close, build, needs_cc, run_c

pytestmark = needs_cc

PROGRAM = """
fn @main(%x: Tensor[(n, 2, 3, 5), {t}]) -> Tuple[{outs}] {{
  %near = resize(%x, sizes=(n, 2, 6, 10), scales=(1.0, 1.0, 2.0, 2.0), coordinate_transformation_mode="asymmetric", nearest_mode="floor")
  %near2 = resize(%x, sizes=(n, 2, 2, 7), nearest_mode="round_prefer_ceil")
  %crop = resize(%x, sizes=(n, 2, 4, 4), coordinate_transformation_mode="tf_crop_and_resize", roi=(0.0, 0.0, -0.2, 0.1, 1.0, 1.0, 0.9, 1.3), extrapolation_value=-2.5)
{floats}  return ({rets})
}}
"""  # noqa: E501

FLOAT_LINES = """\
  %lin = resize(%x, sizes=(n, 2, 6, 10), mode="linear")
  %lin_ac = resize(%x, sizes=(n, 2, 4, 3), mode="linear", coordinate_transformation_mode="align_corners")
  %cub = resize(%x, sizes=(n, 2, 5, 8), mode="cubic", cubic_coeff_a=-0.5, exclude_outside=true)
  %anti = resize(%x, sizes=(n, 2, 2, 3), mode="linear", antialias=true, coordinate_transformation_mode="pytorch_half_pixel")
  %hsig = hard_sigmoid(%x, alpha=0.3, beta=0.4)
  %hsw = hard_swish(%x)
"""  # noqa: E501


def program(dtype: str) -> str:
    names = ["near", "near2", "crop"]
    shapes = ["(n, 2, 6, 10)", "(n, 2, 2, 7)", "(n, 2, 4, 4)"]
    floats = dtype.startswith("f")
    if floats:
        names += ["lin", "lin_ac", "cub", "anti", "hsig", "hsw"]
        shapes += ["(n, 2, 6, 10)", "(n, 2, 4, 3)", "(n, 2, 5, 8)", "(n, 2, 2, 3)"]
        shapes += ["(n, 2, 3, 5)"] * 2
    return PROGRAM.format(
        t=dtype,
        outs=", ".join(f"Tensor[{s}, {dtype}]" for s in shapes),
        floats=FLOAT_LINES if floats else "",
        rets=", ".join(f"%{n}" for n in names),
    )


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "i32", "u8"])
def test_resize_and_hard_activations_match_the_reference(tmp_path: Path, dtype: str) -> None:
    text = program(dtype)
    module = parse_module(text, "t.rx")
    built = build(text, tmp_path, prefix=f"rz_{dtype}", sanitize=dtype == "f32")
    rng = np.random.default_rng(5)
    npt = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32, "u8": np.uint8}
    if dtype.startswith("f"):
        x = (rng.normal(size=(2, 2, 3, 5)) * 4).astype(npt[dtype])
        x.reshape(-1)[:5] = [np.nan, np.inf, -np.inf, -0.0, 3.0]
    else:
        x = rng.integers(0, 100, size=(2, 2, 3, 5)).astype(npt[dtype])
    want = Interpreter(module).run("main", [x], {"n": 2})
    got = run_c(built, [x], {"n": 2})
    assert_close(got, want, f"{dtype} resize")
    for g, w in zip(got[:3], want[:3]):  # nearest and extrapolation: copies, bit for bit
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))
    if dtype.startswith("f"):
        code = built.sources.files[f"rz_{dtype}.c"]
        assert "static const double rw" in code and "static const int32_t ri" in code


def test_resize_to_no_position_compiles_strict(tmp_path: Path) -> None:
    """Regression (the fuzzer, seed 155): a resize to an empty output wrote a kernel whose
    parameters went unused, which -Werror refused."""
    text = """
fn @main(%x: Tensor[(5,), f32]) -> Tuple[Tensor[(0,), f32], Tensor[(2,), f32]] {
  %e = resize(%x, sizes=(0,), mode="linear", antialias=true)
  %y = resize(%x, sizes=(2,), mode="linear")
  return (%e, %y)
}
"""
    built = build(text, tmp_path, prefix="rz_empty")
    x = np.arange(5, dtype=np.float32)
    want = Interpreter(parse_module(text, "t.rx")).run("main", [x])
    got = run_c(built, [x])
    assert got[0].shape == (0,)
    assert_close(got, want, "empty resize")

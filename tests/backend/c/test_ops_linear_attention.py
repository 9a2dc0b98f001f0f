"""linear_attention in C against the interpreter (the numpy kernel): the four rules, grouped
query heads, per-key and per-head decay, per-head and shared beta, a state of another dtype."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.inputs import random_inputs
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module

from .cbuild import assert_close, build, needs_cc, run_c

pytestmark = needs_cc

PROGRAM = """
fn @main(%q: Tensor[(2, 4, 5, 3), {t}], %k: Tensor[(2, 2, 5, 3), {t}],
         %v: Tensor[(2, 2, 5, 2), {t}], %s: Tensor[(2, 2, 3, 2), {t}],
         %s32: Tensor[(2, 2, 3, 2), f32], %g: Tensor[(2, 2, 5, 3), {t}],
         %g1: Tensor[(2, 2, 5, 1), {t}], %beta: Tensor[(2, 2, 5, 1), {t}],
         %b1: Tensor[(2, 1, 5, 1), {t}])
    -> Tuple[Tensor[(2, 4, 5, 2), {t}], Tensor[(2, 2, 3, 2), {t}], Tensor[(2, 4, 5, 2), {t}],
             Tensor[(2, 2, 3, 2), {t}], Tensor[(2, 4, 5, 2), {t}], Tensor[(2, 2, 3, 2), {t}],
             Tensor[(2, 4, 5, 2), {t}], Tensor[(2, 2, 3, 2), f32]] {
  %l = linear_attention(%q, %k, %v, %s, scale=0.5, rule="linear")
  %ga = linear_attention(%q, %k, %v, %s, %g1, scale=0.3, rule="gated")
  %d = linear_attention(%q, %k, %v, %s, %b1, scale=0.5, rule="delta")
  %gd = linear_attention(%q, %k, %v, %s32, %g, %beta, scale=0.5)
  %l0 = %l.0
  %l1 = %l.1
  %ga0 = %ga.0
  %ga1 = %ga.1
  %d0 = %d.0
  %d1 = %d.1
  %gd0 = %gd.0
  %gd1 = %gd.1
  return (%l0, %l1, %ga0, %ga1, %d0, %d1, %gd0, %gd1)
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16"])
def test_linear_attention_matches_the_interpreter(tmp_path: Path, dtype: str) -> None:
    text = PROGRAM.replace("{t}", dtype)
    module = parse_module(text, "t.rx")
    built = build(text, tmp_path, prefix=f"lin_{dtype}")
    code = built.sources.files[f"lin_{dtype}.c"]
    assert "scratch" in code  # the state is planned scratch
    args = random_inputs(module.get("main"), {}, 4)
    for i in (5, 6):  # decays in log space: negative
        args[i] = -np.abs(args[i])
    for i in (7, 8):  # beta in (0, 1)
        args[i] = np.abs(args[i]) / (1 + np.abs(args[i]))
    want = Interpreter(module).run("main", list(args))
    got = run_c(built, args)
    if dtype == "f16":  # C rounds each result once from double, as numpy does: to one ulp
        for g, w in zip(got, want):
            ulp = np.spacing(np.abs(np.asarray(w))).astype(np.float64)
            assert (np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64)) <= ulp).all()
    else:
        assert_close(got, want, dtype)

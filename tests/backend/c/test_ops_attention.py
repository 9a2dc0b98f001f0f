"""attention and rotary_embedding in C against the interpreter (the numpy kernels): every
result mode, grouped heads, a bias with broadcast dims, causal offsets, padding lengths with
fully masked rows, softcap; rotary in both layouts, interleaved or not, partial, in place."""

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
fn @main(%q: Tensor[(2, 4, 3, 4), {t}], %k: Tensor[(2, 2, 5, 4), {t}],
         %v: Tensor[(2, 2, 5, 3), {t}],
         %bias: Tensor[(2, 1, 3, 5), {t}], %lens: Tensor[(2,), i64],
         %x: Tensor[(2, 3, 4, 10), {t}], %cos: Tensor[(2, 4, 3), {t}], %sin: Tensor[(2, 4, 3), {t}],
         %xs: Tensor[(2, 4, 3, 6), {t}], %c1: Tensor[(1, 4, 3), {t}], %s1: Tensor[(1, 4, 3), {t}])
    -> Tuple[Tensor[(2, 4, 3, 3), {t}], Tensor[(2, 4, 3, 3), {t}], Tensor[(2, 4, 3, 3), {t}],
             Tensor[(2, 4, 3, 5), {t}], Tensor[(2, 4, 3, 5), {t}], Tensor[(2, 4, 3, 5), {t}],
             Tensor[(2, 4, 3, 5), {t}], Tensor[(2, 3, 4, 10), {t}], Tensor[(2, 3, 4, 10), {t}],
             Tensor[(2, 4, 3, 6), {t}]] {
  %y = attention(%q, %k, %v, scale=0.5)
  %yb = attention(%q, %k, %v, %bias, scale=0.4, softcap=2.5, causal=true, offset=1)
  %yl = attention(%q, %k, %v, %bias, %lens, scale=0.4, causal=true)
  %qk = attention(%q, %k, %v, %bias, scale=0.5, softcap=2.0, result="qk")
  %qc = attention(%q, %k, %v, %bias, scale=0.5, softcap=2.0, result="qk_softcap")
  %qb = attention(%q, %k, %v, %bias, %lens, scale=0.5, causal=true, result="qk_bias")
  %pr = attention(%q, %k, %v, %bias, %lens, scale=0.5, causal=true, result="probs")
  %r = rotary_embedding(%x, %cos, %sin)
  %ri = rotary_embedding(%x, %cos, %sin, interleaved=true)
  %rs = rotary_embedding(%xs, %c1, %s1, seq_axis=1, interleaved=true)
  return (%y, %yb, %yl, %qk, %qc, %qb, %pr, %r, %ri, %rs)
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_attention_and_rotary_match_the_interpreter(tmp_path: Path, dtype: str) -> None:
    text = PROGRAM.replace("{t}", dtype)
    module = parse_module(text, "t.rx")
    built = build(text, tmp_path, prefix=f"attn_{dtype}")
    code = built.sources.files[f"attn_{dtype}.c"]
    assert "scratch" in code  # the score row is planned scratch, not a Sq x Skv matrix
    args = random_inputs(module.get("main"), {}, 3)
    args[3][0, 0, 1, :] = -np.inf  # a row masked by the bias alone
    args[3][1, 0, 2, 1] = -np.inf
    for lens in (np.array([5, 2]), np.array([0, 3])):  # 0: every row of batch 0 masked
        args[4] = lens
        want = Interpreter(module).run("main", list(args))
        got = run_c(built, args)
        assert_close(got, want, f"{dtype} lens={list(lens)}")
        assert not np.isnan(got[2]).any()


SYMBOLIC = """
fn @main(%q: Tensor[(2, 4, n, 4), f32], %k: Tensor[(2, 2, m, 4), f32],
         %v: Tensor[(2, 2, m, 3), f32], %bias: Tensor[(1, 1, n, m), f32],
         %lens: Tensor[(2,), i64])
    -> Tuple[Tensor[(2, 4, n, 3), f32], Tensor[(2, 4, n, m), f32], Tensor[(2, 4, n, 3), f32]] {
  %y = attention(%q, %k, %v, %bias, scale=0.5, softcap=3.0, causal=true, offset=2)
  %pr = attention(%q, %k, %v, %bias, %lens, scale=0.5, causal=true, result="probs")
  %yl = attention(%q, %k, %v, %bias, %lens, scale=0.5, causal=true)
  return (%y, %pr, %yl)
}
"""


def test_attention_with_a_symbolic_key_length_recomputes_the_scores(tmp_path: Path) -> None:
    """A symbolic Skv cannot size a scratch row: the kernel recomputes each row's scores in
    the softmax's passes, and only the Dv output sums of a Y row are scratch."""
    module = parse_module(SYMBOLIC, "s.rx")
    built = build(SYMBOLIC, tmp_path, prefix="attn_sym")
    code = built.sources.files["attn_sym.c"]
    assert "double *out = " in code and "double *row" not in code
    for n, m in ((3, 5), (1, 1), (4, 2)):
        dims = {"n": n, "m": m}
        args = random_inputs(module.get("main"), dims, n + m)
        args[3][..., 0, 0] = -np.inf
        args[4] = np.array([m, 1])
        want = Interpreter(module).run("main", list(args), dims)
        assert_close(run_c(built, args, dims), want, f"n={n} m={m}")


STEPS = """
fn @main(%q: Tensor[(2, 4, 3, 8), f16], %k: Tensor[(2, 2, 6, 8), f16],
         %v: Tensor[(2, 2, 6, 3), f16], %bias: Tensor[(1, 4, 3, 6), f16],
         %lens: Tensor[(2,), i64], %q2: Tensor[(2, 4, 3, 8), f32], %k2: Tensor[(2, 2, 6, 8), f32],
         %v2: Tensor[(2, 2, 6, 3), f32])
    -> Tuple[Tensor[(2, 4, 3, 3), f16], Tensor[(2, 4, 3, 3), f16], Tensor[(2, 4, 3, 6), f16],
             Tensor[(2, 4, 3, 6), f16], Tensor[(2, 4, 3, 3), f16], Tensor[(2, 4, 3, 3), f32]] {
  %y = attention(%q, %k, %v, %bias, scale=0.35, softcap=4.0, rounding="f16")
  %yw = attention(%q, %k, %v, %bias, %lens, scale=0.5, causal=true, window_left=1,
                  rounding="f16", softmax_steps=false)
  %pr = attention(%q, %k, %v, %bias, scale=0.5, window_left=0, window_right=2, offset=1,
                  rounding="f16", result="probs")
  %qc = attention(%q, %k, %v, %bias, scale=0.5, softcap=2.0, rounding="f16", result="qk_bias")
  %y1 = attention(%q, %k, %v, scale=0.5, window_right=0, offset=3)
  %y2 = attention(%q2, %k2, %v2, scale=0.5, window_left=2, window_right=1, offset=2)
  return (%y, %yw, %pr, %qc, %y1, %y2)
}
"""


def test_attention_rounding_steps_and_windows_match_the_interpreter(tmp_path: Path) -> None:
    """float16 rounded at ONNX's steps and sliding windows: C agrees with the numpy kernel to
    one float16 ulp (C sums its dot products in double, numpy's float16 matmul in float32)."""
    module = parse_module(STEPS, "w.rx")
    built = build(STEPS, tmp_path, prefix="attn_steps")
    args = random_inputs(module.get("main"), {}, 5)
    args[0], args[1] = args[0] * 3, args[1] * 3
    for lens in (np.array([6, 3]), np.array([1, 0])):
        args[4] = lens
        want = Interpreter(module).run("main", list(args))
        got = run_c(built, args)
        for g, w in zip(got, want):
            g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
            ulp = np.spacing(np.abs(np.asarray(w))).astype(np.float64)
            assert np.all((np.abs(g64 - w64) <= ulp) | (g64 == w64)), f"lens={list(lens)}"


SYMBOLIC_STEPS = """
fn @main(%q: Tensor[(1, 2, n, 4), f16], %k: Tensor[(1, 2, m, 4), f16],
         %v: Tensor[(1, 2, m, 3), f16], %bias: Tensor[(1, 1, n, m), f16])
    -> Tuple[Tensor[(1, 2, n, 3), f16], Tensor[(1, 2, n, m), f16]] {
  %y = attention(%q, %k, %v, %bias, scale=0.5, softcap=3.0, window_left=1, offset=1,
                 rounding="f16")
  %pr = attention(%q, %k, %v, %bias, scale=0.5, causal=true, window_left=0, window_right=0,
                  rounding="f16", result="probs")
  return (%y, %pr)
}
"""


def test_attention_with_a_symbolic_key_length_rounds_and_windows(tmp_path: Path) -> None:
    """The recomputing kernel (symbolic Skv) rounds at the same steps and applies the window:
    within a float16 ulp of the numpy kernel."""
    module = parse_module(SYMBOLIC_STEPS, "ss.rx")
    built = build(SYMBOLIC_STEPS, tmp_path, prefix="attn_sym_steps")
    for n, m in ((3, 5), (2, 1)):
        dims = {"n": n, "m": m}
        args = random_inputs(module.get("main"), dims, n * m)
        want = Interpreter(module).run("main", list(args), dims)
        got = run_c(built, args, dims)
        for g, w in zip(got, want):
            ulp = np.spacing(np.abs(np.asarray(w))).astype(np.float64)
            diff = np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64))
            assert ((diff <= ulp) | (np.asarray(g) == np.asarray(w))).all(), f"n={n} m={m}"

"""Transformer kernels: attention (fused, one query row at a time) and rotary_embedding."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from relaxc.ir.types import TensorType, numpy_dtype

from .. import dtypes as T
from .base import Gen, broadcast_index, unsupported


def gen_attention(g: Gen) -> list[str]:
    """For each batch, query head and query row: the row's ``Skv`` scores (``scale * q . k``
    summed in double, softcapped, plus the bias and the causal and padding masks), their
    softmax, then each output feature as the probabilities' dot product with a column of v
    (or the scores themselves for a qk_matmul_output ``result``). A row with no allowed key
    is zeros, as in the numpy kernel. With a static ``Skv`` the row's scores sit in a scratch
    of ``Skv`` doubles; with a symbolic one the scores are recomputed in each of the
    softmax's passes (max, sum, output) and only the output row's ``Dv`` sums are scratch.
    Either way no ``Sq x Skv`` matrix is planned."""
    s = g.spec
    q, k, v = s.ins[0], s.ins[1], s.ins[2]
    out = s.outs[0]
    result = s.attr["result"]
    B, Hq, Sq, Dq = g.shape(q)
    Hkv, Skv = g.shape(k)[1], g.shape(k)[2]
    Dv = g.shape(v)[3]
    skv, dv = k.shape[2], v.shape[3]
    g.restrict = True
    full = TensorType((q.shape[0], q.shape[1], q.shape[2], k.shape[2]), q.dtype)
    decls = ["int64_t b, h, hk, i, j, t;", "double acc, sc, bv, mx, tot, z;", "int open;"]
    raw = result in ("qk", "qk_softcap")  # scores before the bias: no row, no v, no bias
    stored = isinstance(skv, int)
    if raw:
        decls += [f"(void)x{n};" for n in range(2, len(s.ins))]
    elif result == "qk_bias":
        pass  # one pass writing the scores: no working memory
    elif isinstance(skv, int):
        decls.append(g.scratch_array("double", "row", max(skv, 1)))
    elif result == "y":
        if not isinstance(dv, int):
            raise unsupported(s, "a symbolic key sequence length needs a static value head size")
        decls.append(g.scratch_array("double", "out", max(dv, 1)))
    if not raw and result != "y":
        decls.append("(void)x2;")
    srow = f"((b * {Hq} + h) * {Sq} + i) * {Skv}"

    steps = s.attr["rounding"] != "once"
    if steps and s.attr["rounding"] != "f16":
        raise unsupported(s, f"rounding {s.attr['rounding']} (C computes f16 and wider)")
    rnd = _rounder(g, q.dtype) if steps else (lambda e: e)
    rs = rnd if s.attr["softmax_steps"] else (lambda e: e)
    root = T.float_literal(_rounded(math.sqrt(float(s.attr["scale"])), q.dtype), "f64")

    def score() -> None:
        """``sc`` (and, past the raw results, ``bv`` and ``z = sc + bv``) for key j."""
        qrow, krow = f"((b * {Hq} + h) * {Sq} + i) * {Dq}", f"((b * {Hkv} + hk) * {Skv} + j)"
        g.emit("acc = 0;")
        with g.loop("t", Dq):
            qv = f"(double){g.load(q.dtype, f'x0[{qrow} + t]')}"
            kv = f"(double){g.load(k.dtype, f'x1[{krow} * {Dq} + t]')}"
            if steps:  # q and k each times sqrt(scale), rounded
                qv, kv = rnd(f"{qv} * {root}"), rnd(f"{kv} * {root}")
            g.emit(f"acc += {qv} * {kv};")
        if steps:
            g.emit(f"sc = {rnd('acc')};")
        else:
            g.emit(f"sc = acc * {T.float_literal(float(s.attr['scale']), 'f64')};")
        cap = float(s.attr["softcap"])
        if result != "qk" and cap > 0:
            c = T.float_literal(cap, "f64")
            quotient = rnd(f"sc / {c}")
            g.emit(f"sc = {rnd(c + ' * ' + rnd(f'tanh({quotient})'))};")
        if not raw:
            _bias(g, full)
            g.emit(f"z = {rnd('sc + bv')};")

    with g.loop("b", B):
        with g.loop("h", Hq):
            g.emit(f"hk = h / ({Hq} / {Hkv});")
            with g.loop("i", Sq):
                g.emit("open = 0;")
                if raw or result == "qk_bias":
                    with g.loop("j", Skv):
                        score()
                        g.emit(f"y0[{srow} + j] = {g.store(out.dtype, 'sc' if raw else 'z')};")
                elif stored:
                    with g.loop("j", Skv):
                        score()
                        g.emit("if (bv != -INFINITY) open = 1;")
                        g.emit("row[j] = z;")
                    _softmax_row(g, Skv, Sq, Hq, out.dtype, result, v, Dv, Hkv, (rnd, rs))
                else:
                    yrow = f"((b * {Hq} + h) * {Sq} + i) * {Dv}"
                    _recomputed_row(
                        g, score, (srow, yrow), out.dtype, result, v, (Dv, Hkv, Skv), (rnd, rs)
                    )
    g.emit("(void)open; (void)mx; (void)tot; (void)bv; (void)hk; (void)z;")
    return decls


def _rounded(x: float, dtype: str) -> float:
    """``x`` rounded to ``dtype`` (at generation time)."""
    return float(np.array(x).astype(numpy_dtype(dtype)))


def _rounder(g: Gen, dtype: str) -> Callable[[str], str]:
    """A C expression's value rounded to ``dtype`` (as a double): ``rounding="steps"``."""
    if dtype == "f16":
        return lambda e: f"(double){g.h.use('h2f')}({g.h.use('f2h')}((double)({e})))"
    if dtype == "f32":
        return lambda e: f"(double)(float)({e})"
    return lambda e: e


def _recomputed_row(
    g: Gen,
    score: Callable[[], None],
    rows: tuple[str, str],
    dtype: str,
    result: str,
    v: TensorType,
    dims: tuple[str, str, str],
    rounders: tuple[Callable[[str], str], Callable[[str], str]],
) -> None:
    """The softmax of one row whose scores are computed again in each pass (no row buffer):
    ``rows`` are the row's first index in the scores and in y, ``dims`` are (Dv, Hkv, Skv)."""
    srow, yrow = rows
    Dv, Hkv, Skv = dims
    rnd, rs = rounders
    e = rs(f"exp({rs('z - mx')})")
    g.emit("mx = -INFINITY;")
    with g.loop("j", Skv):  # numpy's max: a NaN wins
        score()
        g.emit("if (bv != -INFINITY) open = 1;")
        g.emit("if (z != z || mx != mx) mx = z != z ? z : mx; else if (z > mx) mx = z;")
    g.emit("if (mx == -INFINITY) mx = 0;")
    g.emit("tot = 0;")
    with g.loop("j", Skv):
        score()
        g.emit(f"tot += {e};")
    g.emit(f"tot = {rs('tot')};")
    g.emit("if (tot == 0) tot = 1;")
    if result == "probs":
        with g.loop("j", Skv):
            score()
            g.emit(f"y0[{srow} + j] = {g.store(dtype, f'open ? {e} / tot : 0.0')};")
        return
    with g.loop("t", Dv):
        g.emit("out[t] = 0;")
    with g.loop("j", Skv):
        score()
        g.emit(f"z = open ? {rnd(f'{e} / tot')} : 0.0;")
        vrow = f"((b * {Hkv} + hk) * {Skv} + j) * {Dv}"
        with g.loop("t", Dv):
            g.emit(f"out[t] += z * (double){g.load(v.dtype, f'x2[{vrow} + t]')};")
    with g.loop("t", Dv):
        g.emit(f"y0[{yrow} + t] = {g.store(dtype, 'out[t]')};")


def _bias(g: Gen, full: TensorType) -> None:
    """``bv``: the bias at (b, h, i, j), -INFINITY where the causal or padding rule forbids."""
    s = g.spec
    if len(s.ins) > 3:
        idx = broadcast_index(g, s.ins[3], full, ["b", "h", "i", "j"])
        g.emit(f"bv = (double){g.load(s.ins[3].dtype, f'x3[{idx}]')};")
    else:
        g.emit("bv = 0;")
    Sq = g.shape(s.ins[0])[2]
    rules = []
    if len(s.ins) > 4:
        rules.append("j >= x4[b]")
        p = f"(i + (x4[b] - {Sq}))"
    else:
        p = f"(i + {int(s.attr['offset'])})"
    if s.attr["causal"]:
        rules.append(f"j > {p}")
    if s.attr["window_left"] >= 0:
        rules.append(f"j < {p} - {int(s.attr['window_left'])}")
    if s.attr["window_right"] >= 0:
        rules.append(f"j > {p} + {int(s.attr['window_right'])}")
    if rules:
        g.emit(f"if ({' || '.join(rules)}) bv = -INFINITY;")


def _softmax_row(
    g: Gen,
    Skv: str,
    Sq: str,
    Hq: str,
    dtype: str,
    result: str,
    v: TensorType,
    Dv: str,
    Hkv: str,
    rounders: tuple[Callable[[str], str], Callable[[str], str]],
) -> None:
    srow = f"((b * {Hq} + h) * {Sq} + i) * {Skv}"
    g.emit("mx = -INFINITY;")
    with g.loop("j", Skv):  # numpy's max: a NaN wins
        g.emit(
            "if (row[j] != row[j] || mx != mx) mx = row[j] != row[j] ? row[j] : mx; "
            "else if (row[j] > mx) mx = row[j];"
        )
    g.emit("if (mx == -INFINITY) mx = 0;")
    rnd, rs = rounders
    g.emit("tot = 0;")
    with g.loop("j", Skv):
        diff = rs("row[j] - mx")
        g.emit(f"row[j] = {rs(f'exp({diff})')};")
        g.emit("tot += row[j];")
    g.emit(f"tot = {rs('tot')};")
    g.emit("if (tot == 0) tot = 1;")
    with g.loop("j", Skv):
        g.emit(f"row[j] = open ? {rnd('row[j] / tot')} : 0.0;")
    if result == "probs":
        with g.loop("j", Skv):
            g.emit(f"y0[{srow} + j] = {g.store(dtype, 'row[j]')};")
        return
    yrow = f"((b * {Hq} + h) * {Sq} + i) * {Dv}"
    vcol = f"((b * {Hkv} + hk) * {Skv} + j) * {Dv} + t"
    with g.loop("t", Dv):
        g.emit("acc = 0;")
        with g.loop("j", Skv):
            g.emit(f"acc += row[j] * (double){g.load(v.dtype, f'x2[{vcol}]')};")
        g.emit(f"y0[{yrow} + t] = {g.store(dtype, 'acc')};")


def gen_rotary_embedding(g: Gen) -> list[str]:
    """Each pair of rotated features read (both) before it is written, then the features
    past the rotary dim copied: safe over x (``OpDef.inplace``)."""
    s = g.spec
    x, cos = s.ins[0], s.ins[1]
    out = s.outs[0]
    B, A1, A2, D = g.shape(x)
    seq_axis = int(s.attr["seq_axis"])
    S, H = (A1, A2) if seq_axis == 1 else (A2, A1)
    half = cos.shape[2]
    assert isinstance(half, int)
    interleaved = bool(s.attr["interleaved"])
    cb = "0" if cos.shape[0] == 1 and x.shape[0] != 1 else "b"
    base = (
        f"((b * {S} + p) * {H} + hh) * {D}"
        if seq_axis == 1
        else f"((b * {H} + hh) * {S} + p) * {D}"
    )
    ld = lambda e: f"(double){g.load(x.dtype, e)}"  # noqa: E731
    with g.loop("b", B):
        with g.loop("p", S):
            with g.loop("hh", H):
                g.emit(f"at = {base};")
                with g.loop("f", str(half)):
                    g.emit(
                        f"cs = (double){g.load(cos.dtype, f'x1[({cb} * {S} + p) * {half} + f]')};"
                    )
                    g.emit(
                        f"sn = (double){g.load(cos.dtype, f'x2[({cb} * {S} + p) * {half} + f]')};"
                    )
                    ia, ib = (
                        ("at + 2 * f", "at + 2 * f + 1")
                        if interleaved
                        else ("at + f", f"at + f + {half}")
                    )
                    g.emit(f"a = {ld(f'x0[{ia}]')};")
                    g.emit(f"c = {ld(f'x0[{ib}]')};")
                    g.emit(f"y0[{ia}] = {g.store(out.dtype, 'a * cs - c * sn')};")
                    g.emit(f"y0[{ib}] = {g.store(out.dtype, 'a * sn + c * cs')};")
                with g.loop("f", D, start=str(2 * half)):
                    g.emit("y0[at + f] = x0[at + f];")
    return ["int64_t b, p, hh, f, at;", "double cs, sn, a, c;"]

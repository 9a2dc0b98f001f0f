"""Normalizations and softmax: batch_norm, layer_norm, rms_norm, softmax, log_softmax and lrn."""

from __future__ import annotations

from typing import Callable

from relaxc.ir.types import TensorType

from .. import dtypes as T

from .elementwise import blocked_loop, uses_block_var
from .base import (
    Gen,
    horner,
    outer_inner,
)


def gen_batch_norm(g: Gen) -> list[str]:
    """(x - mean) / sqrt(var + eps) * gamma + beta, as x * a + b in double with, per channel,
    a = gamma / sqrt(var + eps) and b = beta - mean * a (one multiply-add per element, which
    the compiler vectorizes, instead of a division; the double result, rounded once to the
    dtype, is the reference's but for its last double bits). The channel's parameters are read
    before any of its elements is written, and each block of elements before it is written:
    computing over x or over a parameter (``OpDef.inplace``) is safe."""
    x = g.spec.ins[0]
    out = g.spec.outs[0]
    axis = g.spec.attr["axis"] % len(x.shape)
    eps = T.float_literal(float(g.spec.attr["epsilon"]), "f64")
    outer, C, inner = outer_inner(g, x, axis)
    ld = lambda e: f"(double){g.load(x.dtype, e)}"  # noqa: E731
    ct = T.c_type(out.dtype)
    with g.loop("o", outer):
        with g.loop("c", C):
            g.emit(f"const double a = {ld('x1[c]')} / sqrt({ld('x4[c]')} + {eps});")
            g.emit(f"const double s = {ld('x2[c]')} - {ld('x3[c]')} * a;")
            g.emit(f"const int64_t at = (o * {C} + c) * {inner};")
            blocked_loop(
                g,
                "i",
                inner,
                lambda j: g.store(out.dtype, ld(f"x0[at + {j}]") + " * a + s"),
                lambda j: f"y0[at + {j}]",
                ct,
            )
    return ["int64_t o, c, i" + (", v;" if uses_block_var(inner) else ";")]


def _axes_split(g: Gen, t: TensorType, axes: list[int]) -> tuple[list[int], list[int]]:
    nd = len(t.shape)
    red = sorted({a % nd for a in axes})
    return [a for a in range(nd) if a not in red], red


def gen_norm(g: Gen) -> list[str]:
    """layer_norm and rms_norm over any set of axes."""
    x, out = g.spec.ins[0], g.spec.outs[0]
    op = g.spec.op
    nd = len(x.shape)
    axes = g.spec.attr["axes"]
    kept, red = _axes_split(g, x, list(axes) if axes is not None else list(range(nd)))
    eps = T.float_literal(float(g.spec.attr["epsilon"]), "f64")
    xs = g.shape(x)
    k_vars = [g.tmp("k") for _ in kept]
    r_vars = [g.tmp("r") for _ in red]
    red_ext = [xs[a] for a in red]
    count = g.prod(red_ext) if red_ext else "1"
    decls = []
    if k_vars:
        decls.append(f"int64_t {', '.join(k_vars)};")
    if r_vars:
        decls.append(f"int64_t {', '.join(r_vars)};")
    decls.append("double mean, var, d, scale;")

    def index() -> str:
        idx = [""] * nd
        for a, v in zip(kept, k_vars):
            idx[a] = v
        for a, v in zip(red, r_vars):
            idx[a] = v
        return horner(idx, xs)

    def over_reduced(body: Callable[[], None]) -> None:
        def rec(kk: int) -> None:
            if kk == len(red):
                body()
                return
            with g.loop(r_vars[kk], red_ext[kk]):
                rec(kk + 1)

        rec(0)

    def ld(e: str) -> str:
        return f"(double){g.load(x.dtype, e)}"

    param_index = horner(r_vars, red_ext) if r_vars else "0"

    def per_row() -> None:
        if op == "layer_norm":
            g.emit("mean = 0;")
            over_reduced(lambda: g.emit(f"mean += {ld(f'x0[{index()}]')};"))
            g.emit(f"mean /= (double)({count});")
            g.emit("var = 0;")

            def acc_var() -> None:
                g.emit(f"d = {ld(f'x0[{index()}]')} - mean;")
                g.emit("var += d * d;")

            over_reduced(acc_var)
            g.emit(f"var /= (double)({count});")
            g.emit(f"scale = sqrt(var + {eps});")

            def write_ln() -> None:
                i = index()
                xv, gv, bv = ld(f"x0[{i}]"), ld(f"x1[{param_index}]"), ld(f"x2[{param_index}]")
                g.emit(f"y0[{i}] = {g.store(out.dtype, f'({xv} - mean) / scale * {gv} + {bv}')};")

            over_reduced(write_ln)
        else:
            g.emit("var = 0;")

            def acc_sq() -> None:
                g.emit(f"d = {ld(f'x0[{index()}]')};")
                g.emit("var += d * d;")

            over_reduced(acc_sq)
            g.emit(f"var /= (double)({count});")
            g.emit(f"scale = sqrt(var + {eps});")

            def write_rms() -> None:
                i = index()
                xv, wv = ld(f"x0[{i}]"), ld(f"x1[{param_index}]")
                g.emit(f"y0[{i}] = {g.store(out.dtype, f'{xv} / scale * {wv}')};")

            over_reduced(write_rms)

    def rec_kept(kk: int) -> None:
        if kk == len(kept):
            per_row()
            return
        with g.loop(k_vars[kk], xs[kept[kk]]):
            rec_kept(kk + 1)

    rec_kept(0)
    if op == "rms_norm":
        g.emit("(void)mean;")
    return decls


def gen_softmax(g: Gen) -> list[str]:
    """softmax (exp(x - max) / sum) or log_softmax (x - max - log(sum)) along the axis, in
    double: a pass for the max (NaN wins), one for the sum of exp(x - max), one for the output
    (which may overwrite x: each position is read before it is written)."""
    log = g.spec.op == "log_softmax"
    x, out = g.spec.ins[0], g.spec.outs[0]
    axis = g.spec.attr["axis"] % len(x.shape)
    outer, L, inner = outer_inner(g, x, axis)
    ld = lambda e: f"(double){g.load(x.dtype, e)}"  # noqa: E731
    at = f"(o * {L} + j) * {inner} + i"
    with g.loop("o", outer):
        with g.loop("i", inner):
            g.emit("mx = -INFINITY;")
            with g.loop("j", L):
                g.emit(f"v = {ld(f'x0[{at}]')};")
                g.emit("if (v != v || mx != mx) mx = v != v ? v : mx; else if (v > mx) mx = v;")
            g.emit("sum = 0;")
            with g.loop("j", L):
                g.emit(f"sum += exp({ld(f'x0[{at}]')} - mx);")
            if log:
                g.emit("sum = log(sum);")
            with g.loop("j", L):
                xv = ld(f"x0[{at}]")
                y = f"{xv} - mx - sum" if log else f"exp({xv} - mx) / sum"
                g.emit(f"y0[{at}] = {g.store(out.dtype, y)};")
    return ["int64_t o, i, j;", "double mx, sum, v;"]


def _pow_beta(base: str, beta: float) -> str:
    """``base ** beta`` in double: through square roots for the common exponents (exact
    to the last double bits of pow), pow otherwise."""
    if beta == 1.0:
        return f"({base})"
    if beta == 0.5:
        return f"sqrt({base})"
    if beta == 0.75:
        return f"(sqrt({base}) * sqrt(sqrt({base})))"
    return f"pow({base}, {T.float_literal(beta, 'f64')})"


def gen_lrn(g: Gen) -> list[str]:
    """x / (bias + alpha / size * (sum of x ** 2 over the size channels around)) ** beta, in
    double, the window clipped at the ends of the axis; the positions after the axis are the
    innermost loop (contiguous), the channel window summed in order."""
    x, out = g.spec.ins[0], g.spec.outs[0]
    a = g.spec.attr
    size = a["size"]
    axis = a["axis"] % len(x.shape)
    before = (size - 1) // 2
    after = size - 1 - before
    bias = T.float_literal(float(a["bias"]), "f64")
    coef = T.float_literal(float(a["alpha"]) / size, "f64")
    outer, L, inner = outer_inner(g, x, axis)
    ld = lambda e: f"(double){g.load(x.dtype, e)}"  # noqa: E731
    with g.loop("o", outer):
        with g.loop("c", L):
            g.emit(f"const int64_t qlo = c - {before} < 0 ? 0 : c - {before};")
            g.emit(f"const int64_t qhi = c + {after} + 1 > {L} ? {L} : c + {after} + 1;")
            with g.loop("i", inner):
                g.emit("double sq = 0, v;")
                with g.loop("q", "qhi", "qlo"):
                    g.emit(f"v = {ld(f'x0[(o * {L} + q) * {inner} + i]')};")
                    g.emit("sq += v * v;")
                at = f"(o * {L} + c) * {inner} + i"
                xv = ld(f"x0[{at}]")
                d = _pow_beta(f"{bias} + {coef} * sq", float(a["beta"]))
                g.emit(f"y0[{at}] = {g.store(out.dtype, f'{xv} / {d}')};")
    return ["int64_t o, c, i, q;"]

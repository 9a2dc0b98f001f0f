"""Linear algebra: matmul, dense and conv2d: f32 through the blocked kernels of
:mod:`.blocked` (and :mod:`.winograd`), every other dtype through these plain loops."""

from __future__ import annotations


from .blocked import gen_conv2d_gemm, gen_dense_f32, gen_depthwise_f32, gen_matmul_f32, is_f32
from .base import (
    Gen,
    check_numeric,
    finish,
    loop_nest,
    matmul_batch_offsets,
    pad4,
    pair,
    widen,
)
from .microtile import static_dim
from .winograd import gen_winograd_f32, plan


def gen_conv2d_f32(g: Gen) -> list[str]:
    """conv2d on f32: depthwise ones as direct loops over output rows
    (:func:`.blocked.gen_depthwise_f32`), the 3x3 stride-1 ones that pay for it through
    Winograd (:mod:`.winograd`), the others as a blocked GEMM per image and group
    (:func:`.blocked.gen_conv2d_gemm`: chunks of ``kc`` rows of im2col(x) (``k0``); blocks of
    output channels whose weights stay in cache (``oc0``, when they do not all); blocks of 16
    output positions (``p0``: the panel of im2col rows, or pointers into x for a 1x1 with unit
    strides and no padding); micro-tiles of 6 output channels (``oc``))."""
    w = g.spec.ins[1]
    groups = g.spec.attr["groups"]
    if groups > 1 and static_dim(w.shape[0]) == groups and static_dim(w.shape[1]) == 1:
        return gen_depthwise_f32(g)
    wino = plan(g.spec)
    if wino is not None:
        return gen_winograd_f32(g, wino)
    return gen_conv2d_gemm(g)


TILE = 8
"""Output columns matmul and dense compute together (independent accumulators; each output
still sums over k in order, so the numbers do not change)."""


def gen_matmul(g: Gen) -> list[str]:
    if is_f32(g):
        return gen_matmul_f32(g)
    a, b = g.spec.ins
    out = g.spec.outs[0]
    k = check_numeric(g)
    os_, as_, _bs = g.shape(out), g.shape(a), g.shape(b)
    batch = os_[:-2]
    M, N, K = os_[-2], os_[-1], as_[-1]
    acc = "double" if k == "float" else "uint64_t"
    decls = ["int64_t m, n0, t, kk;", f"{acc} acc[{TILE}];"]

    def body(bv: list[str]) -> None:
        a_off, b_off, o_off = matmul_batch_offsets(g, a, b, out, bv)
        with g.loop("m", M):
            with g.block(f"for (n0 = 0; n0 < {N}; n0 += {TILE})"):
                g.emit(f"int64_t nt = {N} - n0 < {TILE} ? {N} - n0 : {TILE};")
                with g.loop("t", "nt"):
                    g.emit("acc[t] = 0;")
                with g.loop("kk", K):
                    av = g.load(a.dtype, f"x0[(({a_off}) * {M} + m) * {K} + kk]")
                    g.emit(f"{acc} av = {widen(k, av)};")
                    with g.loop("t", "nt"):
                        bvv = g.load(b.dtype, f"x1[(({b_off}) * {K} + kk) * {N} + n0 + t]")
                        g.emit(f"acc[t] += av * {widen(k, bvv)};")
                with g.loop("t", "nt"):
                    g.emit(
                        f"y0[(({o_off}) * {M} + m) * {N} + n0 + t] = "
                        f"{finish(g, out.dtype, 'acc[t]')};"
                    )

    vars_ = loop_nest(g, batch, body, "b")
    if vars_:
        decls.append(f"int64_t {', '.join(vars_)};")
    return decls


def gen_dense(g: Gen) -> list[str]:
    if is_f32(g):
        return gen_dense_f32(g)
    x, w = g.spec.ins[0], g.spec.ins[1]
    out = g.spec.outs[0]
    k = check_numeric(g)
    xs, ws = g.shape(x), g.shape(w)
    rows = g.prod(xs[:-1]) if len(xs) > 1 else "1"
    N, K = ws[0], ws[1]
    acc = "double" if k == "float" else "uint64_t"
    with g.loop("r", rows):
        with g.block(f"for (n0 = 0; n0 < {N}; n0 += {TILE})"):
            g.emit(f"int64_t nt = {N} - n0 < {TILE} ? {N} - n0 : {TILE};")
            with g.loop("t", "nt"):
                g.emit("acc[t] = 0;")
            with g.loop("kk", K):
                g.emit(f"{acc} xv = {widen(k, g.load(x.dtype, f'x0[r * {K} + kk]'))};")
                with g.loop("t", "nt"):
                    g.emit(
                        f"acc[t] += xv * {widen(k, g.load(w.dtype, f'x1[(n0 + t) * {K} + kk]'))};"
                    )
            with g.loop("t", "nt"):
                if len(g.spec.ins) == 3:
                    g.emit(f"acc[t] += {widen(k, g.load(w.dtype, 'x2[n0 + t]'))};")
                g.emit(f"y0[r * {N} + n0 + t] = {finish(g, out.dtype, 'acc[t]')};")
    return ["int64_t r, n0, t, kk;", f"{acc} acc[{TILE}];"]


CONV_TILE = 16
"""Output columns a conv2d computes together: independent accumulators, one row of input."""


def gen_conv2d(g: Gen) -> list[str]:
    """Direct convolution. Each output element sums over (channel, kernel row, kernel column)
    in that order, in a ``double`` (or wrapping 64-bit) accumulator, then adds the bias, as
    before; CONV_TILE neighbouring columns are summed side by side for speed."""
    if is_f32(g):
        return gen_conv2d_f32(g)
    x, w = g.spec.ins[0], g.spec.ins[1]
    out = g.spec.outs[0]
    k = check_numeric(g)
    a = g.spec.attr
    sh, sw = pair(a["strides"])
    pt, pl, _, _ = pad4(a["padding"])
    dh, dw = pair(a["dilation"])
    groups = a["groups"]
    N, C, H, W = g.shape(x)
    OC, CG, KH, KW = g.shape(w)
    OH, OW = g.shape(out)[2], g.shape(out)[3]
    og = f"({OC} / {groups})" if groups != 1 else OC
    acc = "double" if k == "float" else "uint64_t"
    with g.loop("b", N):
        with g.loop("oc", OC):
            g.emit(f"int64_t grp = oc / {og};" if groups != 1 else "int64_t grp = 0;")
            with g.loop("oh", OH):
                with g.block(f"for (ow0 = 0; ow0 < {OW}; ow0 += {CONV_TILE})"):
                    g.emit(f"int64_t nt = {OW} - ow0 < {CONV_TILE} ? {OW} - ow0 : {CONV_TILE};")
                    with g.loop("t", "nt"):
                        g.emit("acc[t] = 0;")
                    with g.loop("c", CG):
                        g.emit(f"int64_t ic = grp * {CG} + c;")
                        with g.loop("i", KH):
                            g.emit(f"int64_t ih = oh * {sh} - {pt} + i * {dh};")
                            g.emit(f"if (ih < 0 || ih >= {H}) continue;")
                            with g.loop("j", KW):
                                wv = g.load(w.dtype, f"x1[((oc * {CG} + c) * {KH} + i) * {KW} + j]")
                                g.emit(f"{acc} wv = {widen(k, wv)};")
                                with g.loop("t", "nt"):
                                    g.emit(f"int64_t iw = (ow0 + t) * {sw} - {pl} + j * {dw};")
                                    xv = g.load(
                                        x.dtype, f"x0[((b * {C} + ic) * {H} + ih) * {W} + iw]"
                                    )
                                    with g.block(f"if (iw >= 0 && iw < {W})"):
                                        g.emit(f"acc[t] += {widen(k, xv)} * wv;")
                    with g.loop("t", "nt"):
                        if len(g.spec.ins) == 3:
                            g.emit(f"acc[t] += {widen(k, g.load(w.dtype, 'x2[oc]'))};")
                        g.emit(
                            f"y0[((b * {OC} + oc) * {OH} + oh) * {OW} + ow0 + t] = "
                            f"{finish(g, out.dtype, 'acc[t]')};"
                        )
    return ["int64_t b, oc, oh, ow0, t, c, i, j;", f"{acc} acc[{CONV_TILE}];"]

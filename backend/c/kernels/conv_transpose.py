"""conv2d_transpose as a gather: each output element sums, over its group's input channels and
the kernel taps that reach it (``oh + pad_top - i * DH`` a multiple of SH inside the input,
likewise for columns), ``x * w`` in a ``double`` (or wrapping 64-bit) accumulator, as the
direct conv2d does, then adds the bias and rounds once. No scratch, no allocation."""

from __future__ import annotations

from .base import Gen, check_numeric, finish, pad4, pair, widen


def gen_conv2d_transpose(g: Gen) -> list[str]:
    x, w = g.spec.ins[0], g.spec.ins[1]
    out = g.spec.outs[0]
    k = check_numeric(g)
    a = g.spec.attr
    sh, sw = pair(a["strides"])
    pt, pl, _, _ = pad4(a["padding"])
    dh, dw = pair(a["dilation"])
    groups = a["groups"]
    N, C, H, W = g.shape(x)
    _, OG, KH, KW = g.shape(w)
    OC, OH, OW = g.shape(out)[1], g.shape(out)[2], g.shape(out)[3]
    cg = f"({C} / {groups})" if groups != 1 else C
    acc = "double" if k == "float" else "uint64_t"
    g.restrict = True
    with g.loop("b", N):
        with g.loop("oc", OC):
            g.emit(f"int64_t grp = oc / {OG};" if groups != 1 else "int64_t grp = 0;")
            g.emit(f"int64_t og = oc - grp * {OG};" if groups != 1 else "int64_t og = oc;")
            with g.loop("oh", OH):
                with g.loop("ow", OW):
                    g.emit("acc = 0;")
                    with g.loop("c", cg):
                        g.emit(f"int64_t ic = grp * {cg} + c;")
                        with g.loop("i", KH):
                            g.emit(f"int64_t th = oh + {pt} - i * {dh};")
                            cond = "th < 0" if sh == 1 else f"th < 0 || th % {sh} != 0"
                            g.emit(f"if ({cond}) continue;")
                            ih = "th" if sh == 1 else f"th / {sh}"
                            g.emit(f"int64_t ih = {ih};")
                            g.emit(f"if (ih >= {H}) continue;")
                            with g.loop("j", KW):
                                g.emit(f"int64_t tw = ow + {pl} - j * {dw};")
                                cond = "tw < 0" if sw == 1 else f"tw < 0 || tw % {sw} != 0"
                                g.emit(f"if ({cond}) continue;")
                                iw = "tw" if sw == 1 else f"tw / {sw}"
                                g.emit(f"int64_t iw = {iw};")
                                g.emit(f"if (iw >= {W}) continue;")
                                xv = g.load(x.dtype, f"x0[((b * {C} + ic) * {H} + ih) * {W} + iw]")
                                wv = g.load(
                                    w.dtype, f"x1[((ic * {OG} + og) * {KH} + i) * {KW} + j]"
                                )
                                g.emit(f"acc += {widen(k, xv)} * {widen(k, wv)};")
                    if len(g.spec.ins) == 3:
                        g.emit(f"acc += {widen(k, g.load(w.dtype, 'x2[oc]'))};")
                    g.emit(
                        f"y0[((b * {OC} + oc) * {OH} + oh) * {OW} + ow] = "
                        f"{finish(g, out.dtype, 'acc')};"
                    )
    return ["int64_t b, oc, oh, ow, c, i, j;", f"{acc} acc;"]

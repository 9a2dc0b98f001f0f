"""Pooling: max_pool2d, avg_pool2d and global_avg_pool2d."""

from __future__ import annotations

import numpy as np

from .. import dtypes as T

from .base import (
    Gen,
    fmax_of,
    pad4,
    pair,
    unsupported,
)


def gen_pool(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    a = g.spec.attr
    op = g.spec.op
    kh, kw = pair(a["pool_size"])
    sh, sw = pair(a["strides"])
    pt, pl, pb, pr = pad4(a["padding"])
    dh, dw = pair(a["dilation"])
    N, C, H, W = g.shape(x)
    OH, OW = g.shape(out)[2], g.shape(out)[3]
    k = T.kind(x.dtype)
    if k == "bool":
        raise unsupported(g.spec, loc=g.loc)
    decls = ["int64_t nc, oh, ow, i, j;"]
    if op == "max_pool2d":
        if k == "float":
            init = "-INFINITY"
            decls.append("double acc;")
        else:
            info = np.iinfo(np.dtype(T.DTYPES[x.dtype].numpy))
            init = T.element_literal(int(info.min), x.dtype)
            decls.append(f"{T.c_type(x.dtype)} acc;")
    else:
        decls += ["double acc, cnt;"]
        init = "0"
    with g.loop("nc", g.prod([N, C])):
        with g.loop("oh", OH):
            with g.loop("ow", OW):
                g.emit(f"acc = {init};")
                if op == "avg_pool2d":
                    g.emit("cnt = 0;")
                with g.loop("i", str(kh)):
                    g.emit(f"int64_t ih = oh * {sh} - {pt} + i * {dh};")
                    with g.loop("j", str(kw)):
                        g.emit(f"int64_t iw = ow * {sw} - {pl} + j * {dw};")
                        inside = f"ih >= 0 && ih < {H} && iw >= 0 && iw < {W}"
                        val = g.load(x.dtype, f"x0[(nc * {H} + ih) * {W} + iw]")
                        if op == "max_pool2d":
                            with g.block(f"if ({inside})"):
                                if k == "float":
                                    fmax = g.h.use(fmax_of(x.dtype))
                                    g.emit(f"acc = {fmax}(acc, (double){val});")
                                else:
                                    g.emit(f"if ({val} > acc) acc = {val};")
                        else:
                            with g.block(f"if ({inside})"):
                                g.emit(f"acc += (double){val};")
                            if a["count_include_pad"]:
                                g.emit(f"if (ih < {H} + {pb} && iw < {W} + {pr}) cnt += 1.0;")
                            else:
                                g.emit(f"if ({inside}) cnt += 1.0;")
                oi = f"(nc * {OH} + oh) * {OW} + ow"
                if op == "max_pool2d":
                    g.emit(f"y0[{oi}] = {g.store(out.dtype, 'acc') if k == 'float' else 'acc'};")
                else:
                    g.emit(f"y0[{oi}] = {g.store(out.dtype, 'cnt > 0 ? acc / cnt : 0.0')};")
    return decls


def gen_global_avg_pool2d(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    N, C, H, W = g.shape(x)
    hw = g.prod([H, W])
    with g.loop("nc", g.prod([N, C])):
        g.emit("acc = 0;")
        with g.loop("i", hw):
            g.emit(f"acc += (double){g.load(x.dtype, f'x0[nc * {hw} + i]')};")
        g.emit(f"y0[nc] = {g.store(out.dtype, f'acc / (double)({hw})')};")
    return ["int64_t nc, i;", "double acc;"]

"""Pooling: max_pool2d, avg_pool2d and global_avg_pool2d."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import dtypes as T

from .elementwise import blocked_loop, uses_block_var
from .base import (
    Gen,
    fmax_of,
    pad4,
    pair,
    unsupported,
)


class Window(NamedTuple):
    """A pooling window and its tensors' extents: the attributes as integers (pool size,
    strides, padding top, left, bottom, right, dilation) and the dims as C text."""

    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pl: int
    pb: int
    pr: int
    dh: int
    dw: int
    N: str
    C: str
    H: str
    W: str
    OH: str
    OW: str


def _window(g: Gen) -> Window:
    """The :class:`Window` of the pooling kernel ``g`` builds."""
    a = g.spec.attr
    x, out = g.spec.ins[0], g.spec.outs[0]
    N, C, H, W = g.shape(x)
    return Window(
        *pair(a["pool_size"]),
        *pair(a["strides"]),
        *pad4(a["padding"]),
        *pair(a["dilation"]),
        N,
        C,
        H,
        W,
        g.shape(out)[2],
        g.shape(out)[3],
    )


def _valid_range(
    g: Gen, lo: str, hi: str, pos: str, stride: int, pad: int, dil: int, k: int, extent: str
) -> None:
    """``lo``, ``hi``: the kernel taps t in [0, k) whose input index pos * stride - pad +
    t * dil lies in [0, extent)."""
    g.emit(f"const int64_t {lo}_at = {pos} * {stride} - {pad};")
    g.emit(f"int64_t {lo} = {lo}_at >= 0 ? 0 : ({dil} - 1 - {lo}_at) / {dil};")
    g.emit(f"int64_t {hi} = {lo}_at < {extent} ? ({extent} - {lo}_at + {dil} - 1) / {dil} : 0;")
    g.emit(f"if ({hi} > {k}) {hi} = {k};")
    g.emit(f"if ({lo} > {hi}) {lo} = {hi};")


ROW_MAX = 1024
"""The widest input row max_pool2d buffers in its scratch (floats) for its separable scheme."""


def gen_max_pool_f32(g: Gen) -> list[str]:
    """max_pool2d on f32. With a static input width (at most ROW_MAX): per output row, the
    maximum over the kernel rows of each input column into a row buffer in the scratch (16-wide
    blocks the compiler vectorizes), then, per output, the maximum over the kernel columns of
    that buffer (the outputs whose taps all lie inside it unrolled, without bounds:
    :func:`_inner_column_max`); otherwise per output over its taps. The maximum is taken as
    ``m > v ? m : v`` (one instruction, no branch; a tie of -0 and +0 gives the later element
    as the generic kernel) and a NaN anywhere in the window makes the output NaN. Windows with
    no tap inside the input are -inf. (Taps are visited by columns, then rows: a window
    holding both -0 and +0 as its maximum may give the other zero than the generic kernel.)"""
    g.restrict = True
    kh, kw, sh, sw, pt, pl, _, _, dh, dw, N, C, H, W, OH, OW = _window(g)
    separable = W.isdigit() and 0 < int(W) <= ROW_MAX and kh > 1
    decls = ["int64_t nc, oh, ow, i, j;"]
    with g.loop("nc", g.prod([N, C])):
        g.emit(f"const float *xc = x0 + nc * {g.prod([H, W])};")
        with g.loop("oh", OH):
            g.emit(f"float *restrict yr = y0 + (nc * {OH} + oh) * {OW};")
            _valid_range(g, "ilo", "ihi", "oh", sh, pt, dh, kh, H)
            if separable:
                with g.block("if (ilo == ihi)"):
                    with g.loop("ow", OW):
                        g.emit("yr[ow] = -INFINITY;")
                    g.emit("continue;")
                g.emit(f"const float *x1r = xc + (oh * {sh} - {pt} + ilo * {dh}) * {W};")
                with g.loop("j", W):
                    g.emit("rb[j] = x1r[j];")
                with g.loop("i", "ihi", "ilo + 1"):
                    g.emit(f"const float *xr = xc + (oh * {sh} - {pt} + i * {dh}) * {W};")
                    blocked_loop(
                        g,
                        "j",
                        W,
                        lambda j: f"(rb[{j}] > xr[{j}]) | (rb[{j}] != rb[{j}]) ? rb[{j}] : xr[{j}]",
                        lambda j: f"rb[{j}]",
                        "float",
                    )
                inner = _inner_columns(int(W), OW, kw, sw, pl, dw)
                if inner is None:
                    _bounded_column_max(g, "0", OW, kw, sw, pl, dw, W)
                else:
                    _bounded_column_max(g, "0", inner[0], kw, sw, pl, dw, W)
                    _inner_column_max(g, inner, kw, sw, pl, dw)
                    _bounded_column_max(g, inner[1], OW, kw, sw, pl, dw, W)
                decls.append(g.scratch_array("float", "rb", int(W)))
                decls += ["int64_t v;"] if uses_block_var(W) else []
            else:
                with g.loop("ow", OW):
                    _valid_range(g, "jlo", "jhi", "ow", sw, pl, dw, kw, W)
                    g.emit("float m = -INFINITY;")
                    g.emit("int bad = 0;")
                    with g.loop("i", "ihi", "ilo"):
                        g.emit(f"const float *xr = xc + (oh * {sh} - {pt} + i * {dh}) * {W};")
                        with g.loop("j", "jhi", "jlo"):
                            g.emit(f"const float e = xr[ow * {sw} - {pl} + j * {dw}];")
                            g.emit("m = m > e ? m : e;")
                            g.emit("bad |= e != e;")
                    g.emit("yr[ow] = bad ? NAN : m;")
    return decls


def _inner_columns(w: int, ow: str, kw: int, sw: int, pl: int, dw: int) -> tuple[str, str] | None:
    """The outputs [lo, hi) of a row whose kw taps all lie inside the input's ``w`` columns
    (static numbers as C text), or None when the output width is symbolic or none do."""
    if not ow.isdigit():
        return None
    lo = -(-pl // sw)
    hi = min(int(ow), (w - 1 - (kw - 1) * dw + pl) // sw + 1)
    return (str(lo), str(hi)) if lo < hi else None


def _bounded_column_max(
    g: Gen, lo: str, hi: str, kw: int, sw: int, pl: int, dw: int, w: str
) -> None:
    """The maximum over the kernel columns of the row buffer for outputs [lo, hi) of a row,
    each over its taps inside the ``w`` columns (nothing when the range is empty)."""
    if lo == hi:
        return
    with g.loop("ow", hi, lo):
        _valid_range(g, "jlo", "jhi", "ow", sw, pl, dw, kw, w)
        g.emit("float m = -INFINITY;")
        g.emit("int bad = 0;")
        with g.loop("j", "jhi", "jlo"):
            g.emit(f"const float e = rb[ow * {sw} - {pl} + j * {dw}];")
            g.emit("m = m > e ? m : e;")
            g.emit("bad |= e != e;")
        g.emit("yr[ow] = bad ? NAN : m;")


def _inner_column_max(g: Gen, inner: tuple[str, str], kw: int, sw: int, pl: int, dw: int) -> None:
    """The maximum over the kernel columns of the row buffer for the outputs whose taps all
    lie inside it: the taps unrolled, no bounds (a loop of known trip count the compiler
    vectorizes), a NaN among them making the output NaN as in the bounded loop."""
    with g.loop("ow", inner[1], inner[0]):
        g.emit(f"const float *restrict e = rb + (ow * {sw} - {pl});")
        g.emit("float m = e[0];")
        g.emit("int bad = e[0] != e[0];")
        for j in range(1, kw):
            g.emit(f"m = m > e[{j * dw}] ? m : e[{j * dw}];")
            g.emit(f"bad |= e[{j * dw}] != e[{j * dw}];")
        g.emit("yr[ow] = bad ? NAN : m;")


def _taps_below(
    g: Gen, name: str, pos: str, stride: int, pad: int, dil: int, k: int, limit: str
) -> None:
    """``name``: the kernel taps t in [0, k) whose index pos * stride - pad + t * dil is
    below ``limit``."""
    g.emit(f"const int64_t {name}_at = {pos} * {stride} - {pad};")
    g.emit(f"int64_t {name} = {name}_at < {limit} ? ({limit} - {name}_at + {dil} - 1) / {dil} : 0;")
    g.emit(f"if ({name} > {k}) {name} = {k};")


def gen_avg_pool_f32(g: Gen) -> list[str]:
    """avg_pool2d on f32: per output, the sum over the taps inside the input in double (kernel
    rows, then columns, as the generic kernel), divided by the count of taps (with
    count_include_pad, every tap of the window short of the ceil mode's extra cells), with no
    per-tap bounds check."""
    g.restrict = True
    kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, N, C, H, W, OH, OW = _window(g)
    include = g.spec.attr["count_include_pad"]
    with g.loop("nc", g.prod([N, C])):
        g.emit(f"const float *xc = x0 + nc * {g.prod([H, W])};")
        with g.loop("oh", OH):
            _valid_range(g, "ilo", "ihi", "oh", sh, pt, dh, kh, H)
            if include:
                _taps_below(g, "ci", "oh", sh, pt, dh, kh, f"{H} + {pb}")
            with g.loop("ow", OW):
                _valid_range(g, "jlo", "jhi", "ow", sw, pl, dw, kw, W)
                if include:
                    _taps_below(g, "cj", "ow", sw, pl, dw, kw, f"{W} + {pr}")
                g.emit("double acc = 0, cnt;")
                with g.loop("i", "ihi", "ilo"):
                    g.emit(f"const float *xr = xc + (oh * {sh} - {pt} + i * {dh}) * {W};")
                    with g.loop("j", "jhi", "jlo"):
                        g.emit(f"acc += (double)xr[ow * {sw} - {pl} + j * {dw}];")
                if include:
                    g.emit("cnt = (double)(ci * cj);")
                else:
                    g.emit("cnt = (double)((ihi - ilo) * (jhi - jlo));")
                oi = f"(nc * {OH} + oh) * {OW} + ow"
                g.emit(f"y0[{oi}] = (float)(cnt > 0 ? acc / cnt : 0.0);")
    return ["int64_t nc, oh, ow, i, j;"]


def gen_pool(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    a = g.spec.attr
    op = g.spec.op
    if x.dtype == "f32" and op == "max_pool2d":
        return gen_max_pool_f32(g)
    if x.dtype == "f32" and op == "avg_pool2d":
        return gen_avg_pool_f32(g)
    kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, N, C, H, W, OH, OW = _window(g)
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

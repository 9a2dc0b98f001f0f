"""Padding, tiling and indexing: pad, tile, gather_elements, gather_nd, scatter_nd,
scatter_elements, one_hot and trilu.

Run-time indices are read as ``int64_t``, wrapped once when negative and clipped into their
axis (the numpy kernels' :func:`relaxc.ir.ops.movement.clip_indices`). The scatter kernels
may run over their data input (``inplace``): they copy data to the output only when the two
differ, then apply the updates in order.
"""

from __future__ import annotations

import numpy as np

from relaxc.ir import dims as D

from .. import dtypes as T
from .base import Gen, fmax_of, horner, loop_nest


def _literal(dtype: str, value: float) -> str:
    dt = np.dtype(T.DTYPES[dtype].numpy)
    v = np.array(value).astype(dt) if dt.kind != "b" else np.array(bool(value))
    return T.element_literal(v[()], dtype)


def _clipped(g: Gen, var: str, src: str, length: str) -> None:
    """``var`` = the index ``src`` into an axis of ``length``: negatives wrap, then clip."""
    g.emit(f"{var} = (int64_t){src};")
    g.emit(f"if ({var} < 0) {var} += {length};")
    g.emit(f"if ({var} < 0) {var} = 0;")
    g.emit(f"if ({var} > {length} - 1) {var} = {length} - 1;")


def _empty_guard(g: Gen, length: str, out_count: str) -> None:
    """A symbolic axis that is empty in this run: nothing to read; the result is zeros."""
    if length.isdigit():
        return
    zero = _literal(g.spec.outs[0].dtype, 0)
    with g.block(f"if ({length} <= 0)"):
        g.emit("int64_t zi;")
        with g.loop("zi", out_count):
            g.emit(f"y0[zi] = {zero};")
        g.emit("return;")


# -- pad / tile ------------------------------------------------------------------------------


def gen_pad(g: Gen) -> list[str]:
    g.restrict = True
    x, out = g.spec.ins[0], g.spec.outs[0]
    a = g.spec.attr
    n = len(x.shape)
    pads, mode = a["pads"], a["mode"]
    xs = g.shape(x)
    fill = _literal(out.dtype, a["value"])
    kept = [g.dim(D.add(x.shape[i], min(pads[i], 0) + min(pads[n + i], 0))) for i in range(n)]
    decls: list[str] = []
    if mode != "constant":
        for i in range(n):
            if pads[i] > 0 or pads[n + i] > 0:
                _empty_guard(g, kept[i], g.numel(out))
    svars = [g.tmp("s") for _ in range(n)]
    if svars:
        decls.append(f"int64_t {', '.join(svars)};")
    decls.append("int ok;")

    def body(vs: list[str]) -> None:
        g.emit("ok = 1;")
        for i, (v, s) in enumerate(zip(vs, svars)):
            grow, crop = max(pads[i], 0), -min(pads[i], 0)
            length = kept[i]
            g.emit(f"{s} = {v} - {grow};" if grow else f"{s} = {v};")
            if pads[i] > 0 or pads[n + i] > 0:
                if mode == "constant":
                    g.emit(f"if ({s} < 0 || {s} >= {length}) ok = 0;")
                elif mode == "edge":
                    g.emit(f"if ({s} < 0) {s} = 0;")
                    g.emit(f"if ({s} > {length} - 1) {s} = {length} - 1;")
                elif mode == "wrap":
                    g.emit(f"{s} = (({s} % {length}) + {length}) % {length};")
                else:  # reflect: the mirror image repeats with period 2 (L - 1)
                    _reflect_index(g, s, str(length))
            if crop:
                g.emit(f"{s} += {crop};")
        src = horner(svars, xs)
        g.emit(f"y0[{horner(vs, g.shape(out))}] = ok ? x0[{src}] : {fill};")

    vars_ = loop_nest(g, g.shape(out), body)
    if vars_:
        decls.append(f"int64_t {', '.join(vars_)};")
    return decls


def _reflect_index(g: Gen, s: str, length: str) -> None:
    """``s`` reflected into an axis of ``length`` (a length of one: 0). A static length
    emits only its branch (a dead ``% 0`` of a static length of one is an error to cc)."""
    p = f"(2 * ({length} - 1))"
    if length.isdigit():
        if int(length) == 1:
            g.emit(f"{s} = 0;")
        else:
            g.emit(f"{s} = (({s} % {p}) + {p}) % {p};")
            g.emit(f"if ({s} >= {length}) {s} = {p} - {s};")
        return
    with g.block(f"if ({length} == 1)"):
        g.emit(f"{s} = 0;")
    with g.block("else"):
        g.emit(f"{s} = (({s} % {p}) + {p}) % {p};")
        g.emit(f"if ({s} >= {length}) {s} = {p} - {s};")


def gen_tile(g: Gen) -> list[str]:
    g.restrict = True
    x, out = g.spec.ins[0], g.spec.outs[0]
    reps = g.spec.attr["repeats"]
    xs = g.shape(x)

    def body(vs: list[str]) -> None:
        src = [v if r == 1 else f"{v} % {e}" for v, r, e in zip(vs, reps, xs)]
        g.emit(f"y0[{horner(vs, g.shape(out))}] = x0[{horner(src, xs)}];")

    for e, r in zip(xs, reps):
        if r != 1:
            _empty_guard(g, e, g.numel(out))
    vars_ = loop_nest(g, g.shape(out), body)
    return [f"int64_t {', '.join(vars_)};"] if vars_ else []


# -- gathers ---------------------------------------------------------------------------------


def gen_gather_elements(g: Gen) -> list[str]:
    g.restrict = True
    data, idx = g.spec.ins
    axis = g.spec.attr["axis"] % len(data.shape)
    ds, ids = g.shape(data), g.shape(idx)
    _empty_guard(g, ds[axis], g.numel(idx))

    def body(vs: list[str]) -> None:
        pos = horner(vs, ids)
        _clipped(g, "k", f"x1[{pos}]", ds[axis])
        src = [("k" if i == axis else v) for i, v in enumerate(vs)]
        g.emit(f"y0[{pos}] = x0[{horner(src, ds)}];")

    vars_ = loop_nest(g, ids, body)
    return [f"int64_t {', '.join(['k', *vars_])};"]


def _nd_geometry(g: Gen, batch: int) -> tuple[str, str, int, str, str]:
    """(batch count B, index tuples per batch M, k, slices per batch P, slice elements) of an
    nd gather or scatter over data ``ins[0]`` and indices ``ins[1]``."""
    data, idx = g.spec.ins[0], g.spec.ins[1]
    ds, ids = g.shape(data), g.shape(idx)
    k = int(idx.shape[-1])  # type: ignore[arg-type]
    nb = g.prod(ds[:batch]) if batch else "1"
    m = g.prod(ids[batch:-1]) if len(ids) - 1 > batch else "1"
    per = g.prod(ds[batch : batch + k])
    inner = g.prod(ds[batch + k :]) if batch + k < len(ds) else "1"
    return nb, m, k, per, inner


def _nd_slice(g: Gen, batch: int, k: int, tuple_at: str) -> None:
    """``lin`` = the slice index (within its batch) of the index tuple at ``tuple_at``."""
    ds = g.shape(g.spec.ins[0])
    g.emit("lin = 0;")
    for j in range(k):
        _clipped(g, "c", f"x1[({tuple_at}) * {k} + {j}]", ds[batch + j])
        g.emit(f"lin = lin * {ds[batch + j]} + c;")


def gen_gather_nd(g: Gen) -> list[str]:
    g.restrict = True
    batch = g.spec.attr["batch_dims"]
    nb, m, k, per, inner = _nd_geometry(g, batch)
    ds = g.shape(g.spec.ins[0])
    for e in ds[batch : batch + k]:
        _empty_guard(g, e, g.numel(g.spec.outs[0]))
    with g.loop("b", nb):
        with g.loop("t", m):
            _nd_slice(g, batch, k, f"b * {m} + t")
            with g.loop("r", inner):
                g.emit(f"y0[(b * {m} + t) * {inner} + r] = x0[(b * {per} + lin) * {inner} + r];")
    return ["int64_t b, t, r, c, lin;"]


# -- scatters --------------------------------------------------------------------------------


def _combine(g: Gen, dst: str, upd: str) -> None:
    """``y0[dst]`` reduced with ``x2[upd]`` by the call's reduction, as numpy's ufunc.at does."""
    dtype = g.spec.outs[0].dtype
    red = g.spec.attr["reduction"]
    target, value = f"y0[{dst}]", f"x2[{upd}]"
    if red == "none":
        g.emit(f"{target} = {value};")
        return
    kind = T.kind(dtype)
    if kind == "float":
        a, b = g.load(dtype, target), g.load(dtype, value)
        if red in ("max", "min"):
            fn = g.h.use(fmax_of(dtype, "fmaxnan" if red == "max" else "fminnan"))
            expr = f"{fn}((double){a}, (double){b})"
        else:
            op = "+" if red == "add" else "*"
            expr = f"{a} {op} {b}" if dtype != "f16" else f"(float)({a}) {op} (float)({b})"
        g.emit(f"{target} = {g.store(dtype, expr)};")
        return
    ct = T.c_type(dtype)
    if red in ("add", "mul"):
        op = "+" if red == "add" else "*"
        g.emit(f"{target} = ({ct})((uint64_t){target} {op} (uint64_t){value});")
    else:
        cmp = ">" if red == "max" else "<"
        g.emit(f"if ({value} {cmp} {target}) {target} = {value};")


def _copy_data(g: Gen) -> None:
    with g.block("if (y0 != x0)"):
        with g.loop("zi", g.numel(g.spec.outs[0])):
            g.emit("y0[zi] = x0[zi];")


def gen_scatter_nd(g: Gen) -> list[str]:
    _copy_data(g)
    nb, m, k, per, inner = _nd_geometry(g, 0)
    ds = g.shape(g.spec.ins[0])
    for e in ds[:k]:
        if not e.isdigit():
            with g.block(f"if ({e} <= 0)"):
                g.emit("return;")
    with g.loop("t", m):
        _nd_slice(g, 0, k, "t")
        with g.loop("r", inner):
            _combine(g, f"lin * {inner} + r", f"t * {inner} + r")
    return ["int64_t zi, t, r, c, lin;"]


def gen_scatter_elements(g: Gen) -> list[str]:
    _copy_data(g)
    data, idx, _ = g.spec.ins
    axis = g.spec.attr["axis"] % len(data.shape)
    ds, ids = g.shape(data), g.shape(idx)
    if not ds[axis].isdigit():
        with g.block(f"if ({ds[axis]} <= 0)"):
            g.emit("return;")

    def body(vs: list[str]) -> None:
        pos = horner(vs, ids)
        _clipped(g, "k", f"x1[{pos}]", ds[axis])
        dst = [("k" if i == axis else v) for i, v in enumerate(vs)]
        _combine(g, horner(dst, ds), pos)

    vars_ = loop_nest(g, ids, body)
    return [f"int64_t {', '.join(['zi', 'k', *vars_])};"]


# -- one_hot / trilu -------------------------------------------------------------------------


def gen_one_hot(g: Gen) -> list[str]:
    g.restrict = True
    idx, out = g.spec.ins[0], g.spec.outs[0]
    depth = g.spec.attr["depth"]
    axis = g.spec.attr["axis"] % (len(idx.shape) + 1)

    def body(vs: list[str]) -> None:
        pos = [v for i, v in enumerate(vs) if i != axis]
        g.emit(f"k = (int64_t)x0[{horner(pos, g.shape(idx))}];")
        g.emit(f"if (k < 0) k += {depth};")
        g.emit(f"y0[{horner(vs, g.shape(out))}] = (k == {vs[axis]}) ? x1[1] : x1[0];")

    vars_ = loop_nest(g, g.shape(out), body)
    return [f"int64_t {', '.join(['k', *vars_])};"]


def gen_trilu(g: Gen) -> list[str]:
    x = g.spec.ins[0]
    k, upper = g.spec.attr["k"], g.spec.attr["upper"]
    xs = g.shape(x)
    rows, cols = xs[-2], xs[-1]
    outer = g.prod(xs[:-2]) if len(xs) > 2 else "1"
    zero = _literal(x.dtype, 0)
    if len(g.spec.ins) > 1:  # k given at run time
        g.emit("kk = (int64_t)x1[0];")
        k = "kk"
    keep = f"j - i >= {k}" if upper else f"j - i <= {k}"
    with g.loop("o", outer):
        with g.loop("i", rows):
            with g.loop("j", cols):
                g.emit(f"p = (o * {rows} + i) * {cols} + j;")
                g.emit(f"y0[p] = ({keep}) ? x0[p] : {zero};")
    return ["int64_t o, i, j, p;"] + (["int64_t kk;"] if len(g.spec.ins) > 1 else [])

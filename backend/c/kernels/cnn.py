"""N-d convolution and pooling and the CNN normalizations: conv_nd, max_pool_nd, avg_pool_nd,
lp_pool_nd, group_norm, mean_variance_norm and inv_std_dev, as plain loops.

Each output element of a window op sums (or maximizes) over its taps in row-major tap order
(conv_nd: over channels, then taps) in a ``double`` accumulator (integers: a wrapping 64-bit
one, as conv2d's plain kernel), skipping the taps in the padding; the normalizations compute
their statistics in ``double``, per row: mean, then the variance around it, then the
outputs, each output element read before it is written (``OpDef.inplace``)."""

from __future__ import annotations

from typing import Callable, cast

import numpy as np

from relaxc.ir.ops.cnn import Geometry
from relaxc.ir.ops.common import norm_axes

from .. import dtypes as T

from .base import Gen, check_numeric, finish, fmax_of, horner, unsupported, widen


def _nest(g: Gen, names: list[str], extents: list[str], body: Callable[[], None]) -> None:
    """Loops of ``names`` over ``extents``, outermost first, ``body`` innermost."""
    if not names:
        body()
        return
    with g.loop(names[0], extents[0]):
        _nest(g, names[1:], extents[1:], body)


def _taps(
    g: Gen,
    geo: Geometry,
    outs: list[str],
    sizes: list[str],
    body: Callable[[list[str]], None],
    inside: bool = True,
) -> list[str]:
    """Loops over the taps (t1..tr); ``body(indices)`` with the input index on each axis.
    With ``inside`` the taps whose index falls outside the input are skipped (``continue``);
    otherwise the body sees them (its indices may be out of range)."""
    ts = [f"t{i}" for i in range(geo.r)]
    idx = [f"q{i}" for i in range(geo.r)]

    def rec(i: int) -> None:
        if i == geo.r:
            body(idx)
            return
        with g.loop(ts[i], str(geo.k[i])):
            g.emit(
                f"const int64_t {idx[i]} = {outs[i]} * {geo.strides[i]} - {geo.before[i]} + "
                f"{ts[i]} * {geo.dilation[i]};"
            )
            if inside:
                g.emit(f"if ({idx[i]} < 0 || {idx[i]} >= {sizes[i]}) continue;")
            rec(i + 1)

    rec(0)
    return ts


def gen_conv_nd(g: Gen) -> list[str]:
    g.restrict = True
    x, w = g.spec.ins[0], g.spec.ins[1]
    out = g.spec.outs[0]
    k = check_numeric(g)
    geo = Geometry("conv_nd", [int(cast(int, d)) for d in w.shape[2:]], g.spec.attr)
    groups = g.spec.attr["groups"]
    xs, ws, ys = g.shape(x), g.shape(w), g.shape(out)
    N, OC, CG = xs[0], ws[0], ws[1]
    sizes, osz = xs[2:], ys[2:]
    outs = [f"o{i}" for i in range(geo.r)]
    og = f"({OC} / {groups})" if groups != 1 else OC
    acc = "double" if k == "float" else "uint64_t"
    ts = [f"t{i}" for i in range(geo.r)]

    def per_output() -> None:
        g.emit(f"{acc} acc = 0;")
        with g.loop("c", CG):
            g.emit(f"const int64_t ic = grp * {CG} + c;")

            def add(idx: list[str]) -> None:
                xv = g.load(x.dtype, f"x0[{horner(['b', 'ic', *idx], xs)}]")
                wv = g.load(w.dtype, f"x1[{horner(['oc', 'c', *ts], ws)}]")
                g.emit(f"acc += {widen(k, xv)} * {widen(k, wv)};")

            _taps(g, geo, outs, sizes, add)
        if len(g.spec.ins) == 3:
            g.emit(f"acc += {widen(k, g.load(w.dtype, 'x2[oc]'))};")
        g.emit(f"y0[{horner(['b', 'oc', *outs], ys)}] = {finish(g, out.dtype, 'acc')};")

    with g.loop("b", N):
        with g.loop("oc", OC):
            g.emit(f"const int64_t grp = oc / {og};" if groups != 1 else "const int64_t grp = 0;")
            _nest(g, outs, osz, per_output)
    names = ["b", "oc", "c", *outs, *(f"t{i}" for i in range(geo.r))]
    return [f"int64_t {', '.join(names)};"]


def gen_pool_nd(g: Gen) -> list[str]:
    """max_pool_nd, avg_pool_nd and lp_pool_nd."""
    g.restrict = True
    x, out = g.spec.ins[0], g.spec.outs[0]
    a = g.spec.attr
    op = g.spec.op
    kind = T.kind(x.dtype)
    if kind == "bool":
        raise unsupported(g.spec, loc=g.loc)
    geo = Geometry(op, a["pool_size"], a)
    xs, ys = g.shape(x), g.shape(out)
    sizes, osz = xs[2:], ys[2:]
    outs = [f"o{i}" for i in range(geo.r)]
    decls = [f"int64_t nc, {', '.join(outs)}, {', '.join(f't{i}' for i in range(geo.r))};"]
    p = float(a["p"]) if op == "lp_pool_nd" else 0.0
    if op == "max_pool_nd" and kind != "float":
        info = np.iinfo(np.dtype(T.DTYPES[x.dtype].numpy))
        init, acc_t = T.element_literal(int(info.min), x.dtype), T.c_type(x.dtype)
    else:
        init, acc_t = ("-INFINITY" if op == "max_pool_nd" else "0"), "double"
    include = op == "avg_pool_nd" and a["count_include_pad"]

    def per_output() -> None:
        g.emit(f"{acc_t} acc = {init};")
        if op == "avg_pool_nd":
            g.emit("double cnt = 0;")

        def visit(idx: list[str]) -> None:
            inside = " && ".join(f"{q} >= 0 && {q} < {s}" for q, s in zip(idx, sizes))
            val = g.load(x.dtype, f"x0[{horner(['nc', *idx], ['0', *sizes])}]")
            with g.block(f"if ({inside})"):
                if op == "max_pool_nd" and kind == "float":
                    g.emit(f"acc = {g.h.use(fmax_of(x.dtype))}(acc, (double){val});")
                elif op == "max_pool_nd":
                    g.emit(f"if ({val} > acc) acc = {val};")
                elif op == "lp_pool_nd":
                    g.emit(f"acc += {_power(f'fabs((double){val})', p)};")
                else:
                    g.emit(f"acc += (double){val};")
                    if not include:
                        g.emit("cnt += 1.0;")
            if include:
                ends = " && ".join(
                    f"{q} < {s} + {after}" for q, s, after in zip(idx, sizes, geo.after)
                )
                g.emit(f"if ({ends}) cnt += 1.0;")

        _taps(g, geo, outs, sizes, visit, inside=False)
        at = f"y0[{horner(['nc', *outs], ['0', *osz])}]"
        if op == "max_pool_nd":
            g.emit(f"{at} = {g.store(out.dtype, 'acc') if kind == 'float' else 'acc'};")
        elif op == "lp_pool_nd":
            g.emit(f"{at} = {g.store(out.dtype, _root('acc', p))};")
        else:
            g.emit(f"{at} = {g.store(out.dtype, 'cnt > 0 ? acc / cnt : 0.0')};")

    with g.loop("nc", g.prod(xs[:2])):
        _nest(g, outs, osz, per_output)
    return decls


def gen_max_pool_indices(g: Gen) -> list[str]:
    """max_pool_indices: per window, the flat index of the first tap inside the input whose
    value beats every tap before it (the index row-major, or column-major over the spatial
    axes with storage_order=1)."""
    g.restrict = True
    x = g.spec.ins[0]
    a = g.spec.attr
    if T.kind(x.dtype) == "bool":
        raise unsupported(g.spec, loc=g.loc)
    geo = Geometry("max_pool_indices", a["pool_size"], a)
    xs, ys = g.shape(x), g.shape(g.spec.outs[0])
    sizes, osz = xs[2:], ys[2:]
    outs = [f"o{i}" for i in range(geo.r)]
    image = g.prod(sizes)
    ct = "double" if T.kind(x.dtype) == "float" else T.c_type(x.dtype)

    def spatial_index(idx: list[str]) -> str:
        if a["storage_order"] == 1:
            return horner(idx[::-1], sizes[::-1])
        return horner(idx, sizes)

    def per_output() -> None:
        g.emit(f"{ct} best = 0;")
        g.emit("int64_t at = -1;")

        def visit(idx: list[str]) -> None:
            cell = f"x0[nc * {image} + {horner(idx, sizes)}]"
            g.emit(f"const {ct} v = ({ct}){g.load(x.dtype, cell)};")
            with g.block("if (at < 0 || v > best)"):
                g.emit("best = v;")
                g.emit(f"at = nc * {image} + {spatial_index(idx)};")

        _taps(g, geo, outs, sizes, visit)
        g.emit(f"y0[{horner(['nc', *outs], ['0', *osz])}] = at;")

    with g.loop("nc", g.prod(xs[:2])):
        _nest(g, outs, osz, per_output)
    return [f"int64_t nc, {', '.join(outs)}, {', '.join(f't{i}' for i in range(geo.r))};"]


def _power(v: str, p: float) -> str:
    if p == 1.0:
        return v
    if p == 2.0:
        return f"({v}) * ({v})"
    return f"pow({v}, {T.float_literal(p, 'f64')})"


def _root(v: str, p: float) -> str:
    if p == 1.0:
        return v
    if p == 2.0:
        return f"sqrt({v})"
    return f"pow({v}, {T.float_literal(1.0 / p, 'f64')})"


def _rows(
    g: Gen, shape: list[str], reduced: list[int]
) -> tuple[list[str], list[str], Callable[[], str]]:
    """The loop variables of the kept and the reduced axes of a tensor of ``shape``, and the
    linear index of the element they name."""
    nd = len(shape)
    kept = [f"k{i}" for i in range(nd) if i not in reduced]
    red = [f"r{i}" for i in range(nd) if i in reduced]

    def index() -> str:
        return horner([f"r{i}" if i in reduced else f"k{i}" for i in range(nd)], shape)

    return kept, red, index


def _stats(g: Gen, dtype: str, red: list[str], ext: list[str], at: Callable[[], str]) -> None:
    """``mean`` and ``var`` (population) over the loops ``red``, in double."""
    ld = f"(double){g.load(dtype, f'x0[{at()}]')}"
    count = g.prod(ext) if ext else "1"
    g.emit("mean = 0;")
    _nest(g, red, ext, lambda: g.emit(f"mean += {ld};"))
    g.emit(f"mean /= (double)({count});")
    g.emit("var = 0;")

    def dev() -> None:
        g.emit(f"d = {ld} - mean;")
        g.emit("var += d * d;")

    _nest(g, red, ext, dev)
    g.emit(f"var /= (double)({count});")


def gen_axes_norm(g: Gen) -> list[str]:
    """mean_variance_norm and inv_std_dev over their axes."""
    x, out = g.spec.ins[0], g.spec.outs[0]
    xs = g.shape(x)
    nd = len(xs)
    reduced = list(norm_axes(g.spec.attr["axes"], nd, g.spec.op))
    kept, red, index = _rows(g, xs, reduced)
    k_ext = [xs[i] for i in range(nd) if i not in reduced]
    r_ext = [xs[i] for i in reduced]
    eps = T.float_literal(float(g.spec.attr["epsilon"]), "f64")

    def per_row() -> None:
        _stats(g, x.dtype, red, r_ext, index)
        g.emit(f"scale = sqrt(var + {eps});")
        if g.spec.op == "inv_std_dev":
            at = horner(kept, k_ext) if kept else "0"
            g.emit(f"y0[{at}] = {g.store(out.dtype, '1.0 / scale')};")
            return

        def write() -> None:
            i = index()
            xv = g.load(x.dtype, f"x0[{i}]")
            g.emit(f"y0[{i}] = {g.store(out.dtype, f'((double){xv} - mean) / scale')};")

        _nest(g, red, r_ext, write)

    _nest(g, kept, k_ext, per_row)
    decls = [f"int64_t {', '.join(kept + red)};"] if kept + red else []
    return decls + ["double mean, var, d, scale;"]


def gen_group_norm(g: Gen) -> list[str]:
    """Per image and group: the statistics over its C/G channels' positions (one contiguous
    run), then each element normalized, times its channel's scale plus its bias."""
    x, out = g.spec.ins[0], g.spec.outs[0]
    xs = g.shape(x)
    groups = g.spec.attr["num_groups"]
    N, C = xs[0], xs[1]
    inner = g.prod(xs[2:]) if len(xs) > 2 else "1"
    cg = f"({C} / {groups})"
    run = g.prod([cg, inner])
    eps = T.float_literal(float(g.spec.attr["epsilon"]), "f64")
    ld = lambda e: f"(double){g.load(x.dtype, e)}"  # noqa: E731
    with g.loop("n", N):
        with g.loop("gi", str(groups)):
            g.emit(f"const int64_t at = (n * {groups} + gi) * {run};")
            _stats(g, x.dtype, ["i"], [run], lambda: "at + i")
            g.emit(f"scale = sqrt(var + {eps});")
            with g.loop("c", cg):
                g.emit(f"const int64_t ch = gi * {cg} + c;")
                g.emit(f"const double a = {ld('x1[ch]')}, s = {ld('x2[ch]')};")
                with g.loop("i", inner):
                    e = f"at + c * {inner} + i"
                    xv = ld(f"x0[{e}]")
                    g.emit(f"y0[{e}] = {g.store(out.dtype, f'({xv} - mean) / scale * a + s')};")
    return ["int64_t n, gi, c, i;", "double mean, var, d, scale;"]


__all__ = [
    "gen_axes_norm",
    "gen_conv_nd",
    "gen_group_norm",
    "gen_max_pool_indices",
    "gen_pool_nd",
]

"""Running totals along one axis: cumsum and cumprod (inclusive or exclusive, forward or
reverse)."""

from __future__ import annotations

from .. import dtypes as T

from .base import Gen, ctype_of_domain, int_wrap, outer_inner


def gen_cumulative(g: Gen) -> list[str]:
    """One pass along the axis per (outer, inner) position: floats accumulate in double,
    integers in wrapping unsigned 64-bit arithmetic truncated to their width. Each element
    is read before its output is written, so the output may overwrite x."""
    x, out = g.spec.ins[0], g.spec.outs[0]
    a = g.spec.attr
    product = g.spec.op == "cumprod"
    axis = a["axis"] % len(x.shape)
    outer, L, inner = outer_inner(g, x, axis)
    kind = T.kind(x.dtype)
    isfloat = kind == "float"
    at = f"(o * {L} + k) * {inner} + i"
    step = "*=" if product else "+="
    with g.loop("o", outer):
        with g.loop("i", inner):
            g.emit(f"acc = {1 if product else 0};")
            with g.loop("j", L):
                g.emit(f"k = {f'{L} - 1 - j' if a['reverse'] else 'j'};")
                val = g.load(x.dtype, f"x0[{at}]")
                if isfloat:
                    g.emit(f"v = (double){val};")
                else:
                    wide = f"(uint64_t){val}" if kind == "uint" else f"(uint64_t)(int64_t){val}"
                    g.emit(f"v = {wide};")
                if a["exclusive"]:
                    g.emit(f"y0[{at}] = {_out(g, out.dtype, isfloat)};")
                    g.emit(f"acc {step} v;")
                else:
                    g.emit(f"acc {step} v;")
                    g.emit(f"y0[{at}] = {_out(g, out.dtype, isfloat)};")
    acc_t = "double" if isfloat else "uint64_t"
    return ["int64_t o, i, j, k;", f"{acc_t} acc, v;"]


def _out(g: Gen, dtype: str, isfloat: bool) -> str:
    return g.store(dtype, "acc") if isfloat else int_wrap(dtype, "acc")


def gen_topk_indices(g: Gen) -> list[str]:
    """The index of each element whose rank (how many elements beat it: a better value, or
    an equal one at a lower index; NaN beaten by every number) is below k goes to output
    position rank: O(L^2) compares per row and no scratch memory."""
    x = g.spec.ins[0]
    a = g.spec.attr
    axis = a["axis"] % len(x.shape)
    outer, L, inner = outer_inner(g, x, axis)
    k = a["k"]
    isfloat = T.kind(x.dtype) == "float"
    cmp = ">" if a["largest"] else "<"
    acc_t = "double" if isfloat else ctype_of_domain(x.dtype)
    ld = lambda e: f"({acc_t}){g.load(x.dtype, e)}"  # noqa: E731
    if isfloat:
        beats = f"(b != b && u == u) || u {cmp} b || ((u == b || (u != u && b != b)) && q < j)"
    else:
        beats = f"u {cmp} b || (u == b && q < j)"
    with g.loop("o", outer):
        with g.loop("i", inner):
            with g.loop("j", L):
                g.emit(f"b = {ld(f'x0[(o * {L} + j) * {inner} + i]')};")
                g.emit("rank = 0;")
                with g.loop("q", L):
                    g.emit(f"u = {ld(f'x0[(o * {L} + q) * {inner} + i]')};")
                    g.emit(f"if ({beats}) rank++;")
                g.emit(f"if (rank < {k}) y0[(o * {k} + rank) * {inner} + i] = j;")
    return ["int64_t o, i, j, q, rank;", f"{acc_t} b, u;"]

"""Ops along one axis or producing indices: arange, argmax and argmin."""

from __future__ import annotations

from .. import dtypes as T

from .base import Gen, ctype_of_domain, int_wrap, outer_inner


def gen_arange(g: Gen) -> list[str]:
    """``start + i * delta``: floats in double (as the numpy kernel), integers in wrapping
    unsigned 64-bit arithmetic."""
    out = g.spec.outs[0]
    start, delta = g.spec.attr["start"], g.spec.attr["delta"]
    n = g.shape(out)[0]
    with g.loop("i", n):
        if T.kind(out.dtype) == "float":
            s = T.float_literal(float(start), "f64")
            d = T.float_literal(float(delta), "f64")
            g.emit(f"y0[i] = {g.store(out.dtype, f'{s} + (double)i * {d}')};")
        else:
            s = f"UINT64_C({int(start) % 2**64})"
            d = f"UINT64_C({int(delta) % 2**64})"
            g.emit(f"y0[i] = {int_wrap(out.dtype, f'{s} + (uint64_t)i * {d}')};")
    return ["int64_t i;"]


def gen_arg(g: Gen) -> list[str]:
    """argmax/argmin along one axis: the first (or last) index of the extreme, NaN beating
    every number (numpy's rule: the first NaN, or the last with select_last_index)."""
    x = g.spec.ins[0]
    a = g.spec.attr
    axis = a["axis"] % len(x.shape)
    outer, n, inner = outer_inner(g, x, axis)
    last = a["select_last_index"]
    cmp = (">" if g.spec.op == "argmax" else "<") + ("=" if last else "")
    isfloat = T.kind(x.dtype) == "float"
    acc_t = "double" if isfloat else ctype_of_domain(x.dtype)
    with g.loop("o", outer):
        with g.loop("j", inner):
            g.emit(f"best = {g.load(x.dtype, f'x0[o * {n} * {inner} + j]')}; at = 0;")
            with g.loop("i", n):
                v = g.load(x.dtype, f"x0[(o * {n} + i) * {inner} + j]")
                g.emit(f"v = {v};")
                if isfloat and last:
                    g.emit(
                        "if (v != v || (best == best && v " + cmp + " best)) { best = v; at = i; }"
                    )
                elif isfloat:
                    g.emit(
                        "if (best == best && (v != v || v " + cmp + " best)) { best = v; at = i; }"
                    )
                else:
                    g.emit(f"if (v {cmp} best) {{ best = v; at = i; }}")
            g.emit(f"y0[o * {inner} + j] = at;")
    return ["int64_t o, j, i, at;", f"{acc_t} best, v;"]

"""Reductions: sum, mean and max over any set of axes."""

from __future__ import annotations

from typing import Callable

from .. import dtypes as T

from .base import (
    Gen,
    ctype_of_domain,
    fmax_of,
    horner,
    int_wrap,
    unsupported,
)


def gen_reduce(g: Gen) -> list[str]:
    """sum, mean and max over any set of axes (sum and mean accumulate in double or in
    wrapping 64-bit integers; max propagates NaN like numpy)."""
    x, out = g.spec.ins[0], g.spec.outs[0]
    op = g.spec.op
    nd = len(x.shape)
    axes = g.spec.attr["axes"]
    red = sorted({a % nd for a in axes}) if axes is not None else list(range(nd))
    kept = [a for a in range(nd) if a not in red]
    k = T.kind(x.dtype)
    if (op == "sum" and k == "bool") or (op == "mean" and k != "float"):
        raise unsupported(g.spec, loc=g.loc)
    xs = g.shape(x)
    kept_ext = [xs[a] for a in kept]
    red_ext = [xs[a] for a in red]
    o_vars = [g.tmp("k") for _ in kept]
    r_vars = [g.tmp("r") for _ in red]
    decls = [f"int64_t {', '.join(o_vars + r_vars)};"] if o_vars or r_vars else []
    acc_t = "double" if k == "float" else ("uint64_t" if op == "sum" else ctype_of_domain(x.dtype))
    decls.append(f"{acc_t} acc;")
    if op == "max":
        decls.append("int first;")

    def element() -> None:
        idx = [""] * nd
        for a, v in zip(kept, o_vars):
            idx[a] = v
        for a, v in zip(red, r_vars):
            idx[a] = v
        val = g.load(x.dtype, f"x0[{horner(idx, xs)}]")
        if op == "max":
            if k == "float":
                fmax = g.h.use(fmax_of(x.dtype))
                g.emit(f"acc = first ? (double){val} : {fmax}(acc, (double){val});")
            else:
                g.emit(f"if (first || {val} > acc) acc = {val};")
            g.emit("first = 0;")
        elif k == "float":
            g.emit(f"acc += (double){val};")
        else:
            g.emit(
                f"acc += (uint64_t){val};" if k == "uint" else f"acc += (uint64_t)(int64_t){val};"
            )

    def row() -> None:
        g.emit("acc = 0;")
        if op == "max":
            g.emit("first = 1;")
        nest(red_ext, r_vars, element)
        result = "acc"
        if op == "mean":
            result = f"acc / (double)({g.prod(red_ext) if red_ext else '1'})"
        oi = horner(o_vars, kept_ext) if o_vars else "0"
        g.emit(
            f"y0[{oi}] = "
            f"{g.store(out.dtype, result) if k == 'float' else int_wrap(out.dtype, result)};"
        )

    def nest(extents: list[str], vars_: list[str], body: Callable[[], None], i: int = 0) -> None:
        if i == len(extents):
            body()
            return
        with g.loop(vars_[i], extents[i]):
            nest(extents, vars_, body, i + 1)

    nest(kept_ext, o_vars, row)
    return decls

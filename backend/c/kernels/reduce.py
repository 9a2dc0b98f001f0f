"""Reductions over any set of axes: sum, mean, max, min, prod, sum_square, l1_norm, l2_norm,
log_sum and log_sum_exp."""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir.ops.reduce import identity_of

from .. import dtypes as T

from .base import (
    Gen,
    ctype_of_domain,
    fmax_of,
    horner,
    int_wrap,
    unsupported,
)

_FLOAT_ONLY = ("mean", "l2_norm", "log_sum", "log_sum_exp")
_EXTREMES = ("max", "min")


def _accumulate(g: Gen, op: str, k: str, val: str) -> None:
    """One element ``val`` (in its compute domain) into ``acc``."""
    if op in _EXTREMES:
        if k == "float":
            fn = g.h.use(fmax_of(g.spec.ins[0].dtype, "fmaxnan" if op == "max" else "fminnan"))
            g.emit(f"acc = first ? (double){val} : {fn}(acc, (double){val});")
        else:
            cmp = ">" if op == "max" else "<"
            g.emit(f"if (first || {val} {cmp} acc) acc = {val};")
        g.emit("first = 0;")
        return
    if k == "float":
        v = f"(double){val}"
        term = {
            "sum_square": f"{v} * {v}",
            "l2_norm": f"{v} * {v}",
            "l1_norm": f"fabs({v})",
            "log_sum_exp": f"exp({v} - shift)",
        }.get(op, v)
        g.emit(f"acc {'*' if op == 'prod' else '+'}= {term};")
        return
    w = f"(uint64_t){val}" if k == "uint" else f"(uint64_t)(int64_t){val}"
    if op == "prod":
        g.emit(f"acc *= {w};")
    elif op == "sum_square":
        g.emit(f"acc += {w} * {w};")
    elif op == "l1_norm" and k == "int":
        g.emit(f"acc += {val} < 0 ? (uint64_t)0 - {w} : {w};")
    else:
        g.emit(f"acc += {w};")


def gen_reduce(g: Gen) -> list[str]:
    """Every reduction over any set of axes: floats accumulate in double, integers in
    wrapping 64-bit integers; max and min propagate NaN like numpy, and a reduction over no
    elements gives its identity (ir/ops/reduce.py). log_sum_exp makes two passes over a
    row: its maximum, then the sum of exp(x - max)."""
    x, out = g.spec.ins[0], g.spec.outs[0]
    op = g.spec.op
    nd = len(x.shape)
    axes = g.spec.attr["axes"]
    red = sorted({a % nd for a in axes}) if axes is not None else list(range(nd))
    kept = [a for a in range(nd) if a not in red]
    k = T.kind(x.dtype)
    if (op not in _EXTREMES and k == "bool") or (op in _FLOAT_ONLY and k != "float"):
        raise unsupported(g.spec, loc=g.loc)
    xs = g.shape(x)
    kept_ext = [xs[a] for a in kept]
    red_ext = [xs[a] for a in red]
    o_vars = [g.tmp("k") for _ in kept]
    r_vars = [g.tmp("r") for _ in red]
    decls = [f"int64_t {', '.join(o_vars + r_vars)};"] if o_vars or r_vars else []
    if k == "float":
        acc_t = "double"
    elif op in _EXTREMES:
        acc_t = ctype_of_domain(x.dtype)
    else:
        acc_t = "uint64_t"
    decls.append(f"{acc_t} acc;")
    if op in _EXTREMES or op == "log_sum_exp":
        decls.append("int first;")
    if op == "log_sum_exp":
        decls.append("double shift;")

    def value() -> str:
        idx = [""] * nd
        for a, v in zip(kept, o_vars):
            idx[a] = v
        for a, v in zip(red, r_vars):
            idx[a] = v
        return g.load(x.dtype, f"x0[{horner(idx, xs)}]")

    def extreme_identity() -> str:
        ident = identity_of(np.dtype(T.DTYPES[x.dtype].numpy), op == "max")
        if k == "float":
            return "-INFINITY" if op == "max" else "INFINITY"
        return T.element_literal(np.asarray(ident), x.dtype)

    def row() -> None:
        if op == "log_sum_exp":
            # the shift: the row's maximum (NaN propagates), 0 where it is not finite
            g.emit("shift = 0; first = 1;")
            fmax = g.h.use(fmax_of(x.dtype))
            nest(
                red_ext,
                r_vars,
                lambda: g.emit(
                    f"shift = first ? (double){value()} : {fmax}(shift, (double){value()}); "
                    "first = 0;"
                ),
            )
            g.emit("if (first || !isfinite(shift)) shift = 0;")
        g.emit("acc = 1;" if op == "prod" else "acc = 0;")
        if op in _EXTREMES:
            g.emit("first = 1;")
        nest(red_ext, r_vars, lambda: _accumulate(g, op, k, value()))
        if op in _EXTREMES:
            g.emit(f"if (first) acc = {extreme_identity()};")
        result = {
            "mean": f"acc / (double)({g.prod(red_ext) if red_ext else '1'})",
            "l2_norm": "sqrt(acc)",
            "log_sum": "log(acc)",
            "log_sum_exp": "log(acc) + shift",
        }.get(op, "acc")
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

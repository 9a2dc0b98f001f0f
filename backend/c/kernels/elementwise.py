"""Elementwise kernels: unary and binary arithmetic, leaky_relu, clip, cast and where."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from relaxc.ir.registry import Registry

from .. import dtypes as T

from .base import (
    Gen,
    broadcast_index,
    ctype_of_domain,
    fmax_of,
    horner,
    int_wrap,
    loop_nest,
    same_shape,
    scalar_formula,
    scalar_of,
    to_int,
    unsupported,
)


def unary_expr(g: Gen, op: str, dtype: str, x: str) -> str:
    k = T.kind(dtype)
    if k == "bool":
        raise unsupported(g.spec, "bool arithmetic", g.loc)
    formula = scalar_of(g)
    if k == "float":
        ct = ctype_of_domain(dtype)
        d = f"(double){x}"
        simple = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh"}
        if formula is not None:  # negative: -x
            return scalar_formula(formula, [x])
        if op == "abs":
            return f"({ct})fabs({d})"
        if op in simple:
            return f"({ct}){simple[op]}({d})"
        if op == "rsqrt":
            return f"({ct})(1.0 / sqrt({d}))"
        if op == "sigmoid":
            return f"({ct})(1.0 / (1.0 + exp(-{d})))"
        if op == "silu":
            return f"({ct})({d} / (1.0 + exp(-{d})))"
        if op == "relu":
            return f"({x} != {x} || {x} > 0 ? {x} : ({ct})0)"
        if op == "erf":
            # numpy: erf in float64, rounded once to the dtype (f16 too: no detour via float).
            return f"erf({d})" if dtype == "f16" else f"({ct})erf({d})"
        if op == "gelu":
            # numpy: x / sqrt(2) is done in the input's precision, erf in float64.
            if dtype == "f64":
                t = f"{x} / 1.4142135623730951"
            else:
                t = f"{x} / 1.41421356f"
            return f"({ct})(0.5 * {d} * (1.0 + erf((double)({t}))))"
        raise unsupported(g.spec, loc=g.loc)
    ct = T.c_type(dtype)
    if op == "negative":
        return int_wrap(dtype, f"0u - (uint64_t){x}")
    if op == "abs":
        if k == "uint":
            return x
        return f"({x} < 0 ? {int_wrap(dtype, f'0u - (uint64_t){x}')} : {x})"
    if op == "relu":
        return f"({x} > 0 ? {x} : ({ct})0)"
    raise unsupported(g.spec, loc=g.loc)


def binary_expr(g: Gen, op: str, dtype: str, a: str, b: str) -> str:
    k = T.kind(dtype)
    if k == "bool":
        raise unsupported(g.spec, "bool arithmetic", g.loc)
    formula = scalar_of(g)
    if k == "float":
        ct = ctype_of_domain(dtype)
        if formula is not None:  # add, subtract, multiply: computed in the dtype (f16 in float)
            return f"({scalar_formula(formula, [a, b])})"
        if op == "divide":  # a float division: no integer rule
            return f"({a} / {b})"
        if op == "maximum":
            return f"({ct}){g.h.use(fmax_of(dtype))}({a}, {b})"
        if op == "minimum":
            return f"({ct}){g.h.use(fmax_of(dtype, 'fminnan'))}({a}, {b})"
        if op == "power":
            return f"({ct})pow((double){a}, (double){b})"
        raise unsupported(g.spec, loc=g.loc)
    if formula is not None:  # integers wrap: the formula in unsigned 64 bits, then truncated
        return int_wrap(dtype, scalar_formula(formula, [f"(uint64_t){a}", f"(uint64_t){b}"]))
    if op == "maximum":
        return f"({a} > {b} ? {a} : {b})"
    if op == "minimum":
        return f"({a} < {b} ? {a} : {b})"
    if op == "divide":
        q = f"trunc((double){a} / (double){b})"
        return f"({b} == 0 ? ({T.c_type(dtype)})0 : {to_int(g, dtype, q)})"
    if op == "power":
        return to_int(g, dtype, f"pow((double){a}, (double){b})")
    raise unsupported(g.spec, loc=g.loc)


# ---------------------------------------------------------------------------------------
# Elementwise ops.


def gen_elementwise(g: Gen, scalar: Callable[[list[str]], str]) -> list[str]:
    """``y0 = scalar(inputs)`` over the broadcast output shape."""
    s = g.spec
    out = s.outs[0]
    ins = s.ins
    if all(same_shape(t, out) for t in ins):
        with g.loop("i", g.numel(out)):
            vals = [g.load(t.dtype, f"{x}[i]") for t, x in zip(ins, g.x)]
            g.emit(f"y0[i] = {g.store(out.dtype, scalar(vals))};")
        return ["int64_t i;"]
    decls: list[str] = []

    def body(vars_: list[str]) -> None:
        vals = [
            g.load(t.dtype, f"{x}[{broadcast_index(g, t, out, vars_)}]") for t, x in zip(ins, g.x)
        ]
        g.emit(f"y0[{horner(vars_, g.shape(out))}] = {g.store(out.dtype, scalar(vals))};")

    vars_ = loop_nest(g, g.shape(out), body)
    return decls + [f"int64_t {', '.join(vars_)};"]


def gen_unary(g: Gen) -> list[str]:
    dtype = g.spec.ins[0].dtype
    return gen_elementwise(g, lambda v: unary_expr(g, g.spec.op, dtype, v[0]))


def gen_binary(g: Gen) -> list[str]:
    dtype = g.spec.ins[0].dtype
    return gen_elementwise(g, lambda v: binary_expr(g, g.spec.op, dtype, v[0], v[1]))


def gen_leaky_relu(g: Gen) -> list[str]:
    """x >= 0 ? x : alpha * x, in the compute domain (f16 as float), alpha rounded to it."""
    dtype = g.spec.ins[0].dtype
    lit = "f64" if dtype == "f64" else "f32"
    with np.errstate(over="ignore"):  # a huge alpha is inf in f32, as in the numpy kernel
        a = float(g.spec.attr["alpha"]) if lit == "f64" else float(np.float32(g.spec.attr["alpha"]))
    alpha = T.float_literal(a, lit)
    zero = "0.0" if lit == "f64" else "0.0f"
    return gen_elementwise(g, lambda v: f"({v[0]} >= {zero} ? {v[0]} : {v[0]} * {alpha})")


def gen_clip(g: Gen) -> list[str]:
    dtype = g.spec.ins[0].dtype
    lo, hi = g.spec.attr["a_min"], g.spec.attr["a_max"]
    k = T.kind(dtype)
    if k == "bool":
        raise unsupported(g.spec, loc=g.loc)
    if k == "float":
        np_t = np.float16 if dtype == "f16" else (np.float32 if dtype == "f32" else np.float64)
        lo_v, hi_v = float(np_t(lo)), float(np_t(hi))
        lit = "f64" if dtype == "f64" else "f32"
        lo_c, hi_c = T.float_literal(lo_v, lit), T.float_literal(hi_v, lit)
    else:
        info = np.iinfo(np.dtype(T.DTYPES[dtype].numpy))

        def bound(v: float, up: bool) -> int:
            if math.isinf(v):
                return int(info.max) if v > 0 else int(info.min)
            n = math.ceil(v) if up else math.floor(v)
            return max(int(info.min), min(int(info.max), n))

        lo_i, hi_i = bound(lo, True), bound(hi, False)
        lo_c, hi_c = T.element_literal(lo_i, dtype), T.element_literal(hi_i, dtype)

        def clamp(v: list[str]) -> str:  # no comparison that the type makes always false
            x = v[0]
            if lo_i > info.min:
                x = (
                    f"({v[0]} < {lo_c} ? {lo_c} : {x})"
                    if hi_i >= info.max
                    else f"({v[0]} < {lo_c} ? {lo_c} : ({v[0]} > {hi_c} ? {hi_c} : {v[0]}))"
                )
            elif hi_i < info.max:
                x = f"({v[0]} > {hi_c} ? {hi_c} : {v[0]})"
            return x

        return gen_elementwise(g, clamp)
    return gen_elementwise(
        g, lambda v: f"({v[0]} < {lo_c} ? {lo_c} : ({v[0]} > {hi_c} ? {hi_c} : {v[0]}))"
    )


def gen_cast(g: Gen) -> list[str]:
    src, dst = g.spec.ins[0].dtype, g.spec.outs[0].dtype
    ks, kd = T.kind(src), T.kind(dst)

    def conv(v: list[str]) -> str:
        x = v[0]
        if kd == "bool":
            return f"(uint8_t)({x} != 0)"
        if kd == "float":  # the value itself; gen_elementwise converts it to dst's storage
            return x if ks == "float" else f"(double){x}"
        if ks == "float":  # truncate toward zero, nan -> 0, saturate at the target's range
            info = np.iinfo(np.dtype(T.DTYPES[dst].numpy))
            lo_c, hi_c = (
                T.float_literal(float(info.min), "f64"),
                T.float_literal(float(info.max), "f64"),
            )
            mn, mx = T.element_literal(int(info.min), dst), T.element_literal(int(info.max), dst)
            t = f"trunc((double){x})"
            return (
                f"({x} != {x} ? ({T.c_type(dst)})0 : ({t} <= {lo_c} ? {mn} : ({t} >= "
                f"{hi_c} ? {mx} : ({T.c_type(dst)}){t})))"
            )
        return int_wrap(
            dst, f"(uint64_t)(int64_t){x}" if ks == "int" else f"(uint64_t){x}"
        )  # wraps

    return gen_elementwise(g, conv)


def gen_where(g: Gen) -> list[str]:
    return gen_elementwise(g, lambda v: f"({v[0]} ? {v[1]} : {v[2]})")


def plain_elementwise(registry: Registry, arity: int) -> list[str]:
    """The elementwise kernel ops of ``arity`` inputs and no attributes: in C each is one
    scalar expression (:func:`unary_expr`, :func:`binary_expr`)."""
    return [
        op.name
        for op in registry.ops()
        if op.category == "kernel"
        and op.elementwise
        and not op.attrs
        and op.min_inputs == op.max_inputs == arity
    ]

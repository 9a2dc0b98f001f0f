"""Elementwise kernels: unary and binary arithmetic, leaky_relu, clip, cast and where."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import Registry
from relaxc.ir.types import TensorType

from .. import dtypes as T
from .. import lowp

from .base import (
    Gen,
    ctype_of_domain,
    fmax_of,
    horner,
    int_wrap,
    scalar_formula,
    scalar_of,
    to_int,
    unsupported,
)


# ---------------------------------------------------------------------------------------
# The formulas of the plain elementwise ops: one entry per op (tinygrad's code_for_op).

Formula = Callable[[Gen, str, Sequence[str]], str]
"""``(g, dtype, operands) -> C expression``: one element of an op on ``dtype`` from its
operands' elements (each already in the compute domain: f16 as float)."""


@dataclass(frozen=True, slots=True)
class CFormula:
    """The C of one plain elementwise op (no attributes, one or two inputs): its expression
    on floating-point elements, on integer ones and on bools (stored as 0 or 1); None where
    the C target does not compute the op on that kind (the user's error says so)."""

    on_float: Formula | None
    on_int: Formula | None
    on_bool: Formula | None = None

    def expression(self, g: Gen, dtype: str, xs: Sequence[str]) -> str:
        """The C of one element of ``g``'s op on ``dtype`` (RxError where it has none)."""
        k = T.kind(dtype)
        if k == "bool":
            if self.on_bool is None:
                raise unsupported(g.spec, "bool arithmetic", g.loc)
            return self.on_bool(g, dtype, xs)
        formula = self.on_float if k == "float" else self.on_int
        if formula is None:
            raise unsupported(g.spec, loc=g.loc)
        return formula(g, dtype, xs)


def _record(g: Gen) -> str:
    """The op's scalar formula from its registry record (``OpDef.scalar``)."""
    formula = scalar_of(g)
    if formula is None:
        raise ValueError(f"op {g.spec.op} has no scalar formula on its record")
    return formula


def record_on_float(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    """The record's formula in the dtype (f16 in float): ``-x``; ``(a + b)``."""
    e = scalar_formula(_record(g), list(xs))
    return e if len(xs) == 1 else f"({e})"


def record_on_int(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    """The record's formula in unsigned 64 bits, then truncated: integers wrap."""
    return int_wrap(dtype, scalar_formula(_record(g), [f"(uint64_t){x}" for x in xs]))


def negate_int(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    return int_wrap(dtype, f"0u - (uint64_t){xs[0]}")


def libm(name: str) -> Formula:
    """``name`` of libm, in double, rounded to the dtype's compute domain."""
    return lambda g, dtype, xs: f"({ctype_of_domain(dtype)}){name}((double){xs[0]})"


def in_double(expr: str) -> Formula:
    """``expr`` over ``d`` (the operand as a double), rounded to the compute domain."""
    return lambda g, dtype, xs: f"({ctype_of_domain(dtype)})({expr.format(d=f'(double){xs[0]}')})"


def abs_int(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    x = xs[0]
    if T.kind(dtype) == "uint":
        return x
    return f"({x} < 0 ? {negate_int(g, dtype, xs)} : {x})"


def relu_float(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    x, ct = xs[0], ctype_of_domain(dtype)
    if dtype != "f16":  # one comparison: NaN stays, -0 gives +0 (numpy's maximum)
        return f"({x} <= 0 ? ({ct})0 : {x})"
    return f"({x} != {x} || {x} > 0 ? {x} : ({ct})0)"


def relu_int(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    return f"({xs[0]} > 0 ? {xs[0]} : ({T.c_type(dtype)})0)"


def erf_float(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    """numpy: erf in float64, rounded once to the dtype (f16 too: no detour via float)."""
    d = f"erf((double){xs[0]})"
    return d if dtype == "f16" else f"({ctype_of_domain(dtype)}){d}"


def gelu_float(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    """numpy: x / sqrt(2) is done in the input's precision, erf in float64."""
    x = xs[0]
    t = f"{x} / 1.4142135623730951" if dtype == "f64" else f"{x} / 1.41421356f"
    return f"({ctype_of_domain(dtype)})(0.5 * (double){x} * (1.0 + erf((double)({t}))))"


def divide_float(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    """A float division: no integer rule."""
    return f"({xs[0]} / {xs[1]})"


def divide_int(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    """Truncated toward zero; x / 0 is 0 (u64 in integers: its quotients do not fit a double)."""
    a, b = xs
    if dtype == "u64":
        return f"({b} == 0 ? (uint64_t)0 : {a} / {b})"
    q = f"trunc((double){a} / (double){b})"
    return f"({b} == 0 ? ({T.c_type(dtype)})0 : {to_int(g, dtype, q)})"


def nan_extremum(helper: str) -> Formula:
    """numpy's maximum (``fmaxnan``) or minimum (``fminnan``): NaN propagates."""
    return lambda g, dtype, xs: (
        f"({ctype_of_domain(dtype)}){g.h.use(fmax_of(dtype, helper))}({xs[0]}, {xs[1]})"
    )


def compare_pick(op: str) -> Formula:
    """The larger (``>``) or smaller (``<``) integer."""
    return lambda g, dtype, xs: f"({xs[0]} {op} {xs[1]} ? {xs[0]} : {xs[1]})"


def power_float(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    return f"({ctype_of_domain(dtype)})pow((double){xs[0]}, (double){xs[1]})"


def power_int(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    return to_int(g, dtype, f"pow((double){xs[0]}, (double){xs[1]})")


def rounded_once(dtype: str, double_expr: str) -> str:
    """A double's value in the compute domain of ``dtype``; f16 stays a double, which the
    store rounds to f16 once (numpy: float64, rounded once to the dtype)."""
    return double_expr if dtype == "f16" else f"({ctype_of_domain(dtype)})({double_expr})"


def double_formula(expr: str) -> Formula:
    """``expr`` over ``d`` (the operand as a double), rounded once (:func:`rounded_once`)."""
    return lambda g, dtype, xs: rounded_once(dtype, expr.format(d=f"((double){xs[0]})"))


SOFTPLUS = "({d} > 0 ? {d} + log1p(exp(-{d})) : log1p(exp({d})))"
"""log(1 + e ** d) without overflow (the numpy kernel's form)."""

GELU_TANH = "0.5 * {d} * (1.0 + tanh(0.7978845608028654 * ({d} + 0.044715 * {d} * {d} * {d})))"


def sign_float(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    """numpy's sign: NaN stays NaN, -0 gives +0."""
    x, ct = xs[0], ctype_of_domain(dtype)
    return f"({x} > 0 ? ({ct})1 : ({x} < 0 ? ({ct})-1 : ({x} == 0 ? ({ct})0 : {x})))"


def sign_int(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    x, ct = xs[0], T.c_type(dtype)
    if T.kind(dtype) == "uint":
        return f"({ct})({x} > 0)"
    return f"({ct})(({x} > 0) - ({x} < 0))"


def bitwise_not_int(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    return int_wrap(dtype, f"~(uint64_t){xs[0]}")


def prelu_float(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    """x * slope in the compute domain where x < 0 (f16: the product of two halves is exact
    in float, rounded once by the store)."""
    return f"({xs[0]} < 0 ? {xs[0]} * {xs[1]} : {xs[0]})"


def prelu_int(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    if T.kind(dtype) == "uint":  # never below 0 (the slope is read, for the compiler)
        return f"((void){xs[1]}, {xs[0]})"
    product = int_wrap(dtype, f"(uint64_t){xs[0]} * (uint64_t){xs[1]}")
    return f"({xs[0]} < 0 ? {product} : {xs[0]})"


def infix(op: str) -> Formula:
    """``(a op b)``: a comparison (a bool), or logic on bools."""
    return lambda g, dtype, xs: f"({xs[0]} {op} {xs[1]})"


def bitwise(op: str) -> Formula:
    """``a op b`` on the integers' bits (in unsigned 64 bits, truncated)."""
    return lambda g, dtype, xs: int_wrap(dtype, f"(uint64_t){xs[0]} {op} (uint64_t){xs[1]}")


def not_bool(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    return f"(uint8_t)!{xs[0]}"


def isnan_float(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    return f"({xs[0]} != {xs[0]})"


COMPARE = {
    "equal": "==",
    "less": "<",
    "greater": ">",
    "less_equal": "<=",
    "greater_equal": ">=",
}

FLOAT_MATH = {
    "reciprocal": "1.0 / {d}",
    "floor": "floor({d})",
    "ceil": "ceil({d})",
    "round": "rint({d})",
    "sin": "sin({d})",
    "cos": "cos({d})",
    "tan": "tan({d})",
    "asin": "asin({d})",
    "acos": "acos({d})",
    "atan": "atan({d})",
    "sinh": "sinh({d})",
    "cosh": "cosh({d})",
    "asinh": "asinh({d})",
    "acosh": "acosh({d})",
    "atanh": "atanh({d})",
    "softplus": SOFTPLUS,
    "softsign": "{d} / (1.0 + fabs({d}))",
    "mish": "{d} * tanh(" + SOFTPLUS + ")",
    "gelu_tanh": GELU_TANH,
}
"""The C of each unary float op of :data:`relaxc.ir.ops.elementwise.FLOAT_MATH` over the
operand ``{d}`` as a double."""


C_FORMULAS: dict[str, CFormula] = {
    # unary
    "negative": CFormula(record_on_float, negate_int),
    "abs": CFormula(libm("fabs"), abs_int),
    "exp": CFormula(libm("exp"), None),
    "log": CFormula(libm("log"), None),
    "sqrt": CFormula(libm("sqrt"), None),
    "rsqrt": CFormula(in_double("1.0 / sqrt({d})"), None),
    "tanh": CFormula(libm("tanh"), None),
    "sigmoid": CFormula(in_double("1.0 / (1.0 + exp(-{d}))"), None),
    "relu": CFormula(relu_float, relu_int),
    "gelu": CFormula(gelu_float, None),
    "silu": CFormula(in_double("{d} / (1.0 + exp(-{d}))"), None),
    "erf": CFormula(erf_float, None),
    # binary
    "add": CFormula(record_on_float, record_on_int),
    "subtract": CFormula(record_on_float, record_on_int),
    "multiply": CFormula(record_on_float, record_on_int),
    "divide": CFormula(divide_float, divide_int),
    "maximum": CFormula(nan_extremum("fmaxnan"), compare_pick(">")),
    "minimum": CFormula(nan_extremum("fminnan"), compare_pick("<")),
    "power": CFormula(power_float, power_int),
    "prelu": CFormula(prelu_float, prelu_int),
    "sign": CFormula(sign_float, sign_int),
    "bitwise_not": CFormula(None, bitwise_not_int),
    "logical_not": CFormula(None, None, not_bool),
    "isnan": CFormula(isnan_float, None),
    "logical_and": CFormula(None, None, infix("&&")),
    "logical_or": CFormula(None, None, infix("||")),
    "logical_xor": CFormula(None, None, infix("!=")),
    "bitwise_and": CFormula(None, bitwise("&")),
    "bitwise_or": CFormula(None, bitwise("|")),
    "bitwise_xor": CFormula(None, bitwise("^")),
    **{name: CFormula(infix(op), infix(op), infix(op)) for name, op in COMPARE.items()},
    **{name: CFormula(double_formula(expr), None) for name, expr in FLOAT_MATH.items()},
}
"""The C formula of every plain elementwise op of the registry (:func:`plain_elementwise`),
registered in the C kernel table as a :class:`FormulaKernel` each; an op with a ``scalar``
formula on its record takes it from there (:func:`record_on_float`, :func:`record_on_int`)."""


# -- hard_sigmoid and hard_swish ------------------------------------------------------------


def _register_clamp01() -> None:
    from ..helpers import HELPERS

    for name, ct, zero, one in (
        ("clamp01f", "float", "0.0f", "1.0f"),
        ("clamp01d", "double", "0.0", "1.0"),
    ):
        HELPERS[name] = (
            (),
            f"""\
/* t clamped to [0, 1]; NaN stays NaN (the numpy kernels' where(t < 0, 0, where(t > 1, 1, t))). */
static {ct} {{p}}_{name}({ct} t)
{{{{
    return t < {zero} ? {zero} : (t > {one} ? {one} : t);
}}}}""",
        )


_register_clamp01()


def _hard_sigmoid_expr(g: Gen, dtype: str, x: str, alpha: float, beta: float) -> str:
    """clamp01(x * alpha + beta) in the compute domain (f16 as float), alpha and beta
    rounded to it (the numpy kernel's :func:`relaxc.ir.ops.elementwise.hard_sigmoid_of`)."""
    lit = "f64" if dtype == "f64" else "f32"
    with np.errstate(over="ignore"):
        a = float(alpha) if lit == "f64" else float(np.float32(alpha))
        b = float(beta) if lit == "f64" else float(np.float32(beta))
    clamp = g.h.use("clamp01d" if lit == "f64" else "clamp01f")
    return f"{clamp}({x} * {T.float_literal(a, lit)} + {T.float_literal(b, lit)})"


def gen_hard_sigmoid(g: Gen) -> list[str]:
    dtype = g.spec.ins[0].dtype
    a = g.spec.attr
    return gen_elementwise(g, lambda v: _hard_sigmoid_expr(g, dtype, v[0], a["alpha"], a["beta"]))


def hard_swish_float(g: Gen, dtype: str, xs: Sequence[str]) -> str:
    """x * hard_sigmoid(x; 1/6, 0.5) in the compute domain."""
    return f"({xs[0]} * {_hard_sigmoid_expr(g, dtype, xs[0], 1.0 / 6.0, 0.5)})"


HARD_FORMULAS: dict[str, CFormula] = {"hard_swish": CFormula(hard_swish_float, None)}
"""The C formulas of the hard activations without attributes (merged into C_FORMULAS)."""

C_FORMULAS.update(HARD_FORMULAS)


def formula_problems(registry: Registry, formulas: Mapping[str, CFormula]) -> list[str]:
    """Where ``formulas`` and the records of ``registry`` disagree: an entry for an op that is
    not a plain elementwise op; an op whose record has a ``scalar`` formula its entry does
    not compute floats with, or an entry reading a formula the record does not have. An op
    without an entry is left to the table's coverage check
    (:meth:`~relaxc.ir.backends.BackendTable.check_covers`)."""
    plain = plain_elementwise(registry)
    problems = []
    stale = sorted(set(formulas) - set(plain))
    if stale:
        names = ", ".join(stale)
        problems.append(f"C formulas for ops that are not plain elementwise ones: {names}")
    for name in plain:
        f, op = formulas.get(name), registry.get(name)
        if f is None or op is None:
            continue
        reads_record = {f.on_float, f.on_int} & {record_on_float, record_on_int}
        if op.scalar is None and reads_record:
            problems.append(f"{name}: its C formula reads a scalar formula its record lacks")
        if op.scalar is not None and f.on_float is not record_on_float:
            problems.append(
                f"{name}: its record's scalar formula {op.scalar!r} is not its C formula on floats"
            )
    return problems


@dataclass(frozen=True, slots=True)
class FormulaKernel:
    """The C kernel generator of a plain elementwise op: :func:`gen_elementwise` over its
    :class:`CFormula`."""

    formula: CFormula

    def __call__(self, g: Gen) -> list[str]:
        dtype = g.spec.ins[0].dtype
        return gen_elementwise(g, lambda v: self.formula.expression(g, dtype, v))


# ---------------------------------------------------------------------------------------
# Elementwise ops.


BLOCK = 16
"""The fewest elements per block (see :func:`block_macro`)."""


def _register_block() -> None:
    from ..helpers import HELPERS

    HELPERS["ew_block"] = (
        (),
        """\
/* Elements an elementwise loop computes per block: each block reads its inputs into a local
 * array, then writes the output, so an output computed over its input (the same pointer)
 * stays correct and the compiler needs no run-time overlap check (GCC's -O2 cost model
 * refuses those). 16 keeps the block in registers at -O2; with AVX (-march, used with -O3)
 * 64, since GCC's -O3 would otherwise vectorize across blocks of 16, with shuffles. */
#if defined(__AVX__)
#define {p}_ew_block 64
#else
#define {p}_ew_block 16
#endif""",
    )


_register_block()


def blocked_loop(
    g: Gen, var: str, extent: str, body: Callable[[str], str], store: Callable[[str], str], ct: str
) -> None:
    """``for var < extent: store(j) = body(j)`` in blocks of ``{p}_ew_block`` (then 16, then
    one by one): a block computes ``body`` into a local array, then stores it. ``body(j)``
    and ``store(j)`` are C expressions of the index ``j``."""
    blk = g.h.use("ew_block")
    n_static = int(extent) if extent.isdigit() else None
    g.emit(f"{var} = 0;")
    for size in (blk, str(BLOCK)):
        if n_static is not None and n_static < BLOCK:
            break
        with g.block(f"for (; {var} + {size} <= {extent}; {var} += {size})"):
            g.emit(f"{ct} t[{size}];")
            with g.loop("v", size):
                g.emit(f"t[v] = {body(f'{var} + v')};")
            with g.loop("v", size):
                g.emit(f"{store(f'{var} + v')} = t[v];")
        if n_static is not None and n_static % BLOCK == 0 and size == str(BLOCK):
            return
    if n_static is None or n_static % BLOCK or n_static == 0:  # (0: keeps the names used)
        with g.block(f"for (; {var} < {extent}; ++{var})"):
            g.emit(f"{store(var)} = {body(var)};")


def uses_block_var(extent: str) -> bool:
    """Whether :func:`blocked_loop` over ``extent`` declares the block index ``v``."""
    return not extent.isdigit() or int(extent) >= BLOCK


def broadcast_groups(g: Gen, ins: tuple[TensorType, ...], out: TensorType) -> list[tuple]:
    """The output's dims as loops: dims of extent 1 dropped, neighbours merged when every
    input is read the same way along both (all of it, or broadcast). Each group is
    ``(extent, per input: True if it runs along the group)``, outermost first."""
    n = len(out.shape)
    groups: list[tuple[list[D.Dim], tuple[bool, ...]]] = []
    for j, d in enumerate(out.shape):
        if isinstance(d, int) and d == 1:
            continue
        pat = []
        for t in ins:
            off = n - len(t.shape)
            pat.append(j >= off and not (t.shape[j - off] == 1))
        if groups and groups[-1][1] == tuple(pat):
            groups[-1][0].append(d)
        else:
            groups.append(([d], tuple(pat)))
    return [(g.prod([g.dim(d) for d in ds]), pat) for ds, pat in groups]


def gen_elementwise(g: Gen, scalar: Callable[[list[str]], str]) -> list[str]:
    """``y0 = scalar(inputs)`` over the broadcast output shape, in blocks of BLOCK elements
    along the innermost (merged) dim."""
    s = g.spec
    out = s.outs[0]
    ins = s.ins
    groups = broadcast_groups(g, ins, out)
    if not groups:  # one element
        vals = [g.load(t.dtype, f"{x}[0]") for t, x in zip(ins, g.x)]
        g.emit(f"y0[0] = {g.store(out.dtype, scalar(vals))};")
        return []
    outer, (inner, inner_pat) = groups[:-1], groups[-1]
    o_vars = [g.tmp("o") for _ in outer]
    extents = [e for e, _ in groups]
    ct = T.c_type(out.dtype)

    def base(k: int | None) -> str:
        """The index of input k (or the output: None) at the start of the inner run."""
        if k is None:
            return horner(o_vars + ["0"], extents)
        idx = [v for v, (_, pat) in zip(o_vars, outer) if pat[k]]
        ext = [e for e, pat in outer if pat[k]]
        if inner_pat[k]:
            idx, ext = idx + ["0"], ext + [inner]
        return horner(idx, ext) if idx else "0"

    def at(b: str, j: str) -> str:
        return j if b == "0" else f"{b} + {j}"

    def value(j: str) -> str:
        vals = [
            g.load(t.dtype, f"{x}[{at(base(k), j) if inner_pat[k] else base(k)}]")
            for k, (t, x) in enumerate(zip(ins, g.x))
        ]
        return g.store(out.dtype, scalar(vals))

    def inner_loops() -> None:
        ob = base(None)
        blocked_loop(g, "i", inner, value, lambda j: f"y0[{at(ob, j)}]", ct)

    def rec(k: int) -> None:
        if k == len(outer):
            inner_loops()
            return
        with g.loop(o_vars[k], outer[k][0]):
            rec(k + 1)

    rec(0)
    uses_v = uses_block_var(inner)
    return [f"int64_t {', '.join(o_vars + ['i'] + (['v'] if uses_v else []))};"]


def gen_leaky_relu(g: Gen) -> list[str]:
    """x >= 0 ? x : alpha * x, in the compute domain (f16 as float), alpha rounded to it."""
    dtype = g.spec.ins[0].dtype
    lit = "f64" if dtype == "f64" else "f32"
    with np.errstate(over="ignore"):  # a huge alpha is inf in f32, as in the numpy kernel
        a = float(g.spec.attr["alpha"]) if lit == "f64" else float(np.float32(g.spec.attr["alpha"]))
    alpha = T.float_literal(a, lit)
    zero = "0.0" if lit == "f64" else "0.0f"
    return gen_elementwise(g, lambda v: f"({v[0]} >= {zero} ? {v[0]} : {v[0]} * {alpha})")


def _double_attr(g: Gen, name: str) -> str:
    return f"({T.float_literal(float(g.spec.attr[name]), 'f64')})"


def _activation(expr: Callable[[Gen], str]) -> Callable[[Gen], list[str]]:
    """The generator of an activation with attributes: ``expr(g)`` over ``{d}`` (the operand
    as a double), rounded once to a float dtype, or truncated to an integer one as the numpy
    kernel's float_to_int does (shrink)."""

    def gen(g: Gen) -> list[str]:
        dtype = g.spec.ins[0].dtype
        e = expr(g)

        def value(v: list[str]) -> str:
            d = e.format(d=f"((double){v[0]})")
            return rounded_once(dtype, d) if T.kind(dtype) == "float" else to_int(g, dtype, d)

        return gen_elementwise(g, value)

    return gen


gen_elu = _activation(lambda g: f"({{d}} < 0 ? {_double_attr(g, 'alpha')} * expm1({{d}}) : {{d}})")
gen_selu = _activation(
    lambda g: (
        f"{_double_attr(g, 'gamma')} * ({{d}} > 0 ? {{d}} : "
        f"{_double_attr(g, 'alpha')} * expm1({{d}}))"
    )
)
gen_celu = _activation(
    lambda g: (
        f"({{d}} != {{d}} ? {{d}} : {{d}} > 0 ? {{d}} : 0.0 + "
        f"{_double_attr(g, 'alpha')} * expm1({{d}} / {_double_attr(g, 'alpha')}))"
    )
)
gen_thresholded_relu = _activation(lambda g: f"({{d}} > {_double_attr(g, 'alpha')} ? {{d}} : 0.0)")
gen_shrink = _activation(
    lambda g: (
        f"({{d}} < -{_double_attr(g, 'lambd')} ? {{d}} + {_double_attr(g, 'bias')} : "
        f"({{d}} > {_double_attr(g, 'lambd')} ? {{d}} - {_double_attr(g, 'bias')} : 0.0))"
    )
)


def gen_isinf(g: Gen) -> list[str]:
    pos, neg = g.spec.attr["detect_positive"], g.spec.attr["detect_negative"]

    def value(v: list[str]) -> str:
        x = f"(double){v[0]}"
        tests = ([f"{x} == INFINITY"] if pos else []) + ([f"{x} == -INFINITY"] if neg else [])
        return f"({' || '.join(tests)})" if tests else f"((void){v[0]}, 0)"  # (reads x)

    return gen_elementwise(g, value)


def gen_mod(g: Gen) -> list[str]:
    """numpy's fmod (the dividend's sign) or mod (the divisor's, on floats through the
    floorfmod helper); an integer remainder by 0
    (or by -1, which C leaves undefined at the minimum) is 0."""
    dtype = g.spec.ins[0].dtype
    fmod = g.spec.attr["fmod"]
    k = T.kind(dtype)
    ct = T.c_type(dtype)
    if k == "bool":
        raise unsupported(g.spec, loc=g.loc)
    if k == "float":
        fn = "fmod" if fmod else g.h.use("floorfmod")
        return gen_elementwise(
            g, lambda v: rounded_once(dtype, f"{fn}((double){v[0]}, (double){v[1]})")
        )

    def value(v: list[str]) -> str:
        a, b = v
        if k == "uint":
            return f"({b} == 0 ? ({ct})0 : ({ct})({a} % {b}))"
        r = f"({a} % {b})"
        if not fmod:  # the divisor's sign: a remainder of the other sign moves by b
            r = f"({r} != 0 && (({r} < 0) != ({b} < 0)) ? {r} + {b} : {r})"
        return f"({b} == 0 || {b} == -1 ? ({ct})0 : ({ct}){r})"

    return gen_elementwise(g, value)


def gen_bit_shift(g: Gen) -> list[str]:
    """x << s or x >> s as the numpy kernel: a left shift in unsigned 64 bits, truncated; a
    right shift of a signed x through its complement (``~(~x >> s)`` for a negative x: only
    non-negative values are shifted right, which C defines); a shift out of [0, width) is
    the sign extension (-1 right of a negative x, else 0)."""
    dtype = g.spec.ins[0].dtype
    bits = 8 * T.nbytes(dtype)
    left = g.spec.attr["direction"] == "left"
    ct = T.c_type(dtype)
    signed = T.DTYPES[dtype].numpy is not None and np.dtype(T.DTYPES[dtype].numpy).kind == "i"

    def element(v: Sequence[str]) -> str:
        x, s = v
        out = f"{s} >= {bits}" + (f" || {s} < 0" if signed else "")
        if left:
            return f"(({out}) ? ({ct})0 : {int_wrap(dtype, f'(uint64_t){x} << {s}')})"
        if not signed:
            return f"(({out}) ? ({ct})0 : ({ct})({x} >> {s}))"
        fill = f"({x} < 0 ? ({ct})-1 : ({ct})0)"
        wide = f"(int64_t){x}"
        shifted = f"({x} < 0 ? ~(~{wide} >> {s}) : {wide} >> {s})"
        return f"(({out}) ? {fill} : ({ct}){shifted})"

    return gen_elementwise(g, element)


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
        if ks == "float" and dst in lowp.INTS:  # as ml_dtypes: out of range (and nan) -> 0
            lo, hi = lowp.int_range(dst)
            t = f"trunc((double){x})"
            return f"({t} >= {lo}.0 && {t} <= {hi}.0 ? (int64_t){t} : 0)"
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


def plain_elementwise(registry: Registry) -> list[str]:
    """The elementwise kernel ops of one or two inputs and no attributes: in C each is one
    scalar expression, its entry in :data:`C_FORMULAS`."""
    return [
        op.name
        for op in registry.ops()
        if op.category == "kernel"
        and op.elementwise
        and not op.attrs
        and op.min_inputs == op.max_inputs
        and op.min_inputs in (1, 2)
    ]

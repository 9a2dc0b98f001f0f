"""C kernels: one specialised C function per kernel-op instance (op, attributes, types).

Each kernel computes exactly what the op's numpy kernel in :mod:`relaxc.ir.ops` computes:
floating-point nn ops, reductions and normalizations accumulate in ``double`` (the numpy
kernels compute in float64 and cast back), ``f32`` elementwise arithmetic is done in
``float`` like numpy, integers wrap (arithmetic is done in unsigned 64 bits, never
undefined), and every special case of the reference kernels (integer division by zero,
float-to-int casts, NaN propagation of ``maximum`` and ``max_pool2d``, ``take`` clipping
its indices) is mirrored.

A kernel's signature is ``static void NAME(const T *x0, ..., T *y0, ..., int64_t d_a, ...)``:
inputs, outputs, then the value of each symbolic dim its types use (sorted by name).
Shapes are baked in; symbolic dims are read from those parameters. An op or dtype this file
does not handle is an :class:`RxError` naming it: the C target never emits a guess.

What an op *is* (float-only, elementwise, its scalar formula, in-place safety) is read from its
record in :data:`relaxc.ir.ops.REGISTRY`; what this file adds is :data:`C_KERNELS`, the C
generator of each kernel op (or the reason the C target refuses it), checked against the
registry when the module is imported.
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.backends import BackendTable
from relaxc.ir.diagnostics import Loc, RxError
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpDef, Registry
from relaxc.ir.types import TensorType

from . import dtypes as T
from .helpers import Helpers
from .names import Scope

INT_KINDS = ("int", "uint")


@dataclass(frozen=True)
class Spec:
    """One kernel-op instance: the op, its checked attributes, and its tensor types."""

    op: str
    attrs: tuple[tuple[str, Any], ...]
    ins: tuple[TensorType, ...]
    outs: tuple[TensorType, ...]

    @property
    def attr(self) -> dict[str, Any]:
        return dict(self.attrs)

    def dims(self) -> list[str]:
        """The symbolic dim names the kernel needs, sorted."""
        names: set[str] = set()
        for t in self.ins + self.outs:
            for d in t.shape:
                names |= D.free_vars(d)
        return sorted(names)


def unsupported(spec: Spec, why: str = "", loc: Loc | None = None) -> RxError:
    dtypes = sorted({t.dtype for t in spec.ins + spec.outs})
    detail = f": {why}" if why else ""
    return RxError(
        f"the C target does not support {spec.op} on {', '.join(dtypes) or 'no tensors'}{detail}",
        loc,
    )


class DimC:
    """Symbolic dims as C ``int64_t`` expressions over named variables."""

    def __init__(self, names: dict[str, str], helpers: Helpers):
        self.names = names
        self.helpers = helpers

    def __call__(self, d: D.Dim) -> str:
        if isinstance(d, int):
            return T.int_literal(d)
        if isinstance(d, D.Sym):
            return self.names[d.name]
        if isinstance(d, D.DimCall):
            fn = self.helpers.use("max64" if d.func == "max" else "min64")
            out = self(d.args[0])
            for a in d.args[1:]:
                out = f"{fn}({out}, {self(a)})"
            return out
        a, b = self(d.lhs), self(d.rhs)
        if d.op == "/":
            return f"{self.helpers.use('floordiv')}({a}, {b})"
        if d.op == "%":
            return f"{self.helpers.use('floormod')}({a}, {b})"
        return f"({a} {d.op} {b})"


class Gen:
    """Builds the body of one kernel function."""

    def __init__(self, spec: Spec, fname: str, helpers: Helpers, loc: Loc | None = None):
        self.spec = spec
        self.op: OpDef | None = REGISTRY.get(spec.op)
        self.fname = fname
        self.h = helpers
        self.loc = loc
        self.scope = Scope()
        self.dimvar = {n: self.scope.name("d_", n) for n in spec.dims()}
        self.dim = DimC(self.dimvar, helpers)
        self.lines: list[str] = []
        self.depth = 1
        self.counter = 0
        self.x = [f"x{i}" for i in range(len(spec.ins))]
        self.y = [f"y{i}" for i in range(len(spec.outs))]

    # -- text -----------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    @contextmanager
    def block(self, head: str) -> Iterator[None]:
        self.emit(head + " {")
        self.depth += 1
        yield
        self.depth -= 1
        self.emit("}")

    @contextmanager
    def loop(self, var: str, extent: str, start: str = "0") -> Iterator[None]:
        with self.block(f"for ({var} = {start}; {var} < {extent}; ++{var})"):
            yield

    def tmp(self, base: str) -> str:
        self.counter += 1
        return f"{base}{self.counter}"

    def shape(self, t: TensorType) -> list[str]:
        return [self.dim(d) for d in t.shape]

    def numel(self, t: TensorType) -> str:
        return self.dim(D.product(t.shape)) if t.shape else "1"

    def prod(self, exprs: list[str]) -> str:
        lits = [e for e in exprs if e.lstrip("-").isdigit()]
        syms = [e for e in exprs if not e.lstrip("-").isdigit()]
        k = math.prod(int(e) for e in lits)
        if k == 0:
            return "0"
        parts = ([str(k)] if k != 1 or not syms else []) + syms
        return " * ".join(parts) if len(parts) > 1 else parts[0]

    def signature(self) -> str:
        s = self.spec
        params = [f"const {T.c_type(t.dtype)} *{x}" for t, x in zip(s.ins, self.x)]
        params += [f"{T.c_type(t.dtype)} *{y}" for t, y in zip(s.outs, self.y)]
        params += [f"int64_t {self.dimvar[n]}" for n in s.dims()]
        return f"static void {self.fname}({', '.join(params) or 'void'})"

    def render(self, decls: list[str]) -> str:
        import re

        body = ["    " + d for d in decls]
        text = "\n".join(self.lines)
        body += [
            f"    (void){v};" for v in self.dimvar.values() if not re.search(rf"\b{v}\b", text)
        ]
        return self.signature() + "\n{\n" + "\n".join(body + self.lines) + "\n}"

    # -- values ---------------------------------------------------------------------------
    def load(self, dtype: str, expr: str) -> str:
        """An element in its compute domain (f16 as float)."""
        return f"{self.h.use('h2f')}({expr})" if dtype == "f16" else expr

    def store(self, dtype: str, value: str) -> str:
        """A compute-domain value converted to the storage type of ``dtype``."""
        if dtype == "f16":
            return f"{self.h.use('f2h')}((double)({value}))"
        return f"({T.c_type(dtype)})({value})"


# ---------------------------------------------------------------------------------------
# Index helpers.


def horner(idx: list[str], extents: list[str]) -> str:
    """The row-major linear index of ``idx`` in a tensor of ``extents`` ("0" entries skip)."""
    out = ""
    for i, (v, e) in enumerate(zip(idx, extents)):
        if not out:
            out = v if v != "0" else ""
            continue
        out = f"({out}) * {e}" if out else ""
        if v != "0":
            out = f"{out} + {v}" if out else v
    return out or "0"


def broadcast_index(g: Gen, t: TensorType, out: TensorType, loop_vars: list[str]) -> str:
    """Index into ``t`` (numpy-broadcast to ``out``) at the output position ``loop_vars``."""
    off = len(out.shape) - len(t.shape)
    idx, ext = [], []
    for j, d in enumerate(t.shape):
        o = out.shape[j + off]
        broadcast = d == 1 and not (isinstance(o, int) and o == 1)
        idx.append("0" if broadcast else loop_vars[j + off])
        ext.append(g.dim(d))
    return horner(idx, ext)


def same_shape(a: TensorType, b: TensorType) -> bool:
    return len(a.shape) == len(b.shape) and all(
        D.dims_equal(x, y) for x, y in zip(a.shape, b.shape)
    )


def loop_nest(
    g: Gen, extents: list[str], body: Callable[[list[str]], None], prefix: str = "i"
) -> list[str]:
    """Nested loops over ``extents`` calling ``body(vars)`` innermost; returns the vars."""
    vars_ = [g.tmp(prefix) for _ in extents]

    def rec(k: int) -> None:
        if k == len(extents):
            body(vars_)
            return
        with g.loop(vars_[k], extents[k]):
            rec(k + 1)

    rec(0)
    return vars_


# ---------------------------------------------------------------------------------------
# Scalar expressions.


def _float_kind(dtype: str) -> bool:
    return T.kind(dtype) == "float"


def _ctype_of_domain(dtype: str) -> str:
    """The C type of a value in the compute domain of ``dtype`` (f16 computes in float)."""
    return "float" if dtype == "f16" else T.c_type(dtype)


def _int_wrap(dtype: str, expr: str) -> str:
    return f"({T.c_type(dtype)})({expr})"


def _fmax(dtype: str, name: str = "fmaxnan") -> str:
    """The helper for numpy's maximum (or minimum) on ``dtype``: on a tie of -0 and +0 numpy
    gives the second operand for f32 and f64 but the first for f16."""
    return name + "_h" if dtype == "f16" else name


def _to_int(g: Gen, dtype: str, double_expr: str) -> str:
    """A double converted to integer ``dtype`` the way numpy's astype does on x86."""
    bits = 8 * T.nbytes(dtype)
    # Through int32 for every type of 8 or 16 bits (u8 and u16 too: 3e9 becomes 0, not
    # 3e9 mod 2**16) and for i32; through int64 for u32 and i64.
    if bits <= 16 or (T.kind(dtype) == "int" and bits <= 32):
        return _int_wrap(dtype, f"{g.h.use('f2i32')}({double_expr})")
    return _int_wrap(dtype, f"{g.h.use('f2i64')}({double_expr})")


def scalar_formula(formula: str, args: list[str]) -> str:
    """An op's scalar formula (over ``x0``, ``x1``, ...) with each ``xi`` replaced by
    ``args[i]``."""
    return re.sub(r"\bx(\d+)\b", lambda m: args[int(m[1])], formula)


def _scalar_of(g: Gen) -> str | None:
    return g.op.scalar if g.op is not None else None


def unary_expr(g: Gen, op: str, dtype: str, x: str) -> str:
    k = T.kind(dtype)
    if k == "bool":
        raise unsupported(g.spec, "bool arithmetic", g.loc)
    formula = _scalar_of(g)
    if k == "float":
        ct = _ctype_of_domain(dtype)
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
        return _int_wrap(dtype, f"0u - (uint64_t){x}")
    if op == "abs":
        if k == "uint":
            return x
        return f"({x} < 0 ? {_int_wrap(dtype, f'0u - (uint64_t){x}')} : {x})"
    if op == "relu":
        return f"({x} > 0 ? {x} : ({ct})0)"
    raise unsupported(g.spec, loc=g.loc)


def binary_expr(g: Gen, op: str, dtype: str, a: str, b: str) -> str:
    k = T.kind(dtype)
    if k == "bool":
        raise unsupported(g.spec, "bool arithmetic", g.loc)
    formula = _scalar_of(g)
    if k == "float":
        ct = _ctype_of_domain(dtype)
        if formula is not None:  # add, subtract, multiply: computed in the dtype (f16 in float)
            return f"({scalar_formula(formula, [a, b])})"
        if op == "divide":  # a float division: no integer rule
            return f"({a} / {b})"
        if op == "maximum":
            return f"({ct}){g.h.use(_fmax(dtype))}({a}, {b})"
        if op == "minimum":
            return f"({ct}){g.h.use(_fmax(dtype, 'fminnan'))}({a}, {b})"
        if op == "power":
            return f"({ct})pow((double){a}, (double){b})"
        raise unsupported(g.spec, loc=g.loc)
    if formula is not None:  # integers wrap: the formula in unsigned 64 bits, then truncated
        return _int_wrap(dtype, scalar_formula(formula, [f"(uint64_t){a}", f"(uint64_t){b}"]))
    if op == "maximum":
        return f"({a} > {b} ? {a} : {b})"
    if op == "minimum":
        return f"({a} < {b} ? {a} : {b})"
    if op == "divide":
        q = f"trunc((double){a} / (double){b})"
        return f"({b} == 0 ? ({T.c_type(dtype)})0 : {_to_int(g, dtype, q)})"
    if op == "power":
        return _to_int(g, dtype, f"pow((double){a}, (double){b})")
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
        return _int_wrap(
            dst, f"(uint64_t)(int64_t){x}" if ks == "int" else f"(uint64_t){x}"
        )  # wraps

    return gen_elementwise(g, conv)


def gen_where(g: Gen) -> list[str]:
    return gen_elementwise(g, lambda v: f"({v[0]} ? {v[1]} : {v[2]})")


# ---------------------------------------------------------------------------------------
# Factories and data movement.


def gen_fill(g: Gen) -> list[str]:
    out = g.spec.outs[0]
    op = g.spec.op
    if op == "zeros":
        v = np.zeros((), np.dtype(T.DTYPES[out.dtype].numpy))
    elif op == "ones":
        v = np.ones((), np.dtype(T.DTYPES[out.dtype].numpy))
    else:
        fv = g.spec.attr["fill_value"]
        dt = np.dtype(T.DTYPES[out.dtype].numpy)
        v = np.full((), int(fv) if dt.kind in "iub" else fv, dtype=dt)
    lit = T.element_literal(v[()], out.dtype)
    with g.loop("i", g.numel(out)):
        g.emit(f"y0[i] = {lit};")
    return ["int64_t i;"]


def _outer_inner(g: Gen, t: TensorType, axis: int) -> tuple[str, str, str]:
    sh = g.shape(t)
    return (
        g.prod(sh[:axis]) if axis else "1",
        sh[axis],
        g.prod(sh[axis + 1 :]) if axis + 1 < len(sh) else "1",
    )


def gen_concat(g: Gen) -> list[str]:
    out = g.spec.outs[0]
    axis = g.spec.attr["axis"] % len(out.shape)
    outer, total, inner = _outer_inner(g, out, axis)
    offset = "0"
    for t, x in zip(g.spec.ins, g.x):
        _, length, _ = _outer_inner(g, t, axis)
        block = g.prod([length, inner])
        with g.loop("o", outer):
            with g.loop("j", block):
                g.emit(f"y0[(o * {total} + {offset}) * {inner} + j] = {x}[o * {block} + j];")
        offset = length if offset == "0" else f"{offset} + {length}"
    return ["int64_t o, j;"]


def gen_split(g: Gen) -> list[str]:
    x = g.spec.ins[0]
    axis = g.spec.attr["axis"] % len(x.shape)
    outer, total, inner = _outer_inner(g, x, axis)
    offset = "0"
    for t, y in zip(g.spec.outs, g.y):
        _, length, _ = _outer_inner(g, t, axis)
        block = g.prod([length, inner])
        with g.loop("o", outer):
            with g.loop("j", block):
                g.emit(f"{y}[o * {block} + j] = x0[(o * {total} + {offset}) * {inner} + j];")
        offset = length if offset == "0" else f"({offset} + {length})"
    return ["int64_t o, j;"]


def _perm(axes: Any, ndim: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(reversed(range(ndim)))
    return tuple(a % ndim for a in axes)


def gen_transpose(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    perm = _perm(g.spec.attr["axes"], len(x.shape))
    if not x.shape:
        g.emit("y0[0] = x0[0];")
        return []
    xs = g.shape(x)

    def body(vars_: list[str]) -> None:
        src = [""] * len(perm)
        for out_axis, in_axis in enumerate(perm):
            src[in_axis] = vars_[out_axis]
        g.emit(f"y0[{horner(vars_, g.shape(out))}] = x0[{horner(src, xs)}];")

    vars_ = loop_nest(g, g.shape(out), body)
    return [f"int64_t {', '.join(vars_)};"]


def gen_strided_slice(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    a = g.spec.attr
    n = len(a["begin"])
    strides = a["strides"] if a["strides"] is not None else (1,) * n
    axes = a["axes"] if a["axes"] is not None else tuple(range(n))
    sl: dict[int, tuple[int, int]] = {}
    for ax, b, e, st in zip(axes, a["begin"], a["end"], strides):
        ax %= len(x.shape)
        d = x.shape[ax]
        assert isinstance(d, int)
        r = range(d)[slice(b, e, st)]
        sl[ax] = (r.start, r.step)
    if not out.shape:
        g.emit("y0[0] = x0[0];")
        return []
    xs = g.shape(x)

    def body(vars_: list[str]) -> None:
        src = []
        for ax, v in enumerate(vars_):
            if ax in sl:
                start, step = sl[ax]
                src.append(f"({start} + {v} * {step})" if (start, step) != (0, 1) else v)
            else:
                src.append(v)
        g.emit(f"y0[{horner(vars_, g.shape(out))}] = x0[{horner(src, xs)}];")

    vars_ = loop_nest(g, g.shape(out), body)
    return [f"int64_t {', '.join(vars_)};"]


def gen_take(g: Gen) -> list[str]:
    data, idx = g.spec.ins
    axis = g.spec.attr["axis"] % len(data.shape)
    outer, length, inner = _outer_inner(g, data, axis)
    count = g.numel(idx)

    def gather() -> None:
        with g.loop("o", outer):
            with g.loop("j", count):
                g.emit("k = (int64_t)x1[j];")
                g.emit("if (k < 0) k = 0;")
                g.emit(f"if (k > {length} - 1) k = {length} - 1;")
                with g.loop("m", inner):
                    g.emit(
                        f"y0[(o * {count} + j) * {inner} + m] = x0[(o * {length} + k) "
                        f"* {inner} + m];"
                    )

    if length.isdigit() and int(length) > 0:
        gather()
    else:
        # A symbolic axis may be empty in a run: clipping would index -1 (the interpreter
        # refuses that run; here nothing is read and the result is zeros).
        with g.block(f"if ({length} > 0)"):
            gather()
        with g.block("else"):
            with g.loop("j", g.numel(g.spec.outs[0])):
                g.emit("y0[j] = 0;")
    return ["int64_t o, j, m, k;"]


# ---------------------------------------------------------------------------------------
# Reductions.


def _acc_type(dtype: str) -> str:
    k = T.kind(dtype)
    return "double" if k == "float" else ("uint64_t" if k in INT_KINDS else "")


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
    acc_t = "double" if k == "float" else ("uint64_t" if op == "sum" else _ctype_of_domain(x.dtype))
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
                g.emit(
                    f"acc = first ? (double){val} : {g.h.use(_fmax(x.dtype))}(acc, (double){val});"
                )
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
            f"{g.store(out.dtype, result) if k == 'float' else _int_wrap(out.dtype, result)};"
        )

    def nest(extents: list[str], vars_: list[str], body: Callable[[], None], i: int = 0) -> None:
        if i == len(extents):
            body()
            return
        with g.loop(vars_[i], extents[i]):
            nest(extents, vars_, body, i + 1)

    nest(kept_ext, o_vars, row)
    return decls


# ---------------------------------------------------------------------------------------
# Linear algebra.


def _widen(k: str, v: str) -> str:
    """``v`` as a value of the accumulator of dtype kind ``k``."""
    if k == "float":
        return f"(double){v}"
    return f"(uint64_t){v}" if k == "uint" else f"(uint64_t)(int64_t){v}"


def _finish(g: Gen, dtype: str, value: str) -> str:
    return g.store(dtype, value) if T.kind(dtype) == "float" else _int_wrap(dtype, value)


def _check_numeric(g: Gen) -> str:
    k = T.kind(g.spec.ins[0].dtype)
    if k == "bool":
        raise unsupported(g.spec, loc=g.loc)
    return k


TILE = 8
"""Output columns matmul and dense compute together (independent accumulators; each output
still sums over k in order, so the numbers do not change)."""


def gen_matmul(g: Gen) -> list[str]:
    a, b = g.spec.ins
    out = g.spec.outs[0]
    k = _check_numeric(g)
    os_, as_, _bs = g.shape(out), g.shape(a), g.shape(b)
    batch = os_[:-2]
    M, N, K = os_[-2], os_[-1], as_[-1]
    acc = "double" if k == "float" else "uint64_t"
    decls = ["int64_t m, n0, t, kk;", f"{acc} acc[{TILE}];"]

    def body(bv: list[str]) -> None:
        # batch offsets (numpy broadcasting of the batch dims)
        ab = TensorType(a.shape[:-2], a.dtype)
        bb = TensorType(b.shape[:-2], b.dtype)
        ob = TensorType(out.shape[:-2], out.dtype)
        a_off = broadcast_index(g, ab, ob, bv) if ab.shape else "0"
        b_off = broadcast_index(g, bb, ob, bv) if bb.shape else "0"
        o_off = horner(bv, batch) if bv else "0"
        with g.loop("m", M):
            with g.block(f"for (n0 = 0; n0 < {N}; n0 += {TILE})"):
                g.emit(f"int64_t nt = {N} - n0 < {TILE} ? {N} - n0 : {TILE};")
                with g.loop("t", "nt"):
                    g.emit("acc[t] = 0;")
                with g.loop("kk", K):
                    av = g.load(a.dtype, f"x0[(({a_off}) * {M} + m) * {K} + kk]")
                    g.emit(f"{acc} av = {_widen(k, av)};")
                    with g.loop("t", "nt"):
                        bvv = g.load(b.dtype, f"x1[(({b_off}) * {K} + kk) * {N} + n0 + t]")
                        g.emit(f"acc[t] += av * {_widen(k, bvv)};")
                with g.loop("t", "nt"):
                    g.emit(
                        f"y0[(({o_off}) * {M} + m) * {N} + n0 + t] = "
                        f"{_finish(g, out.dtype, 'acc[t]')};"
                    )

    vars_ = loop_nest(g, batch, body, "b")
    if vars_:
        decls.append(f"int64_t {', '.join(vars_)};")
    return decls


def gen_dense(g: Gen) -> list[str]:
    x, w = g.spec.ins[0], g.spec.ins[1]
    out = g.spec.outs[0]
    k = _check_numeric(g)
    xs, ws = g.shape(x), g.shape(w)
    rows = g.prod(xs[:-1]) if len(xs) > 1 else "1"
    N, K = ws[0], ws[1]
    acc = "double" if k == "float" else "uint64_t"
    with g.loop("r", rows):
        with g.block(f"for (n0 = 0; n0 < {N}; n0 += {TILE})"):
            g.emit(f"int64_t nt = {N} - n0 < {TILE} ? {N} - n0 : {TILE};")
            with g.loop("t", "nt"):
                g.emit("acc[t] = 0;")
            with g.loop("kk", K):
                g.emit(f"{acc} xv = {_widen(k, g.load(x.dtype, f'x0[r * {K} + kk]'))};")
                with g.loop("t", "nt"):
                    g.emit(
                        f"acc[t] += xv * {_widen(k, g.load(w.dtype, f'x1[(n0 + t) * {K} + kk]'))};"
                    )
            with g.loop("t", "nt"):
                if len(g.spec.ins) == 3:
                    g.emit(f"acc[t] += {_widen(k, g.load(w.dtype, 'x2[n0 + t]'))};")
                g.emit(f"y0[r * {N} + n0 + t] = {_finish(g, out.dtype, 'acc[t]')};")
    return ["int64_t r, n0, t, kk;", f"{acc} acc[{TILE}];"]


CONV_TILE = 16
"""Output columns a conv2d computes together: independent accumulators, one row of input."""


def gen_conv2d(g: Gen) -> list[str]:
    """Direct convolution. Each output element sums over (channel, kernel row, kernel column)
    in that order, in a ``double`` (or wrapping 64-bit) accumulator, then adds the bias, as
    before; CONV_TILE neighbouring columns are summed side by side for speed."""
    x, w = g.spec.ins[0], g.spec.ins[1]
    out = g.spec.outs[0]
    k = _check_numeric(g)
    a = g.spec.attr
    sh, sw = _pair(a["strides"])
    pt, pl, _, _ = _pad4(a["padding"])
    dh, dw = _pair(a["dilation"])
    groups = a["groups"]
    N, C, H, W = g.shape(x)
    OC, CG, KH, KW = g.shape(w)
    OH, OW = g.shape(out)[2], g.shape(out)[3]
    og = f"({OC} / {groups})" if groups != 1 else OC
    acc = "double" if k == "float" else "uint64_t"
    with g.loop("b", N):
        with g.loop("oc", OC):
            g.emit(f"int64_t grp = oc / {og};" if groups != 1 else "int64_t grp = 0;")
            with g.loop("oh", OH):
                with g.block(f"for (ow0 = 0; ow0 < {OW}; ow0 += {CONV_TILE})"):
                    g.emit(f"int64_t nt = {OW} - ow0 < {CONV_TILE} ? {OW} - ow0 : {CONV_TILE};")
                    with g.loop("t", "nt"):
                        g.emit("acc[t] = 0;")
                    with g.loop("c", CG):
                        g.emit(f"int64_t ic = grp * {CG} + c;")
                        with g.loop("i", KH):
                            g.emit(f"int64_t ih = oh * {sh} - {pt} + i * {dh};")
                            g.emit(f"if (ih < 0 || ih >= {H}) continue;")
                            with g.loop("j", KW):
                                wv = g.load(w.dtype, f"x1[((oc * {CG} + c) * {KH} + i) * {KW} + j]")
                                g.emit(f"{acc} wv = {_widen(k, wv)};")
                                with g.loop("t", "nt"):
                                    g.emit(f"int64_t iw = (ow0 + t) * {sw} - {pl} + j * {dw};")
                                    xv = g.load(
                                        x.dtype, f"x0[((b * {C} + ic) * {H} + ih) * {W} + iw]"
                                    )
                                    with g.block(f"if (iw >= 0 && iw < {W})"):
                                        g.emit(f"acc[t] += {_widen(k, xv)} * wv;")
                    with g.loop("t", "nt"):
                        if len(g.spec.ins) == 3:
                            g.emit(f"acc[t] += {_widen(k, g.load(w.dtype, 'x2[oc]'))};")
                        g.emit(
                            f"y0[((b * {OC} + oc) * {OH} + oh) * {OW} + ow0 + t] = "
                            f"{_finish(g, out.dtype, 'acc[t]')};"
                        )
    return ["int64_t b, oc, oh, ow0, t, c, i, j;", f"{acc} acc[{CONV_TILE}];"]


def _pair(v: tuple) -> tuple[int, int]:
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def _pad4(v: tuple) -> tuple[int, int, int, int]:
    if len(v) == 1:
        return (v[0],) * 4  # type: ignore[return-value]
    if len(v) == 2:
        return (v[0], v[1], v[0], v[1])
    return (v[0], v[1], v[2], v[3])


# ---------------------------------------------------------------------------------------
# Pooling.


def gen_pool(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    a = g.spec.attr
    op = g.spec.op
    kh, kw = _pair(a["pool_size"])
    sh, sw = _pair(a["strides"])
    pt, pl, pb, pr = _pad4(a["padding"])
    dh, dw = _pair(a["dilation"])
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
                                    g.emit(f"acc = {g.h.use(_fmax(x.dtype))}(acc, (double){val});")
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


# ---------------------------------------------------------------------------------------
# Normalizations and softmax.


def gen_batch_norm(g: Gen) -> list[str]:
    x = g.spec.ins[0]
    out = g.spec.outs[0]
    axis = g.spec.attr["axis"] % len(x.shape)
    eps = T.float_literal(float(g.spec.attr["epsilon"]), "f64")
    outer, C, inner = _outer_inner(g, x, axis)
    ld = lambda e: f"(double){g.load(x.dtype, e)}"  # noqa: E731
    with g.loop("o", outer):
        with g.loop("c", C):
            g.emit(f"double scale = sqrt({ld('x4[c]')} + {eps});")
            with g.loop("i", inner):
                g.emit(f"int64_t at = (o * {C} + c) * {inner} + i;")
                expr = f"({ld('x0[at]')} - {ld('x3[c]')}) / scale * {ld('x1[c]')} + {ld('x2[c]')}"
                g.emit(f"y0[at] = {g.store(out.dtype, expr)};")
    return ["int64_t o, c, i;"]


def _axes_split(g: Gen, t: TensorType, axes: list[int]) -> tuple[list[int], list[int]]:
    nd = len(t.shape)
    red = sorted({a % nd for a in axes})
    return [a for a in range(nd) if a not in red], red


def gen_norm(g: Gen) -> list[str]:
    """layer_norm and rms_norm over any set of axes."""
    x, out = g.spec.ins[0], g.spec.outs[0]
    op = g.spec.op
    nd = len(x.shape)
    axes = g.spec.attr["axes"]
    kept, red = _axes_split(g, x, list(axes) if axes is not None else list(range(nd)))
    eps = T.float_literal(float(g.spec.attr["epsilon"]), "f64")
    xs = g.shape(x)
    k_vars = [g.tmp("k") for _ in kept]
    r_vars = [g.tmp("r") for _ in red]
    red_ext = [xs[a] for a in red]
    count = g.prod(red_ext) if red_ext else "1"
    decls = []
    if k_vars:
        decls.append(f"int64_t {', '.join(k_vars)};")
    if r_vars:
        decls.append(f"int64_t {', '.join(r_vars)};")
    decls.append("double mean, var, d, scale;")

    def index() -> str:
        idx = [""] * nd
        for a, v in zip(kept, k_vars):
            idx[a] = v
        for a, v in zip(red, r_vars):
            idx[a] = v
        return horner(idx, xs)

    def over_reduced(body: Callable[[], None]) -> None:
        def rec(kk: int) -> None:
            if kk == len(red):
                body()
                return
            with g.loop(r_vars[kk], red_ext[kk]):
                rec(kk + 1)

        rec(0)

    def ld(e: str) -> str:
        return f"(double){g.load(x.dtype, e)}"

    param_index = horner(r_vars, red_ext) if r_vars else "0"

    def per_row() -> None:
        if op == "layer_norm":
            g.emit("mean = 0;")
            over_reduced(lambda: g.emit(f"mean += {ld(f'x0[{index()}]')};"))
            g.emit(f"mean /= (double)({count});")
            g.emit("var = 0;")

            def acc_var() -> None:
                g.emit(f"d = {ld(f'x0[{index()}]')} - mean;")
                g.emit("var += d * d;")

            over_reduced(acc_var)
            g.emit(f"var /= (double)({count});")
            g.emit(f"scale = sqrt(var + {eps});")

            def write_ln() -> None:
                i = index()
                xv, gv, bv = ld(f"x0[{i}]"), ld(f"x1[{param_index}]"), ld(f"x2[{param_index}]")
                g.emit(f"y0[{i}] = {g.store(out.dtype, f'({xv} - mean) / scale * {gv} + {bv}')};")

            over_reduced(write_ln)
        else:
            g.emit("var = 0;")

            def acc_sq() -> None:
                g.emit(f"d = {ld(f'x0[{index()}]')};")
                g.emit("var += d * d;")

            over_reduced(acc_sq)
            g.emit(f"var /= (double)({count});")
            g.emit(f"scale = sqrt(var + {eps});")

            def write_rms() -> None:
                i = index()
                xv, wv = ld(f"x0[{i}]"), ld(f"x1[{param_index}]")
                g.emit(f"y0[{i}] = {g.store(out.dtype, f'{xv} / scale * {wv}')};")

            over_reduced(write_rms)

    def rec_kept(kk: int) -> None:
        if kk == len(kept):
            per_row()
            return
        with g.loop(k_vars[kk], xs[kept[kk]]):
            rec_kept(kk + 1)

    rec_kept(0)
    if op == "rms_norm":
        g.emit("(void)mean;")
    return decls


def gen_softmax(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    axis = g.spec.attr["axis"] % len(x.shape)
    outer, L, inner = _outer_inner(g, x, axis)
    ld = lambda e: f"(double){g.load(x.dtype, e)}"  # noqa: E731
    at = f"(o * {L} + j) * {inner} + i"
    with g.loop("o", outer):
        with g.loop("i", inner):
            g.emit("mx = -INFINITY;")
            with g.loop("j", L):
                g.emit(f"v = {ld(f'x0[{at}]')};")
                g.emit("if (v != v || mx != mx) mx = v != v ? v : mx; else if (v > mx) mx = v;")
            g.emit("sum = 0;")
            with g.loop("j", L):
                g.emit(f"sum += exp({ld(f'x0[{at}]')} - mx);")
            with g.loop("j", L):
                xv = ld(f"x0[{at}]")
                g.emit(f"y0[{at}] = {g.store(out.dtype, f'exp({xv} - mx) / sum')};")
    return ["int64_t o, i, j;", "double mx, sum, v;"]


def gen_lrn(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    a = g.spec.attr
    size = a["size"]
    axis = a["axis"] % len(x.shape)
    before = (size - 1) // 2
    after = size - 1 - before
    bias = T.float_literal(float(a["bias"]), "f64")
    coef = T.float_literal(float(a["alpha"]) / size, "f64")
    beta = T.float_literal(float(a["beta"]), "f64")
    outer, L, inner = _outer_inner(g, x, axis)
    ld = lambda e: f"(double){g.load(x.dtype, e)}"  # noqa: E731
    with g.loop("o", outer):
        with g.loop("i", inner):
            with g.loop("c", L):
                g.emit("sq = 0;")
                with g.loop("q", f"c + {after} + 1", f"c - {before}"):
                    g.emit(f"if (q < 0 || q >= {L}) continue;")
                    g.emit(f"v = {ld(f'x0[(o * {L} + q) * {inner} + i]')};")
                    g.emit("sq += v * v;")
                at = f"(o * {L} + c) * {inner} + i"
                xv = ld(f"x0[{at}]")
                g.emit(
                    f"y0[{at}] = {g.store(out.dtype, f'{xv} / pow({bias} + {coef} * sq, {beta})')};"
                )
    return ["int64_t o, i, c, q;", "double sq, v;"]


# ---------------------------------------------------------------------------------------
# The table.

Generator = Callable[[Gen], list[str]]


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


GENERATORS: dict[str, Generator] = {
    "leaky_relu": gen_leaky_relu,
    "clip": gen_clip,
    "cast": gen_cast,
    "where": gen_where,
    "zeros": gen_fill,
    "ones": gen_fill,
    "full": gen_fill,
    "concat": gen_concat,
    "split": gen_split,
    "transpose": gen_transpose,
    "strided_slice": gen_strided_slice,
    "take": gen_take,
    "sum": gen_reduce,
    "mean": gen_reduce,
    "max": gen_reduce,
    "matmul": gen_matmul,
    "dense": gen_dense,
    "conv2d": gen_conv2d,
    "max_pool2d": gen_pool,
    "avg_pool2d": gen_pool,
    "global_avg_pool2d": gen_global_avg_pool2d,
    "batch_norm": gen_batch_norm,
    "layer_norm": gen_norm,
    "rms_norm": gen_norm,
    "softmax": gen_softmax,
    "lrn": gen_lrn,
}
"""The generators of the kernel ops that are not plain elementwise ones."""

REFUSED: dict[str, str] = {}
"""Kernel ops the C target does not compute, and why: ``{"fft": "not on the C target, because
it has no complex dtype"}``. The sentence reaches the user's error. (Every op is computed today.)"""


def c_kernels(registry: Registry) -> BackendTable[Generator]:
    """The C target's table of kernel generators for ``registry``, checked to cover it: a
    RuntimeError names a kernel op that has neither a generator nor a refusal."""
    table: BackendTable[Generator] = BackendTable("C")
    table.implement_all(plain_elementwise(registry, 1), gen_unary)
    table.implement_all(plain_elementwise(registry, 2), gen_binary)
    for op, gen in GENERATORS.items():
        table.implement(op, gen)
    for op, why in REFUSED.items():
        table.refuse(op, why)
    table.check_covers(registry)
    return table


C_KERNELS: BackendTable[Generator] = c_kernels(REGISTRY)
"""The C generator of every kernel op of the registry, or why the C target refuses it."""


def generate(spec: Spec, fname: str, helpers: Helpers, loc: Loc | None = None) -> str:
    """The C definition of kernel ``fname`` for ``spec``; RxError if the C target lacks it."""
    gen = C_KERNELS.get(spec.op)
    if gen is None:
        refusal = C_KERNELS.refusal(spec.op)
        why = f": {refusal.why}" if refusal is not None else ""
        raise RxError(f"the C target has no kernel for op {spec.op}{why}", loc)
    for t in spec.ins + spec.outs:
        if t.dtype not in T.SUPPORTED:
            raise unsupported(spec, f"dtype {t.dtype} has no C representation", loc)
    op = REGISTRY.get(spec.op)
    if op is not None and op.float_only and any(T.kind(t.dtype) != "float" for t in spec.ins[:1]):
        raise unsupported(spec, loc=loc)
    g = Gen(spec, fname, helpers, loc)
    decls = gen(g)
    return g.render(decls)

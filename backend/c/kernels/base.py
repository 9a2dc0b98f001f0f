"""The pieces every kernel generator uses: the instance (:class:`Spec`), the body builder
(:class:`Gen`), symbolic dims in C (:class:`DimC`), index arithmetic and scalar helpers."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable


from relaxc.ir import dims as D
from relaxc.ir.diagnostics import Loc, RxError
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpDef
from relaxc.ir.sizes import round_up
from relaxc.ir.types import TensorType

from .. import dtypes as T
from .. import lowp
from ..helpers import Helpers
from ..names import Scope
from .lines import CLines

INT_KINDS = ("int", "uint")

SCRATCH_ALIGN = 64
"""Alignment of each array a kernel carves from its scratch (the scratch itself is a planned
buffer at a multiple of 64 bytes of the arena)."""

POINTER_BYTES = 8
"""Bytes planned per pointer of a scratch array: the size of a pointer on 64-bit targets,
an upper bound on 32-bit ones (the generated file checks ``sizeof(void *) <= 8``)."""


def scratch_place(end: int, ctype: str, count: int) -> tuple[int, int]:
    """Where an array of ``count`` elements of ``ctype`` (``float``, ``double`` or a pointer
    type) goes in a scratch whose arrays so far end at ``end``: (its offset, the new end). The one
    layout :meth:`Gen.scratch_array` carves, and that a kernel's planner may compute ahead."""
    if ctype == "float":
        size = 4
    elif ctype == "double":
        size = 8
    elif ctype.endswith("*"):
        size = POINTER_BYTES
    else:
        raise ValueError(f"scratch arrays hold floats, doubles or pointers, not {ctype}")
    offset = round_up(end, SCRATCH_ALIGN)
    return offset, offset + size * count


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


class Gen(CLines):
    """Builds the body of one kernel function (its lines one block deep: inside the braces)."""

    def __init__(self, spec: Spec, fname: str, helpers: Helpers, loc: Loc | None = None):
        super().__init__(depth=1)
        self.spec = spec
        self.op: OpDef | None = REGISTRY.get(spec.op)
        self.fname = fname
        self.h = helpers
        self.loc = loc
        self.scope = Scope()
        self.dimvar = {n: self.scope.name("d_", n) for n in spec.dims()}
        self.dim = DimC(self.dimvar, helpers)
        self.counter = 0
        self.x = [f"x{i}" for i in range(len(spec.ins))]
        self.y = [f"y{i}" for i in range(len(spec.outs))]
        self.scratch_bytes = 0
        """Bytes of the call's scratch (``unsigned char *scratch``, 64-byte aligned) that the
        kernel's arrays take: see :meth:`scratch_array`."""
        self.prelude: list[str] = []
        """Static functions of this kernel alone (named after it, ``{fname}_...``), emitted
        before it: inner loops specialised to its shapes whose pointers are ``restrict``
        parameters (see :mod:`.winograd`)."""
        self.restrict = False
        """Set by a generator whose op never computes its output over an input (conv2d, dense,
        matmul, pooling): the pointers are declared ``restrict``, which lets the compiler
        vectorize without run-time overlap checks (inputs are only read, so two inputs may
        still be the same buffer)."""

    # -- text (emit, block, loop: :class:`CLines`) -----------------------------------------
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

    def scratch_array(self, ctype: str, name: str, count: int) -> str:
        """The declaration of ``name``, an array of ``count`` elements of ``ctype`` (``float``
        or a pointer type) carved from the call's scratch at the next multiple of
        :data:`SCRATCH_ALIGN`: a kernel's working arrays are planned memory (PlanKernelScratch
        gives each call the :attr:`scratch_bytes` the generator used), never the stack."""
        if ctype.endswith("*"):
            self.h.use("pointer_fits_scratch")
        offset, self.scratch_bytes = scratch_place(self.scratch_bytes, ctype, count)
        star = "*" if ctype.endswith("*") else " *"
        return f"{ctype}{star}{name} = ({ctype}{star.strip()})(void *)(scratch + {offset});"

    def signature(self) -> str:
        s = self.spec
        q = "restrict " if self.restrict else ""
        params = [f"const {T.c_type(t.dtype)} *{q}{x}" for t, x in zip(s.ins, self.x)]
        params += [f"{T.c_type(t.dtype)} *{q}{y}" for t, y in zip(s.outs, self.y)]
        if self.scratch_bytes:
            params.append("unsigned char *restrict scratch")
        params += [f"int64_t {self.dimvar[n]}" for n in s.dims()]
        return f"static void {self.fname}({', '.join(params) or 'void'})"

    def render(self, decls: list[str]) -> str:
        body = ["    " + d for d in decls]
        text = "\n".join(self.lines)
        body += [
            f"    (void){v};" for v in self.dimvar.values() if not re.search(rf"\b{v}\b", text)
        ]
        text = self.signature() + "\n{\n" + "\n".join(body + self.lines) + "\n}"
        return "\n\n".join([*self.prelude, text])

    # -- values ---------------------------------------------------------------------------
    def load(self, dtype: str, expr: str) -> str:
        """An element in its compute domain (f16 as float; bf16 and the low-precision types
        as a double or an int64_t: backend/c/lowp.py)."""
        if lowp.is_narrow(dtype):
            return lowp.load(self.h, dtype, expr)
        return f"{self.h.use('h2f')}({expr})" if dtype == "f16" else expr

    def store(self, dtype: str, value: str) -> str:
        """A compute-domain value converted to the storage type of ``dtype``."""
        if dtype == "f16":
            return f"{self.h.use('f2h')}((double)({value}))"
        if lowp.is_narrow(dtype):
            return lowp.store(self.h, dtype, value, self.spec.attr)
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


def matmul_batch_offsets(
    g: Gen, a: TensorType, b: TensorType, out: TensorType, bv: list[str]
) -> tuple[str, str, str]:
    """The batch index (in matrices) of ``a``, ``b`` (numpy-broadcast over the batch dims)
    and ``out`` at the batch position ``bv`` of a matmul, as C expressions."""
    ab = TensorType(a.shape[:-2], a.dtype)
    bb = TensorType(b.shape[:-2], b.dtype)
    ob = TensorType(out.shape[:-2], out.dtype)
    a_off = broadcast_index(g, ab, ob, bv) if ab.shape else "0"
    b_off = broadcast_index(g, bb, ob, bv) if bb.shape else "0"
    o_off = horner(bv, g.shape(out)[:-2]) if bv else "0"
    return a_off, b_off, o_off


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


def float_kind(dtype: str) -> bool:
    return T.kind(dtype) == "float"


def ctype_of_domain(dtype: str) -> str:
    """The C type of a value in the compute domain of ``dtype`` (f16 computes in float)."""
    return "float" if dtype == "f16" else T.c_type(dtype)


def int_wrap(dtype: str, expr: str) -> str:
    return f"({T.c_type(dtype)})({expr})"


def fmax_of(dtype: str, name: str = "fmaxnan") -> str:
    """The helper for numpy's maximum (or minimum) on ``dtype``: on a tie of -0 and +0 numpy
    gives the second operand for f32 and f64 but the first for f16."""
    return name + "_h" if dtype == "f16" else name


def to_int(g: Gen, dtype: str, double_expr: str) -> str:
    """A double converted to integer ``dtype`` the way numpy's astype does on x86."""
    bits = 8 * T.nbytes(dtype)
    # Through int32 for every type of 8 or 16 bits (u8 and u16 too: 3e9 becomes 0, not
    # 3e9 mod 2**16) and for i32; through int64 for u32, i64 and u64.
    if bits <= 16 or (T.kind(dtype) == "int" and bits <= 32):
        return int_wrap(dtype, f"{g.h.use('f2i32')}({double_expr})")
    return int_wrap(dtype, f"{g.h.use('f2i64')}({double_expr})")


def scalar_formula(formula: str, args: list[str]) -> str:
    """An op's scalar formula (over ``x0``, ``x1``, ...) with each ``xi`` replaced by
    ``args[i]``."""
    return re.sub(r"\bx(\d+)\b", lambda m: args[int(m[1])], formula)


def scalar_of(g: Gen) -> str | None:
    return g.op.scalar if g.op is not None else None


def outer_inner(g: Gen, t: TensorType, axis: int) -> tuple[str, str, str]:
    sh = g.shape(t)
    return (
        g.prod(sh[:axis]) if axis else "1",
        sh[axis],
        g.prod(sh[axis + 1 :]) if axis + 1 < len(sh) else "1",
    )


def acc_type(dtype: str) -> str:
    k = T.kind(dtype)
    return "double" if k == "float" else ("uint64_t" if k in INT_KINDS else "")


def widen(k: str, v: str) -> str:
    """``v`` as a value of the accumulator of dtype kind ``k``."""
    if k == "float":
        return f"(double){v}"
    return f"(uint64_t){v}" if k == "uint" else f"(uint64_t)(int64_t){v}"


def finish(g: Gen, dtype: str, value: str) -> str:
    return g.store(dtype, value) if T.kind(dtype) == "float" else int_wrap(dtype, value)


def check_numeric(g: Gen) -> str:
    k = T.kind(g.spec.ins[0].dtype)
    if k == "bool":
        raise unsupported(g.spec, loc=g.loc)
    return k


def pair(v: tuple) -> tuple[int, int]:
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def pad4(v: tuple) -> tuple[int, int, int, int]:
    if len(v) == 1:
        return (v[0],) * 4  # type: ignore[return-value]
    if len(v) == 2:
        return (v[0], v[1], v[0], v[1])
    return (v[0], v[1], v[2], v[3])

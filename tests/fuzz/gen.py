"""Random well-typed .rx programs for differential fuzzing (hypothesis strategies).

:func:`fuzz_programs` draws whole programs: a ``@main`` built as a random DAG of the ops of
:data:`relaxc.ir.ops.REGISTRY` (every kernel and view op; an op added to the registry is
fuzzed too, through the generic recipe below, unless it needs a recipe of its own), over
random shapes and dtypes, with views, tuples and projections, aliases, reused values,
inline and named constants, several outputs (parameters, constants, views and duplicates
among them), symbolic dims with and without ``upper_bounds``, primitive functions called
from ``@main`` and, for the VM only, non-primitive helper functions (results that alias
their arguments included).

Steps are biased to the patterns ReorderForMemory and the memory-sharing passes act on
(see "Patterns of the memory-sharing passes" below): chains of ops that may compute in
place over a value dying at them, concats and splits along an axis whose leading dims are
1, values that must not be overwritten, and fans of large branches written breadth first
(an order ReorderForMemory improves).

Types are tracked while generating with each op's own ``infer`` (the verifier's rules), so
every program verifies; a recipe whose draw does not type-check is retried or dropped.

A program is drawn either for *both backends* (``c_ok``: every symbolic dim bounded, no
calls of non-primitive functions, no storage-only dtypes: what the C target accepts) or for
the VM only. The strategy in :mod:`tests.strategies` (``programs``) stays as it is; the
fuzz suite runs it too (see :func:`legacy_programs`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import strategies as st

from relaxc.frontend.printer import print_module
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import (
    Bind,
    Call,
    CallFunc,
    DictLit,
    DType,
    Function,
    ListLit,
    Module,
    Param,
    Project,
    TupleExpr,
    Var,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import REQUIRED, OpDef, OpError, bind_args
from relaxc.ir.sizes import tensor_nbytes
from relaxc.ir.types import DTYPES, TensorType, TupleType, Type, numpy_dtype, tensor_leaves

# ---------------------------------------------------------------------------------------
# The ops fuzzed: every kernel and view op of the registry.

FUZZED_OPS: tuple[OpDef, ...] = tuple(
    op for op in REGISTRY.ops() if op.category in ("kernel", "view")
)
COMPUTABLE = tuple(d for d in sorted(DTYPES) if DTYPES[d].numpy is not None)
FLOATS = ("f32", "f64", "f16")
INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
INDEX_DTYPES = ("i32", "i64")

STATIC_SIZES = (1, 2, 3, 4, 5, 6, 8)
SYMS = ("n", "m")
FLOAT_LITERALS = (-2.0, -1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5, 3.0)


@dataclass
class Val:
    """A value of the function being built."""

    name: str
    type: Type
    const: bool = False
    src: str = "param"
    """What made it: ``param``, ``const``, ``kernel`` (a kernel op), ``view`` (a view op),
    ``call`` (a primitive function), ``helper`` (a non-primitive function), or ``alias``,
    ``tuple``, ``project``. Only ``kernel`` and ``call`` values are memory the function owns,
    which ComputeInPlace may write over."""


@dataclass
class GenProgram:
    """A generated program: its module and text, weights, dims, and what it is for."""

    module: Module
    text: str
    weights: dict[str, np.ndarray]
    dims: dict[str, int]
    c_ok: bool
    ops: tuple[str, ...]
    label: str = ""

    def __repr__(self) -> str:
        w = f", weights={sorted(self.weights)}" if self.weights else ""
        return f"GenProgram(dims={self.dims}, c_ok={self.c_ok}{w})\n{self.text}"


class Reject(Exception):
    """A recipe that cannot apply to the current values (the generator tries something else)."""


# ---------------------------------------------------------------------------------------
# Building one function.


@dataclass
class Ctx:
    """Program-wide state: dims, dtypes, weights, helper functions, names."""

    ch: Any
    c_ok: bool
    sizes: list[D.Dim]
    dtypes: list[str]
    sym_values: dict[str, int]
    bounds: dict[str, int]
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    functions: list[Function] = field(default_factory=list)
    used_ops: list[str] = field(default_factory=list)
    seed: int = 0
    nfuncs: int = 0

    def rng(self) -> np.random.Generator:
        self.seed += 1
        return np.random.default_rng(self.seed)


class FnBuilder:
    """A function body under construction: its parameters, statements and value pool."""

    def __init__(
        self,
        ctx: Ctx,
        name: str,
        primitive: bool,
        params: list[Param] | None = None,
        sizes: list[D.Dim] | None = None,
        growable: bool = True,
    ):
        self.ctx = ctx
        self.ch = ctx.ch
        self.name = name
        self.primitive = primitive
        self.params: list[Param] = list(params or [])
        self.body: list[Bind] = []
        self.pool: list[Val] = [Val(p.name, p.type) for p in self.params]
        self.sizes = sizes if sizes is not None else ctx.sizes
        self.growable = growable  # may new parameters be added?
        self.counter = 0
        self.subst: dict[str, D.Dim] = {}  # a callee's dims in terms of @main's (for sizes)
        self.keep: list[Val] = []  # values the return must hold (see _finish)

    # -- names and values --------------------------------------------------------------
    def fresh(self, base: str = "v") -> str:
        self.counter += 1
        return f"{base}{self.counter}"

    def bind(
        self,
        value: Any,
        t: Type,
        base: str = "v",
        annotate: bool = False,
        const: bool = False,
        src: str = "kernel",
    ) -> Val:
        name = self.fresh(base)
        self.body.append(Bind(name, t if annotate else None, value))
        v = Val(name, t, const, "const" if const else src)
        self.pool.append(v)
        return v

    def retire(self, v: Val) -> None:
        """No later statement may use ``v`` (it dies at its last use so far)."""
        self.pool = [u for u in self.pool if u.name != v.name]

    def tensors(self, pred: Callable[[TensorType], bool] = lambda t: True) -> list[Val]:
        return [v for v in self.pool if isinstance(v.type, TensorType) and pred(v.type)]

    def pick(self, vals: list[Val]) -> Val:
        if not vals:
            raise Reject()
        # Recent values are likelier: programs become chains with branches, not flat fans.
        if len(vals) > 3 and self.ch.bool():
            vals = vals[-3:]
        return self.ch.choice(vals)

    def pick_tensor(self, pred: Callable[[TensorType], bool] = lambda t: True) -> Val:
        return self.pick(self.tensors(pred))

    def size(self, static: bool = False) -> D.Dim:
        choices = [s for s in self.sizes if isinstance(s, int)] if static else self.sizes
        if not choices:
            return self.ch.choice(STATIC_SIZES[:5])
        return self.ch.choice(choices)

    def new_input(
        self, t: TensorType, positive: bool = False, small_ints: int | None = None
    ) -> Val:
        """A value of type ``t`` that did not exist: a new parameter, a named weight or an
        inline constant."""
        static = t.is_static()
        n = math.prod(int(d) for d in t.shape) if static else None
        options = []
        if static and n is not None and 0 < n <= 12:  # ([] cannot spell a (0, k) literal)
            options.append("inline")
        if static and not self.primitive:
            options.append("weight")
        if (
            self.growable
            and not positive
            and small_ints is None
            and len(self.params) < 7
            and self._runnable(t)
        ):
            options.append("param")
        if not options:
            if static:
                options = ["inline"] if n is not None and 0 < n <= 64 else []
            if not options:
                raise Reject()
        how = self.ch.choice(options)
        if how == "param":
            name = self.fresh("p")
            self.params.append(Param(name, t))
            v = Val(name, t)
            self.pool.append(v)
            return v
        arr = self._array(t, positive, small_ints)
        if how == "weight":
            wname = f"w{len(self.ctx.weights)}.{self.ch.choice(['weight', 'bias', 'x'])}"
            self.ctx.weights[wname] = arr
            return self.bind(Call("const", (wname,)), t, "c", annotate=True, const=True)
        return self.bind(
            Call("const", (_literal(arr, t.dtype), DType(t.dtype))), t, "c", const=True
        )

    def _array(self, t: TensorType, positive: bool, small_ints: int | None) -> np.ndarray:
        shape = tuple(int(d) for d in t.shape)
        rng = self.ctx.rng()
        info = DTYPES[t.dtype]
        if small_ints is not None:
            a = rng.integers(-1 if not positive else 0, small_ints + 2, size=shape)
            if info.kind == "uint":
                a = np.abs(a)
            return a.astype(numpy_dtype(t.dtype))
        if info.kind == "float":
            lo = 0.25 if positive else -1.0
            a = np.round(rng.uniform(lo, 1.5, size=shape) * 4) / 4  # exact in f16 as well
            return a.astype(numpy_dtype(t.dtype))
        if info.kind == "bool":
            return rng.integers(0, 2, size=shape).astype(np.bool_)
        lo = 1 if positive else (0 if info.kind == "uint" else -5)
        return rng.integers(lo, 6, size=shape).astype(numpy_dtype(t.dtype))

    # -- applying an op ----------------------------------------------------------------
    def infer(self, op: OpDef, inputs: list[Val], attrs: dict[str, Any]) -> Type:
        """The result type of ``op`` on ``inputs`` with ``attrs`` (as the verifier infers it)."""
        kwargs = tuple((k, v) for k, v in attrs.items() if v is not None)
        try:
            bound = bind_args(op, tuple(Var(v.name) for v in inputs), kwargs)
            t = op.infer([v.type for v in inputs], bound.attrs)
        except (OpError, D.DimError, RxError, ZeroDivisionError, ValueError):
            raise Reject() from None
        for leaf in tensor_leaves(t):
            for d in leaf.shape:
                if not isinstance(d, int) and not D.free_vars(d) <= set(self._bound_syms()):
                    raise Reject()
                if isinstance(d, int) and (d < 0 or d > 4096):
                    raise Reject()
            shape = (
                tuple(D.substitute(d, self.subst) for d in leaf.shape) if self.subst else leaf.shape
            )
            if (
                _elements_at(TensorType(shape, leaf.dtype), self.ctx.bounds, self.ctx.sym_values)
                > 20000
            ):
                raise Reject()
        return t

    def apply(self, op: OpDef, inputs: list[Val], attrs: dict[str, Any], base: str = "v") -> Val:
        t = self.infer(op, inputs, attrs)
        kwargs = tuple((k, v) for k, v in attrs.items() if v is not None)
        v = self.bind(
            Call(op.name, tuple(Var(x.name) for x in inputs), kwargs),
            t,
            base,
            src="view" if op.is_view else "kernel",
        )
        self.ctx.used_ops.append(op.name)
        return v

    def _runnable(self, t: TensorType) -> bool:
        """Every dim of ``t`` non-negative in both runs (at the drawn dims and at the bounds)."""
        ctx = self.ctx
        envs = [
            dict(ctx.sym_values),
            {k: ctx.bounds.get(k, v + 1) for k, v in ctx.sym_values.items()},
        ]
        try:
            return all(D.evaluate(d, env) >= 0 for env in envs for d in t.shape)
        except (D.DimError, ZeroDivisionError):
            return False

    def _bound_syms(self) -> set[str]:
        out: set[str] = set()
        for p in self.params:
            for leaf in tensor_leaves(p.type):
                out |= {d.name for d in leaf.shape if isinstance(d, D.Sym)}
        return out


def _elements_at(t: TensorType, bounds: dict[str, int], values: dict[str, int]) -> int:
    env = {k: max(values.get(k, 0), bounds.get(k, 0)) for k in set(bounds) | set(values)}
    n = 1
    for d in t.shape:
        try:
            n *= max(0, D.evaluate(d, env)) if not isinstance(d, int) else d
        except Exception:  # noqa: BLE001 - a dim that cannot be evaluated counts as huge
            return 1 << 30
    return n


def _literal(arr: np.ndarray, dtype: str) -> Any:
    def conv(x: Any) -> Any:
        if DTYPES[dtype].kind == "bool":
            return bool(x)
        if DTYPES[dtype].kind == "float":
            return float(x)
        return int(x)

    if arr.ndim == 0:
        return conv(arr.item())
    return ListLit(tuple(_literal(a, dtype) if arr.ndim > 1 else conv(a) for a in arr))


# ---------------------------------------------------------------------------------------
# Recipes: how to draw inputs and attributes for an op. Ops without one use the generic
# recipe, which draws inputs from the pool (the later ones biased to fit the first) and
# each attribute by its kind, and lets the op's inference decide.

Recipe = Callable[[FnBuilder, OpDef], Val]
RECIPES: dict[str, Recipe] = {}


def recipe(*names: str) -> Callable[[Recipe], Recipe]:
    def deco(fn: Recipe) -> Recipe:
        for n in names:
            RECIPES[n] = fn
        return fn

    return deco


def _fits(a: TensorType, b: TensorType) -> bool:
    """Same dtype and numpy-broadcastable (dims equal or 1)."""
    if a.dtype != b.dtype:
        return False
    for x, y in zip(reversed(a.shape), reversed(b.shape)):
        if not (x == 1 or y == 1 or D.dims_equal(x, y)):
            return False
    return True


def random_attr(b: FnBuilder, kind: str, x: TensorType | None) -> Any:
    ch = b.ch
    r = x.ndim if x is not None else 2
    if kind == "int":
        return ch.int(-2, 4)
    if kind == "float":
        return ch.choice(FLOAT_LITERALS)
    if kind == "bool":
        return ch.bool()
    if kind == "dtype":
        return DType(ch.choice(COMPUTABLE))
    if kind in ("ints", "pad"):
        k = ch.int(1, 2)
        return tuple(ch.int(0 if kind == "pad" else 1, 3) for _ in range(k))
    if kind == "axes":
        if r == 0 or ch.bool():
            return None
        axes = ch.subset(range(r), 1, r)
        return tuple(a - r if ch.bool() else a for a in sorted(axes))
    if kind in ("shape",):
        return tuple(b.size() for _ in range(ch.int(0, 3)))
    if kind == "dim":
        return b.size()
    if kind == "str":
        return "global"
    return ch.int(1, 3)  # "value"


def generic_with(b: FnBuilder, op: OpDef, inputs: list[Val]) -> Val:
    """``op`` on ``inputs`` with each attribute drawn by its kind (or left at its default)."""
    x = inputs[0].type if inputs else None
    attrs: dict[str, Any] = {}
    for spec in op.attrs:
        if spec.default is not REQUIRED and b.ch.bool():
            continue
        attrs[spec.name] = random_attr(b, spec.kind, x if isinstance(x, TensorType) else None)
    return b.apply(op, inputs, attrs)


def generic(b: FnBuilder, op: OpDef) -> Val:
    ch = b.ch
    hi = op.max_inputs if op.max_inputs is not None else op.min_inputs + 2
    n = ch.int(op.min_inputs, max(op.min_inputs, min(hi, 4)))
    inputs: list[Val] = []
    for i in range(n):
        if i == 0:
            inputs.append(b.pick_tensor())
        else:
            first = inputs[0].type
            assert isinstance(first, TensorType)
            fitting = b.tensors(lambda t: _fits(t, first) or _fits(first, t))
            inputs.append(b.pick(fitting) if fitting and ch.int(0, 4) else b.pick_tensor())
    x = inputs[0].type if inputs else None
    attrs: dict[str, Any] = {}
    for spec in op.attrs:
        if spec.default is not REQUIRED and ch.bool():
            continue
        attrs[spec.name] = random_attr(b, spec.kind, x if isinstance(x, TensorType) else None)
    return b.apply(op, inputs, attrs)


@recipe("where")
def _where(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor()
    xt = x.type
    conds = b.tensors(lambda t: t.dtype == "bool" and (_fits(t, TensorType(t.shape, "bool"))))
    if conds and b.ch.bool():
        c = b.pick(conds)
    else:
        src = b.pick_tensor(lambda t: t.dtype != "bf16")
        c = b.apply(REGISTRY.get("cast"), [src], {"dtype": DType("bool")})
    ys = b.tensors(lambda t: t.dtype == xt.dtype)
    y = b.pick(ys) if b.ch.bool() else x
    return b.apply(op, [c, x, y], {})


def _as_dtype(b: FnBuilder, dtype: str, pred: Callable[[TensorType], bool] = lambda t: True) -> Val:
    """A tensor of ``dtype`` from the pool (matching ``pred``), or one cast to it."""
    have = b.tensors(lambda t: t.dtype == dtype and pred(t))
    if have and b.ch.bool():
        return b.pick(have)
    src = b.pick_tensor(lambda t: t.dtype != "bf16" and pred(t))
    return b.apply(REGISTRY.get("cast"), [src], {"dtype": DType(dtype)})


@recipe("logical_and", "logical_or", "logical_xor", "logical_not")
def _logical(b: FnBuilder, op: OpDef) -> Val:
    """Bools: values of the pool cast to bool where the pool has none."""
    x = _as_dtype(b, "bool")
    if op.max_inputs == 1:
        return b.apply(op, [x], {})
    xt = x.type
    assert isinstance(xt, TensorType)
    y = _as_dtype(b, "bool", lambda t: _fits(TensorType(t.shape, "bool"), xt))
    return b.apply(op, [x, y] if b.ch.bool() else [y, x], {})


@recipe("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")
def _bitwise(b: FnBuilder, op: OpDef) -> Val:
    """Integers: values of the pool cast to one where the pool has none."""
    ints = sorted({v.type.dtype for v in b.tensors(lambda t: t.dtype in INTS)})  # type: ignore[union-attr]
    x = _as_dtype(b, b.ch.choice(ints) if ints and b.ch.bool() else b.ch.choice(INTS))
    if op.max_inputs == 1:
        return b.apply(op, [x], {})
    xt = x.type
    assert isinstance(xt, TensorType)
    y = _as_dtype(b, xt.dtype, lambda t: _fits(TensorType(t.shape, xt.dtype), xt))
    return b.apply(op, [x, y] if b.ch.bool() else [y, x], {})


@recipe("isnan", "isinf")
def _float_test(b: FnBuilder, op: OpDef) -> Val:
    """A float tensor (NaN and infinities come from the ops before: log, divide, ...)."""
    x = b.pick_tensor(lambda t: t.dtype in FLOATS)
    return generic_with(b, op, [x])


@recipe("bit_shift")
def _bit_shift(b: FnBuilder, op: OpDef) -> Val:
    """An integer tensor shifted by small amounts (up to a little past its width)."""
    x = _as_dtype(b, b.ch.choice(("u8", "u16", "u32", "i8", "i16", "i32", "i64")))
    xt = x.type
    assert isinstance(xt, TensorType)
    bits = 8 * np.dtype(numpy_dtype(xt.dtype)).itemsize
    shape = xt.shape[b.ch.int(0, xt.ndim) :]
    s = b.new_input(TensorType(shape, xt.dtype), small_ints=bits + 3)
    return b.apply(op, [x, s], {"direction": b.ch.choice(["left", "right"])})


@recipe("clip")
def _clip(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor()
    lo, hi = sorted([b.ch.choice(FLOAT_LITERALS), b.ch.choice(FLOAT_LITERALS)])
    return b.apply(op, [x], {"a_min": lo, "a_max": hi})


@recipe("zeros", "ones", "full")
def _factory(b: FnBuilder, op: OpDef) -> Val:
    shape = tuple(b.size() for _ in range(b.ch.int(0, 3)))
    dtype = b.ch.choice(b.ctx.dtypes + ["bool", "i32"])
    attrs: dict[str, Any] = {"shape": shape, "dtype": DType(dtype)}
    if op.name == "full":
        attrs["fill_value"] = {"bool": 1, "float": -1.5}.get(DTYPES[dtype].kind, 3)
    return b.apply(op, [], attrs)


@recipe("arange")
def _arange(b: FnBuilder, op: OpDef) -> Val:
    dtype = b.ch.choice([d for d in b.ctx.dtypes if d != "bool"] + ["i64"])
    unsigned = DTYPES[dtype].kind == "uint"
    start = b.ch.int(0, 3) if unsigned else b.ch.int(-3, 3)
    delta = b.ch.int(1, 2) if unsigned else b.ch.choice([-2, -1, 1, 2])
    if DTYPES[dtype].kind == "float" and b.ch.bool():
        start, delta = start + 0.5, delta * 0.25
    return b.apply(
        op, [], {"start": start, "delta": delta, "length": b.size(), "dtype": DType(dtype)}
    )


@recipe("argmax", "argmin")
def _arg(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1 and t.dtype != "bf16")
    attrs = {
        "axis": b.ch.int(-x.type.ndim, x.type.ndim - 1),
        "keepdims": b.ch.bool(),
        "select_last_index": b.ch.bool(),
    }
    return b.apply(op, [x], attrs)


@recipe("transpose")
def _transpose(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor()
    r = x.type.ndim
    axes = None if b.ch.bool() else tuple(b.ch.perm(range(r)))
    return b.apply(op, [x], {"axes": axes} if axes is not None or b.ch.bool() else {})


@recipe("reshape")
def _reshape(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor()
    factors: list[D.Dim] = []
    for d in x.type.shape:
        if isinstance(d, int):
            factors += _prime_factors(d)
        else:
            factors.append(d)
    factors = list(b.ch.perm(factors)) if factors else []
    k = b.ch.int(1, max(1, min(4, len(factors))))
    groups: list[list[D.Dim]] = [[] for _ in range(k)]
    for f in factors:
        groups[b.ch.int(0, k - 1)].append(f)
    shape: list[D.Dim] = [D.simplify(D.product(g)) if g else 1 for g in groups]
    if b.ch.int(0, 3) == 0:
        shape.insert(b.ch.int(0, len(shape)), 1)
    if len(shape) > 1 and b.ch.int(0, 3) == 0:
        shape[b.ch.int(0, len(shape) - 1)] = -1
    return b.apply(op, [x], {"newshape": tuple(shape)})


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1 and p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


@recipe("squeeze")
def _squeeze(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: 1 in t.shape)
    ones = [i for i, d in enumerate(x.type.shape) if d == 1]
    if b.ch.bool():
        return b.apply(op, [x], {})
    axes = b.ch.subset(ones, 1, len(ones))
    return b.apply(op, [x], {"axes": tuple(sorted(axes)) if len(axes) > 1 else axes[0]})


@recipe("expand_dims")
def _expand_dims(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim < 5)
    r = x.type.ndim
    return b.apply(op, [x], {"axis": b.ch.int(-r - 1, r)})


@recipe("concat")
def _concat(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1)
    xt = x.type
    axis = b.ch.int(0, xt.ndim - 1)

    def same_but_axis(t: TensorType) -> bool:
        return (
            t.dtype == xt.dtype
            and t.ndim == xt.ndim
            and all(
                i == axis or D.dims_equal(a, c) for i, (a, c) in enumerate(zip(t.shape, xt.shape))
            )
        )

    others = [b.pick(b.tensors(same_but_axis)) for _ in range(b.ch.int(0, 2))]
    inputs = [x] + others
    inputs = list(b.ch.perm(inputs))
    return b.apply(op, inputs, {"axis": axis - xt.ndim if b.ch.bool() else axis})


@recipe("split")
def _split(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1)
    axis = b.ch.int(0, x.type.ndim - 1)
    d = x.type.shape[axis]
    if isinstance(d, int):
        if b.ch.bool():
            # At most 8 sections (the C emitter's time grows with the square of the fields).
            spec: Any = b.ch.choice([k for k in range(1, min(d, 8) + 1) if d % k == 0] or [1])
        else:
            spec = tuple(sorted(b.ch.int(0, d) for _ in range(b.ch.int(1, 3))))
    else:
        spec = 1
    t = b.apply(op, [x], {"indices_or_sections": spec, "axis": axis}, base="s")
    if b.ch.int(0, 2):
        _project(b, t)
    return t


@recipe("memory.view")
def _memory_view(b: FnBuilder, op: OpDef) -> Val:
    """Some bytes of a tensor of static size, as a tensor of its dtype; of another dtype only
    when the bytes are the same on every backend (a parameter's, a constant's, or integers):
    a computed float's low bits differ within tolerance, and another dtype compares them
    exactly (seed 200097 of the second campaign: byte 3 of a computed f64, seen as bool)."""
    ch = b.ch
    x = b.pick_tensor(lambda t: t.is_static() and t.dtype != "bf16")
    xt = x.type
    exact = x.src in ("param", "const") or not _float(xt)
    # (Not as bool: a byte other than 0 and 1 is no bool numpy and C agree on.)
    others = [d for d in COMPUTABLE if d not in ("bf16", "bool")]
    dtype = ch.choice(others) if exact and ch.bool() else xt.dtype
    size = DTYPES[dtype].nbytes
    n = int(tensor_nbytes(xt)) // size
    if n == 0:
        raise Reject()
    k = ch.int(0, min(n, 12))
    shape = (k,) if ch.bool() else (1, k)
    offset = size * ch.int(0, n - k)
    return b.apply(op, [x], {"offset": offset, "shape": shape, "dtype": DType(dtype)})


@recipe("strided_slice")
def _strided_slice(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: any(isinstance(d, int) for d in t.shape))
    static = [i for i, d in enumerate(x.type.shape) if isinstance(d, int)]
    axes = b.ch.subset(static, 1, len(static))
    begin, end, strides = [], [], []
    for a in axes:
        d = x.type.shape[a]
        s = b.ch.choice([1, 1, 2, -1, -2, 3])
        lo, hi = b.ch.int(-d - 1, d + 1), b.ch.int(-d - 1, d + 1)
        begin.append(lo)
        end.append(hi)
        strides.append(s)
    attrs: dict[str, Any] = {"begin": tuple(begin), "end": tuple(end)}
    if b.ch.bool() or any(s != 1 for s in strides):
        attrs["strides"] = tuple(strides)
    if b.ch.bool() or axes != list(range(len(axes))):
        attrs["axes"] = tuple(axes)
    return b.apply(op, [x], attrs)


@recipe("take")
def _take(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1)
    axis = b.ch.int(0, x.type.ndim - 1)
    d = x.type.shape[axis]
    existing = b.tensors(lambda t: t.dtype in INDEX_DTYPES and t.ndim <= 2)
    if existing and b.ch.bool():
        idx = b.pick(existing)
    else:
        shape = tuple(b.ch.int(1, 4) for _ in range(b.ch.int(0, 2)))
        hi = d if isinstance(d, int) else 3
        idx = b.new_input(TensorType(shape, b.ch.choice(INDEX_DTYPES)), small_ints=hi)
    return b.apply(op, [x, idx], {"axis": axis})


def _static_tensor(b: FnBuilder, pred: Callable[[TensorType], bool] = lambda t: True) -> Val:
    """A tensor of rank 1 to 3 with static dims, from the pool or new."""
    cands = b.tensors(lambda t: 1 <= t.ndim <= 3 and t.is_static() and pred(t))
    if cands and b.ch.bool():
        return b.pick(cands)
    shape = tuple(b.ch.int(1, 4) for _ in range(b.ch.int(1, 3)))
    dtype = b.ch.choice([d for d in b.ctx.dtypes if pred(TensorType((1,), d))] or ["f32"])
    return b.new_input(TensorType(shape, dtype))


def _indices(b: FnBuilder, shape: tuple[int, ...], hi: int) -> Val:
    """Index values in [-1, hi + 1]: negatives wrap, the largest clip."""
    return b.new_input(TensorType(shape, b.ch.choice(INDEX_DTYPES)), small_ints=hi)


@recipe("pad")
def _pad(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1)
    mode = b.ch.choice(["constant", "reflect", "edge", "wrap"])
    pads = []
    for i in range(2 * x.type.ndim):
        d = x.type.shape[i % x.type.ndim]
        crop = -1 if isinstance(d, int) and d >= 3 and b.ch.int(0, 3) == 0 else 0
        pads.append(crop or b.ch.int(0, 3))
    if mode != "constant" and not x.type.is_static():
        mode = "constant"
    attrs: dict[str, Any] = {"pads": tuple(pads), "mode": mode}
    if mode == "constant" and b.ch.bool():
        attrs["value"] = b.ch.choice(FLOAT_LITERALS)
    return b.apply(op, [x], attrs)


@recipe("tile")
def _tile(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: 1 <= t.ndim <= 3)
    return b.apply(op, [x], {"repeats": tuple(b.ch.int(1, 3) for _ in range(x.type.ndim))})


@recipe("gather_elements", "scatter_elements")
def _elements(b: FnBuilder, op: OpDef) -> Val:
    x = _static_tensor(b, lambda t: op.name == "gather_elements" or t.dtype != "bool")
    shape = tuple(int(d) for d in x.type.shape)
    axis = b.ch.int(0, len(shape) - 1)
    ishape = tuple(b.ch.int(1, d) for d in shape)
    if op.name == "gather_elements":
        ishape = tuple(b.ch.int(1, 3) if i == axis else d for i, d in enumerate(ishape))
    idx = _indices(b, ishape, shape[axis])
    attrs: dict[str, Any] = {"axis": axis - len(shape) if b.ch.bool() else axis}
    if op.name == "gather_elements":
        return b.apply(op, [x, idx], attrs)
    upd = b.new_input(TensorType(ishape, x.type.dtype))
    attrs["reduction"] = b.ch.choice(["none", "add", "mul", "max", "min"])
    return b.apply(op, [x, idx, upd], attrs)


@recipe("gather_nd", "scatter_nd")
def _nd(b: FnBuilder, op: OpDef) -> Val:
    x = _static_tensor(b, lambda t: op.name == "gather_nd" or t.dtype != "bool")
    shape = tuple(int(d) for d in x.type.shape)
    batch = b.ch.int(0, len(shape) - 1) if op.name == "gather_nd" else 0
    k = b.ch.int(1, len(shape) - batch)
    lead = shape[:batch] + tuple(b.ch.int(1, 3) for _ in range(b.ch.int(0, 1)))
    idx = b.new_input(
        TensorType(lead + (k,), b.ch.choice(INDEX_DTYPES)), small_ints=max(shape[batch : batch + k])
    )
    if op.name == "gather_nd":
        return b.apply(op, [x, idx], {"batch_dims": batch})
    upd = b.new_input(TensorType(lead + shape[k:], x.type.dtype))
    reduction = b.ch.choice(["none", "add", "mul", "max", "min"])
    return b.apply(op, [x, idx, upd], {"reduction": reduction})


@recipe("one_hot")
def _one_hot(b: FnBuilder, op: OpDef) -> Val:
    depth = b.ch.int(1, 4)
    shape = tuple(b.ch.int(1, 3) for _ in range(b.ch.int(0, 2)))
    idx = _indices(b, shape, depth)
    dtype = b.ch.choice(list(b.ctx.dtypes) or ["f32"])
    values = b.new_input(TensorType((2,), dtype))
    axis = b.ch.int(-len(shape) - 1, len(shape))
    return b.apply(op, [idx, values], {"depth": depth, "axis": axis})


@recipe("trilu")
def _trilu(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 2)
    return b.apply(op, [x], {"k": b.ch.int(-2, 2), "upper": b.ch.bool()})


@recipe("matmul")
def _matmul(b: FnBuilder, op: OpDef) -> Val:
    a = b.pick_tensor(lambda t: t.ndim >= 1 and t.dtype != "bool")
    k = a.type.shape[-1]
    m = b.size()
    if b.ch.bool() or a.type.ndim == 1:
        want = TensorType((k, m), a.type.dtype)
    else:
        want = TensorType(a.type.shape[:-2] + (k, m), a.type.dtype)
    cands = b.tensors(
        lambda t: (
            t.dtype == want.dtype
            and t.ndim == want.ndim
            and all(D.dims_equal(x, y) for x, y in zip(t.shape[:-1], want.shape[:-1]))
        )
    )
    w = b.pick(cands) if cands and b.ch.bool() else b.new_input(want)
    args = [a, w] if b.ch.int(0, 3) else [w, a]
    return b.apply(op, args, {})


@recipe("dense")
def _dense(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1 and t.dtype != "bool")
    k = x.type.shape[-1]
    units = b.size(static=True)
    w = b.new_input(TensorType((units, k), x.type.dtype))
    args = [x, w]
    if b.ch.bool():
        args.append(b.new_input(TensorType((units,), x.type.dtype)))
    return b.apply(op, args, {})


def _rank4(b: FnBuilder, pred: Callable[[TensorType], bool] = lambda t: True) -> Val:
    cands = b.tensors(lambda t: t.ndim == 4 and pred(t))
    if cands and b.ch.int(0, 3):
        return b.pick(cands)
    shape = (b.ch.choice([1, 2]), b.size(static=True), b.size(), b.ch.choice([3, 4, 5]))
    dtype = b.ch.choice([d for d in b.ctx.dtypes if pred(TensorType((1, 1, 1, 1), d))] or ["f32"])
    return b.new_input(TensorType(shape, dtype))


def _float(t: TensorType) -> bool:
    return t.dtype in FLOATS


def _numeric(t: TensorType) -> bool:
    return t.dtype != "bool" and t.dtype != "bf16"


@recipe("conv2d")
def _conv2d(b: FnBuilder, op: OpDef) -> Val:
    x = _rank4(b, _numeric)
    c = x.type.shape[1]
    if not isinstance(c, int):
        raise Reject()
    groups = b.ch.choice([g for g in (1, 2, 3) if c % g == 0])
    o = groups * b.ch.int(1, 2)
    kh, kw = b.ch.int(1, 3), b.ch.int(1, 3)
    w = b.new_input(TensorType((o, c // groups, kh, kw), x.type.dtype))
    args = [x, w]
    if b.ch.bool():
        args.append(b.new_input(TensorType((o,), x.type.dtype)))
    attrs: dict[str, Any] = {}
    if groups > 1:
        attrs["groups"] = groups
    if b.ch.bool():
        attrs["padding"] = b.ch.choice([1, (0, 1), (1, 0, 0, 2)])
    if b.ch.bool():
        attrs["strides"] = b.ch.choice([2, (1, 2)])
    if b.ch.int(0, 3) == 0:
        attrs["dilation"] = b.ch.choice([2, (2, 1)])
    return b.apply(op, args, attrs)


@recipe("conv2d_transpose")
def _conv2d_transpose(b: FnBuilder, op: OpDef) -> Val:
    x = _rank4(b, _numeric)
    c = x.type.shape[1]
    if not isinstance(c, int):
        raise Reject()
    groups = b.ch.choice([g for g in (1, 2, 3) if c % g == 0])
    og = b.ch.int(1, 2)
    kh, kw = b.ch.int(1, 3), b.ch.int(1, 3)
    w = b.new_input(TensorType((c, og, kh, kw), x.type.dtype))
    args = [x, w]
    if b.ch.bool():
        args.append(b.new_input(TensorType((og * groups,), x.type.dtype)))
    attrs: dict[str, Any] = {}
    if groups > 1:
        attrs["groups"] = groups
    if b.ch.bool():
        attrs["strides"] = b.ch.choice([2, (1, 2), (3, 1)])
    if b.ch.bool():
        attrs["padding"] = b.ch.choice([(0, 0, 0, 0), (0, 1, 0, 0), (1, 0, 0, 1)])
    if b.ch.int(0, 3) == 0:
        attrs["dilation"] = b.ch.choice([2, (2, 1)])
    if b.ch.int(0, 3) == 0:
        attrs["output_padding"] = (1, 0)
    return b.apply(op, args, attrs)


@recipe("resize")
def _resize(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: 1 <= t.ndim <= 4 and t.dtype != "bf16")
    float_x = _float(x.type)
    mode = b.ch.choice(["nearest", "linear", "cubic"] if float_x else ["nearest"])
    coord = b.ch.choice(
        [
            "half_pixel",
            "pytorch_half_pixel",
            "align_corners",
            "asymmetric",
            "half_pixel_symmetric",
            "tf_half_pixel_for_nn",
            "tf_crop_and_resize",
        ]
    )
    sizes = list(x.type.shape)
    scales: list[float] | None = [1.0] * x.type.ndim if b.ch.bool() else None
    for a, d in enumerate(x.type.shape):
        if isinstance(d, int) and d > 0 and b.ch.bool():
            sizes[a] = b.ch.int(1, 7)
            if scales is not None:
                scales[a] = b.ch.choice([sizes[a] / d, 0.5, 1.5, 2.0])
    attrs: dict[str, Any] = {
        "sizes": tuple(sizes),
        "mode": mode,
        "coordinate_transformation_mode": coord,
        "nearest_mode": b.ch.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]),
    }
    if scales is not None:
        attrs["scales"] = tuple(scales)
    if coord == "tf_crop_and_resize":
        n = x.type.ndim
        attrs["roi"] = (
            tuple([0.0] * n + [1.0] * n) if b.ch.bool() else tuple([-0.25] * n + [0.75] * n)
        )
        attrs["extrapolation_value"] = 2.5
    if mode != "nearest" and b.ch.bool():
        attrs["exclude_outside"] = True
    if mode != "nearest" and b.ch.bool():
        attrs["antialias"] = True
    return b.apply(op, [x], attrs)


@recipe("grid_sample")
def _grid_sample(b: FnBuilder, op: OpDef) -> Val:
    """x (N, C, spatial...) with static non-empty spatial axes, a new float grid
    (N, O..., r) (its random values in [-1, 1) reach past the border under align_corners=0
    and cubic)."""

    def fits(t: TensorType) -> bool:
        spatial = t.shape[2:]
        return (
            3 <= t.ndim <= 5 and _numeric(t) and all(isinstance(d, int) and d > 0 for d in spatial)
        )

    x = b.pick_tensor(fits)
    float_x = _float(x.type)
    mode = b.ch.choice(["nearest", "linear", "cubic"] if float_x else ["nearest"])
    r = x.type.ndim - 2
    out = tuple(b.ch.int(1, 4) for _ in range(r))
    gdtype = b.ch.choice([d for d in b.ctx.dtypes if d in FLOATS] or ["f32"])
    grid = b.new_input(TensorType((x.type.shape[0], *out, r), gdtype))
    attrs = {
        "mode": mode,
        "padding_mode": b.ch.choice(["zeros", "border", "reflection"]),
        "align_corners": b.ch.bool(),
    }
    return b.apply(op, [x, grid], attrs)


@recipe("max_pool2d", "avg_pool2d")
def _pool(b: FnBuilder, op: OpDef) -> Val:
    x = _rank4(b, _numeric if op.name == "max_pool2d" else _float)
    attrs: dict[str, Any] = {"pool_size": b.ch.choice([1, 2, (2, 3), (3, 1)])}
    if b.ch.bool():
        attrs["strides"] = b.ch.choice([2, (1, 2)])
    if b.ch.bool():
        attrs["padding"] = b.ch.choice([1, (0, 1), (1, 0, 0, 1)])
    if b.ch.bool():
        attrs["ceil_mode"] = True
    if b.ch.int(0, 3) == 0:
        attrs["dilation"] = (1, 2)
    if op.name == "avg_pool2d" and b.ch.bool():
        attrs["count_include_pad"] = True
    return b.apply(op, [x], attrs)


@recipe("global_avg_pool2d")
def _gap(b: FnBuilder, op: OpDef) -> Val:
    return b.apply(op, [_rank4(b, _float)], {})


@recipe("batch_norm")
def _batch_norm(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1 and _float(t))
    axis = b.ch.int(0, x.type.ndim - 1)
    c = x.type.shape[axis]
    if not isinstance(c, int):
        raise Reject()
    vec = TensorType((c,), x.type.dtype)
    params = [b.new_input(vec) for _ in range(3)] + [b.new_input(vec, positive=True)]
    attrs: dict[str, Any] = {"axis": axis - x.type.ndim if b.ch.bool() else axis}
    if b.ch.bool():
        attrs["epsilon"] = 0.001
    return b.apply(op, [x] + params, attrs)


@recipe("layer_norm", "rms_norm")
def _norm(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1 and _float(t))
    r = x.type.ndim
    k = b.ch.int(1, min(2, r))
    axes = tuple(range(-k, 0))
    shape = x.type.shape[r - k :]
    if not all(isinstance(d, int) for d in shape):
        raise Reject()
    pt = TensorType(shape, x.type.dtype)
    params = [b.new_input(pt) for _ in range(2 if op.name == "layer_norm" else 1)]
    attrs: dict[str, Any] = {} if axes == (-1,) and b.ch.bool() else {"axes": axes}
    return b.apply(op, [x] + params, attrs)


@recipe("rotary_embedding")
def _rotary_embedding(b: FnBuilder, op: OpDef) -> Val:
    x = _rank4(b, _float)
    seq_axis = b.ch.choice([1, 2])
    batch, seq, head = x.type.shape[0], x.type.shape[seq_axis], x.type.shape[3]
    if not isinstance(head, int) or head < 2:
        raise Reject()
    half = b.ch.int(1, head // 2)
    ct = TensorType((batch if b.ch.bool() else 1, seq, half), x.type.dtype)
    attrs = {"seq_axis": seq_axis, "interleaved": b.ch.bool()}
    return b.apply(op, [x, b.new_input(ct), b.new_input(ct)], attrs)


@recipe("attention")
def _attention(b: FnBuilder, op: OpDef) -> Val:
    q = _rank4(b, _float)
    batch, hq, sq, d = q.type.shape
    if not isinstance(hq, int):
        raise Reject()
    hkv = b.ch.choice([h for h in (1, 2, hq) if hq % h == 0])
    skv, dv, dt = b.size(), b.ch.choice([1, 2, 3]), q.type.dtype
    args = [q, b.new_input(TensorType((batch, hkv, skv, d), dt))]
    args.append(b.new_input(TensorType((batch, hkv, skv, dv), dt)))
    attrs: dict[str, Any] = {"scale": b.ch.choice([0.5, 1.0])}
    if b.ch.bool():
        full = (batch, hq, sq, skv)
        args.append(b.new_input(TensorType(tuple(1 if b.ch.bool() else n for n in full), dt)))
        if b.ch.bool() and isinstance(skv, int):
            lens = TensorType((batch,), "i64")
            args.append(b.new_input(lens, small_ints=skv + 1))
    if b.ch.bool():
        attrs["causal"] = True
        attrs["offset"] = b.ch.int(-1, 2)
    if b.ch.bool():
        attrs["softcap"] = 2.0
    if b.ch.bool():
        attrs["window_left"] = b.ch.int(-1, 2)
        attrs["window_right"] = b.ch.int(-1, 2)
        attrs.setdefault("offset", b.ch.int(0, 2))
    if dt in ("f16", "bf16") and b.ch.bool():
        attrs["rounding"] = dt
        attrs["softmax_steps"] = b.ch.bool()
    attrs["result"] = b.ch.choice(["y", "y", "qk", "qk_softcap", "qk_bias", "probs"])
    return b.apply(op, args, attrs)


@recipe("linear_attention")
def _linear_attention(b: FnBuilder, op: OpDef) -> Val:
    q = _rank4(b, _float)
    batch, hq, steps, dk = q.type.shape
    if not isinstance(hq, int) or not isinstance(dk, int):
        raise Reject()
    hkv = b.ch.choice([h for h in (1, 2, hq) if hq % h == 0])
    dv, dt = b.ch.choice([1, 2, 3]), q.type.dtype
    rule = b.ch.choice(["linear", "gated", "delta", "gated_delta"])
    args = [q, b.new_input(TensorType((batch, hkv, steps, dk), dt))]
    args.append(b.new_input(TensorType((batch, hkv, steps, dv), dt)))
    state_dt = b.ch.choice([dt, "f32"])
    args.append(b.new_input(TensorType((batch, hkv, dk, dv), state_dt)))
    if rule in ("gated", "gated_delta"):
        wide = dk if b.ch.bool() else 1
        args.append(b.new_input(TensorType((batch, hkv, steps, wide), dt)))
    if rule in ("delta", "gated_delta"):
        heads = hkv if b.ch.bool() else 1
        args.append(b.new_input(TensorType((batch, heads, steps, 1), dt), positive=True))
    return b.apply(op, args, {"scale": b.ch.choice([0.5, 1.0]), "rule": rule}, base="s")


@recipe("softmax", "log_softmax")
def _softmax(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1 and _float(t))
    return b.apply(op, [x], {"axis": b.ch.int(-x.type.ndim, x.type.ndim - 1)})


@recipe("cumsum", "cumprod")
def _cumulative(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1 and t.dtype not in ("bool", "bf16"))
    attrs = {
        "axis": b.ch.int(-x.type.ndim, x.type.ndim - 1),
        "exclusive": b.ch.bool(),
        "reverse": b.ch.bool(),
    }
    return b.apply(op, [x], attrs)


@recipe("topk_indices")
def _topk_indices(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(
        lambda t: (
            t.ndim >= 1
            and t.dtype not in ("bool", "bf16")
            and isinstance(t.shape[-1], int)
            and t.shape[-1] >= 1
        )
    )
    k = b.ch.int(0, min(3, int(x.type.shape[-1])))
    return b.apply(op, [x], {"k": k, "largest": b.ch.bool()})


@recipe("bitcast")
def _bitcast(b: FnBuilder, op: OpDef) -> Val:
    """An integer tensor's bits read as another type of its width (integers only as the
    source: a float's NaN payload may differ between backends, its bits are no result)."""
    x = b.pick_tensor(lambda t: t.dtype in INTS)
    width = DTYPES[x.type.dtype].nbytes
    targets = [d for d in FLOATS + INTS if DTYPES[d].nbytes == width and d != x.type.dtype]
    return b.apply(op, [x], {"dtype": DType(b.ch.choice(targets))})


@recipe("det")
def _det(b: FnBuilder, op: OpDef) -> Val:
    """Square float matrices: one of the pool's, or a new input of 1 to 4 rows."""
    square = b.tensors(
        lambda t: (
            _float(t)
            and t.ndim >= 2
            and isinstance(t.shape[-1], int)
            and t.shape[-1] == t.shape[-2]
            and t.shape[-1] <= 4
        )
    )
    if square and b.ch.bool():
        return b.apply(op, [b.pick(square)], {})
    k = b.ch.int(1, 4)
    lead = tuple(b.size() for _ in range(b.ch.int(0, 1)))
    x = b.new_input(TensorType(lead + (k, k), b.ch.choice(list(FLOATS))))
    return b.apply(op, [x], {})


@recipe("lrn")
def _lrn(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1 and _float(t))
    attrs = {"size": b.ch.choice([1, 2, 3, 5]), "axis": b.ch.int(0, x.type.ndim - 1)}
    if b.ch.bool():
        attrs["alpha"] = 0.01
    return b.apply(op, [x], attrs)


def _spatial(b: FnBuilder, pred: Callable[[TensorType], bool]) -> Val:
    """An (N, C, S...) input of 1 to 3 spatial axes (static channels)."""
    cands = b.tensors(lambda t: 3 <= t.ndim <= 5 and isinstance(t.shape[1], int) and pred(t))
    if cands and b.ch.int(0, 3):
        return b.pick(cands)
    r = b.ch.int(1, 3)
    spatial = tuple(b.ch.choice([3, 4, 5]) for _ in range(r - 1)) + (b.size(),)
    shape = (b.ch.choice([1, 2]), b.ch.choice([1, 2, 4]), *spatial)
    dtype = b.ch.choice([d for d in b.ctx.dtypes if pred(TensorType((1, 1, 1), d))] or ["f32"])
    return b.new_input(TensorType(shape, dtype))


def _window_attrs(b: FnBuilder, r: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if b.ch.bool():
        attrs["strides"] = b.ch.choice([2, tuple(b.ch.int(1, 2) for _ in range(r))])
    if b.ch.bool():
        attrs["padding"] = b.ch.choice([1, tuple(b.ch.int(0, 1) for _ in range(2 * r))])
    if b.ch.int(0, 3) == 0:
        attrs["dilation"] = tuple(b.ch.int(1, 2) for _ in range(r))
    return attrs


@recipe("conv_nd")
def _conv_nd(b: FnBuilder, op: OpDef) -> Val:
    x = _spatial(b, _numeric)
    c = x.type.shape[1]
    assert isinstance(c, int)
    r = x.type.ndim - 2
    groups = b.ch.choice([g for g in (1, 2) if c % g == 0])
    o = groups * b.ch.int(1, 2)
    k = tuple(b.ch.int(1, 2) for _ in range(r))
    args = [x, b.new_input(TensorType((o, c // groups, *k), x.type.dtype))]
    if b.ch.bool():
        args.append(b.new_input(TensorType((o,), x.type.dtype)))
    attrs = _window_attrs(b, r)
    if groups > 1:
        attrs["groups"] = groups
    return b.apply(op, args, attrs)


@recipe("max_pool_nd", "avg_pool_nd", "lp_pool_nd", "max_pool_indices")
def _pool_nd(b: FnBuilder, op: OpDef) -> Val:
    x = _spatial(b, _numeric if op.name.startswith("max_pool") else _float)
    r = x.type.ndim - 2
    attrs = _window_attrs(b, r)
    attrs["pool_size"] = tuple(b.ch.int(2, 3) for _ in range(r))
    if b.ch.bool():
        attrs["ceil_mode"] = True
    if op.name == "avg_pool_nd" and b.ch.bool():
        attrs["count_include_pad"] = True
    if op.name == "lp_pool_nd":
        attrs["p"] = b.ch.choice([1.0, 2.0, 3.0])
    if op.name == "max_pool_indices" and b.ch.bool():
        attrs["storage_order"] = 1
    return b.apply(op, [x], attrs)


@recipe("group_norm")
def _group_norm(b: FnBuilder, op: OpDef) -> Val:
    x = _spatial(b, _float)
    c = x.type.shape[1]
    assert isinstance(c, int)
    groups = b.ch.choice([g for g in (1, 2, 4) if c % g == 0])
    vec = TensorType((c,), x.type.dtype)
    return b.apply(op, [x, b.new_input(vec), b.new_input(vec)], {"num_groups": groups})


@recipe("mean_variance_norm", "inv_std_dev")
def _axes_norm(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(lambda t: t.ndim >= 1 and _float(t))
    axes = tuple(range(b.ch.int(0, x.type.ndim - 1), x.type.ndim))
    return b.apply(op, [x], {"axes": axes})


@recipe(
    "sum",
    "mean",
    "max",
    "min",
    "prod",
    "sum_square",
    "l1_norm",
    "l2_norm",
    "log_sum",
    "log_sum_exp",
)
def _reduce(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor(_float if op.float_only else lambda t: True)
    attrs: dict[str, Any] = {}
    axes = random_attr(b, "axes", x.type)
    if axes is not None:
        attrs["axes"] = axes
    if b.ch.bool():
        attrs["keepdims"] = True
    return b.apply(op, [x], attrs)


@recipe("cast")
def _cast(b: FnBuilder, op: OpDef) -> Val:
    x = b.pick_tensor()
    targets = list(COMPUTABLE) if b.ch.int(0, 2) == 0 else b.ctx.dtypes + ["bool"]
    return b.apply(op, [x], {"dtype": DType(b.ch.choice(sorted(set(targets) - {"bf16"})))})


# ---------------------------------------------------------------------------------------
# Patterns of the memory-sharing passes (issue 15). ComputeInPlace lets an op write its
# output over an input that dies at it, where the op's registry record allows it
# (``OpDef.inplace``); ElideConcatSplit has the inputs of a concat written straight into
# their slices of the result and makes split's outputs views of its input, when every dim
# before the axis is 1 and the shapes are static. Random DAGs rarely line these up, so
# these steps build them on purpose: chains of such ops over values that die at them;
# concats and splits on such an axis of values computed by kernels, nested, with an input
# used again after the concat, or with one that must keep the copy (a parameter, a
# constant, a view, one value twice, a batch above 1, a symbolic dim); and values that
# must not be overwritten (used again, seen through a view or a tuple, returned, a
# parameter or a constant). ReorderForMemory lowers the peak of live bytes by reordering
# independent bindings: fans give it independent branches whose written order holds their
# large values live at once.

INPLACE_OPS: tuple[OpDef, ...] = tuple(op for op in FUZZED_OPS if op.inplace)
"""The ops whose output may overwrite an input (their registry record says which)."""
UNARY_INPLACE = tuple(op for op in INPLACE_OPS if op.max_inputs == 1)
STEEP_NEAR_ZERO = ("rsqrt", "log", "sqrt", "divide", "power")
"""Ops that turn a rounding difference near zero into a large one. f16 is compared at two
ulps (tests/backend/c's tolerance), and the norms these chains often start from centre their
outputs on zero: C's f16 layer_norm and numpy's differ there by an ulp, which ``rsqrt``
made 1% (seed 101395 of the first campaign). Chains over f16 leave them out."""
NORMS = ("batch_norm", "layer_norm", "rms_norm")


def _inplace_op(b: FnBuilder, x: Val, unary: bool = False) -> OpDef:
    """An op that may compute in place over ``x`` (see :data:`STEEP_NEAR_ZERO`)."""
    ops = UNARY_INPLACE if unary else INPLACE_OPS
    if isinstance(x.type, TensorType) and x.type.dtype == "f16":
        ops = tuple(op for op in ops if op.name not in STEEP_NEAR_ZERO)
    return b.ch.choice(ops)


def _same_type(a: Type, b: Type) -> bool:
    return (
        isinstance(a, TensorType)
        and isinstance(b, TensorType)
        and a.dtype == b.dtype
        and a.ndim == b.ndim
        and all(D.dims_equal(x, y) for x, y in zip(a.shape, b.shape))
    )


def _owned(b: FnBuilder, pred: Callable[[TensorType], bool] = lambda t: True) -> list[Val]:
    """Values whose memory the function owns (computed by a kernel op or a primitive call):
    what an in-place op may write over once nothing else needs them."""
    return [v for v in b.tensors(pred) if v.src in ("kernel", "call")]


def _contiguous_axes(t: TensorType) -> list[int]:
    """Axes along which ``t``'s parts are contiguous runs of bytes (every dim before is 1)."""
    out = []
    for a in range(t.ndim):
        out.append(a)
        if t.shape[a] != 1:
            break
    return out


def _with_axis(t: TensorType, axis: int, size: D.Dim) -> TensorType:
    return TensorType(t.shape[:axis] + (size,) + t.shape[axis + 1 :], t.dtype)


def _try(fn: Callable[[], Val], tries: int = 4) -> Val:
    for _ in range(tries - 1):
        try:
            return fn()
        except Reject:
            pass
    return fn()


def _overwrite(b: FnBuilder, op: OpDef, x: Val) -> Val:
    """``op`` with ``x`` at an input its output may overwrite, giving ``x``'s type (Reject if
    the op cannot take ``x`` that way)."""
    ch = b.ch
    xt = x.type
    if not isinstance(xt, TensorType):
        raise Reject()
    if op.name in NORMS:
        return _norm_over(b, op, x)
    attrs: dict[str, Any] = {}
    if op.max_inputs == 1:
        inputs = [x]
        if op.name == "clip":
            lo, hi = sorted([ch.choice(FLOAT_LITERALS), ch.choice(FLOAT_LITERALS)])
            attrs = {"a_min": lo, "a_max": hi}
        elif op.name in ("softmax", "log_softmax"):
            if xt.ndim == 0:
                raise Reject()
            attrs = {"axis": ch.int(-xt.ndim, xt.ndim - 1)}
        elif op.name == "leaky_relu" and ch.bool():
            attrs = {"alpha": 0.25}
        elif op.name == "mean_variance_norm":
            if xt.ndim == 0:
                raise Reject()
            attrs = {"axes": tuple(range(ch.int(0, xt.ndim - 1), xt.ndim))}
    elif op.name == "group_norm":
        c = xt.shape[1] if xt.ndim >= 2 else None
        if not isinstance(c, int) or not _float(xt):
            raise Reject()
        vt = TensorType((c,), xt.dtype)
        inputs = [x, b.new_input(vt), b.new_input(vt)]
        attrs = {"num_groups": ch.choice([g for g in (1, 2, 3) if c % g == 0])}
    elif op.name == "where":
        if xt.dtype == "bool" and ch.bool():
            inputs = [x, _partner(b, x), _partner(b, x)]  # x is the condition
        else:
            src = _partner(b, x) if ch.bool() else x
            cond = b.apply(REGISTRY.get("cast"), [src], {"dtype": DType("bool")})
            other = _partner(b, x)
            inputs = [cond, x, other] if ch.bool() else [cond, other, x]
    else:
        other = _partner(b, x)
        inputs = [x, other] if ch.bool() else [other, x]
    if not _same_type(b.infer(op, inputs, attrs), xt):
        raise Reject()
    return b.apply(op, inputs, attrs)


def _partner(b: FnBuilder, x: Val) -> Val:
    """The other input of a binary op over ``x``: ``x`` itself, a tensor that broadcasts to
    it, another value of its type (maybe computed), a new input."""
    ch = b.ch
    xt = x.type
    assert isinstance(xt, TensorType)
    r = ch.int(0, 5)
    try:
        if r == 0:
            return x  # one value at two inputs the op may both overwrite
        if r == 1:
            return b.new_input(TensorType(xt.shape[ch.int(0, xt.ndim) :], xt.dtype))
        same = [v for v in b.tensors(lambda t: _same_type(t, xt)) if v.name != x.name]
        if r <= 3 and same:
            return b.pick(same)
        if r == 4:
            return _produce(b, xt, simple=True)
        return b.new_input(xt)
    except Reject:
        return x


def _norm_over(b: FnBuilder, op: OpDef, x: Val) -> Val:
    """A batch, layer or RMS norm of ``x``; its vectors are sometimes computed (so that on a
    tensor of their shape, a dying vector may be the one overwritten)."""
    ch = b.ch
    xt = x.type
    assert isinstance(xt, TensorType)
    if xt.ndim == 0 or not _float(xt):
        raise Reject()
    attrs: dict[str, Any] = {}
    if op.name == "batch_norm":
        axis = ch.int(0, xt.ndim - 1)
        vt = TensorType((xt.shape[axis],), xt.dtype)
        vecs = [_vector(b, vt, positive=(i == 3)) for i in range(4)]
        attrs["axis"] = axis - xt.ndim if ch.bool() else axis
    else:
        k = ch.int(1, min(2, xt.ndim))
        vt = TensorType(xt.shape[xt.ndim - k :], xt.dtype)
        vecs = [_vector(b, vt) for _ in range(2 if op.name == "layer_norm" else 1)]
        if k > 1 or ch.bool():
            attrs["axes"] = tuple(range(-k, 0))
    if not vt.is_static():
        raise Reject()
    v = b.apply(op, [x, *vecs], attrs)
    for u in vecs:
        if u.src == "kernel" and ch.int(0, 2):
            b.retire(u)
    return v


def _vector(b: FnBuilder, t: TensorType, positive: bool = False) -> Val:
    """A parameter, weight or constant of type ``t``, or one computed from it."""
    if not t.is_static():
        raise Reject()
    v = b.new_input(t, positive=positive)
    if b.ch.int(0, 2):
        return v
    op = REGISTRY.get("exp") if positive else _inplace_op(b, v, unary=True)
    try:
        return _overwrite(b, op, v)
    except Reject:
        return v


def _produce(b: FnBuilder, t: TensorType, simple: bool = False) -> Val:
    """A value of type ``t`` computed by a kernel (from a new input or a value of that type;
    a 1x1 convolution for a batch-1 image)."""
    ch = b.ch
    if (
        not simple
        and t.ndim == 4
        and t.shape[0] == 1
        and t.is_static()
        and _numeric(t)
        and ch.int(0, 3) == 0
    ):
        cin = ch.choice([1, 2, 3])
        src = b.new_input(TensorType((1, cin) + t.shape[2:], t.dtype))
        w = b.new_input(TensorType((t.shape[1], cin, 1, 1), t.dtype))
        return b.apply(REGISTRY.get("conv2d"), [src, w], {})
    same = b.tensors(lambda u: _same_type(u, t))
    src = b.pick(same) if same and ch.bool() else b.new_input(t)
    for _ in range(4):
        try:
            return _overwrite(b, _inplace_op(b, src, unary=simple), src)
        except Reject:
            pass
    return b.apply(REGISTRY.get("add"), [src, src], {})


def _chain(b: FnBuilder) -> Val:
    """Ops that may compute in place, each over the previous result: usually it dies there;
    sometimes it is used again right after, through a view made before, through a tuple,
    or returned (then it must not be overwritten)."""
    ch = b.ch
    owned = _owned(b)
    x = b.pick(owned) if owned and ch.int(0, 3) else b.pick_tensor()
    for _ in range(ch.int(1, 4)):
        hold = ch.int(0, 9)
        held = None
        if hold == 0 and isinstance(x.type, TensorType) and x.type.ndim < 5:
            held = b.apply(REGISTRY.get("expand_dims"), [x], {"axis": 0})
        elif hold == 1 and not b.primitive:
            held = b.bind(TupleExpr((Var(x.name),)), TupleType((x.type,)), "t", src="tuple")
        elif hold == 2 and not b.primitive:
            b.keep.append(x)
        y = _try(lambda: _overwrite(b, _inplace_op(b, x), x))
        if hold == 3:
            b.apply(REGISTRY.get("add"), [y, x], {})  # x used after the op
        elif held is not None and held.src == "view":
            _try(lambda: _overwrite(b, _inplace_op(b, held, unary=True), held))
        elif held is not None:
            _project(b, held)
        elif hold >= 5:
            b.retire(x)
        x = y
    return x


def _join_template(b: FnBuilder) -> tuple[TensorType, int]:
    """A type and an axis to concatenate or split along: mostly one where the parts are
    contiguous (a batch-1 channel axis, axis 0, ...), sometimes one where they are not (a
    batch of 2) or a symbolic dim (both keep their copies)."""
    ch = b.ch
    dtype = ch.choice(b.ctx.dtypes)

    def s() -> int:
        return b.size(static=True)

    kind = ch.int(0, 11)
    if kind < 3:
        cands = b.tensors(lambda t: t.ndim >= 1 and t.is_static())
        if cands:
            t = b.pick(cands).type
            axes = _contiguous_axes(t)
            return t, axes[-1] if ch.int(0, 2) else ch.choice(axes)
    if kind <= 5:
        return TensorType((1, s(), s(), s()), dtype), 1
    if kind == 6:
        return TensorType((s(),), dtype), 0
    if kind == 7:
        return TensorType((s(), s()), dtype), 0
    if kind == 8:
        return (
            (TensorType((1, s(), s()), dtype), 1)
            if ch.bool()
            else (TensorType((1, 1, s()), dtype), 2)
        )
    if kind == 9:
        return TensorType((2, s(), s(), s()), dtype), 1  # not contiguous: keeps its copy
    syms = [d for d in b.sizes if not isinstance(d, int)]
    if kind == 10 and syms:
        return TensorType((1, s(), ch.choice(syms)), dtype), 1  # symbolic: keeps its copy
    return TensorType((1, s(), s()), dtype), ch.int(0, 1)


def _join(b: FnBuilder, t: TensorType | None = None, axis: int = 0, depth: int = 0) -> Val:
    """A concat along ``axis`` of parts of type ``t`` but for their size along it."""
    ch = b.ch
    if t is None:
        t, axis = _join_template(b)
    parts: list[Val] = []
    for _ in range(ch.int(2, 4) if depth == 0 else 2):
        ti = _with_axis(t, axis, ch.choice([1, 1, 2, 3, 4]))
        r = ch.int(0, 19)
        if r < 11:
            v = _produce(b, ti)
            if ch.int(0, 3) == 0:
                y = _try(lambda: _overwrite(b, _inplace_op(b, v), v))
                b.retire(v)
                v = y
        elif r < 13 and depth < 2:
            v = _join(b, ti, axis, depth + 1)  # nested: its parts land in the outer result
        elif r == 13 and parts:
            v = ch.choice(parts)  # one value twice
        elif r == 14:
            v = b.new_input(ti)  # a parameter or a constant
        elif r == 15 and ti.is_static():
            n = math.prod(int(d) for d in ti.shape)
            flat = _produce(b, TensorType((n,), ti.dtype), simple=True)
            v = b.apply(REGISTRY.get("reshape"), [flat], {"newshape": ti.shape})  # a view
        elif r == 16:
            big = _produce(b, _with_axis(ti, axis, int(ti.shape[axis]) + ch.int(1, 2)))
            fields = b.apply(
                REGISTRY.get("split"),
                [big],
                {"indices_or_sections": (int(ti.shape[axis]),), "axis": axis},
                base="s",
            )
            v = _project(b, fields)  # a view of another buffer
        else:
            same = _owned(b, lambda u: _same_type(u, ti))
            v = b.pick(same) if same and ch.bool() else _produce(b, ti)
        parts.append(v)
    r = b.apply(REGISTRY.get("concat"), parts, {"axis": axis - t.ndim if ch.bool() else axis})
    for v in dict.fromkeys(p.name for p in parts):
        u = ch.int(0, 5)
        part = next(p for p in parts if p.name == v)
        if u == 0:
            _try(lambda: _overwrite(b, _inplace_op(b, part), part))  # read again after
        elif u > 1:
            b.retire(part)
    return r


def _cut(b: FnBuilder) -> Val:
    """A split along an axis (mostly contiguous), its fields projected and often computed
    over in place; the input sometimes used again afterwards."""
    ch = b.ch
    t, axis = _join_template(b)
    t = _with_axis(t, axis, ch.choice([2, 3, 4, 6]))
    r = ch.int(0, 9)
    if r < 5:
        x = _produce(b, t)
    elif r < 7:
        x = _join(b, t, axis)
    elif r < 8:
        x = b.new_input(t)  # a parameter or a constant: only read through the views
    else:
        cands = b.tensors(lambda u: u.ndim >= 1)
        x = b.pick(cands) if cands else _produce(b, t)
        axis = ch.choice(_contiguous_axes(x.type))
    d = x.type.shape[axis]
    if not isinstance(d, int):
        spec: Any = 1
    elif ch.bool():
        spec = ch.choice([k for k in range(1, min(d, 4) + 1) if d % k == 0] or [1])
    else:
        spec = tuple(sorted(ch.int(0, d) for _ in range(ch.int(1, 3))))
    s = b.apply(
        REGISTRY.get("split"),
        [x],
        {"indices_or_sections": spec, "axis": axis - x.type.ndim if ch.bool() else axis},
        base="s",
    )
    assert isinstance(s.type, TupleType)
    fields = []
    for i in range(len(s.type.fields)):
        if ch.int(0, 3):
            f = b.bind(Project(Var(s.name), i), s.type.fields[i], "f", src="project")
            fields.append(f)
            u = ch.int(0, 3)
            if u <= 1:
                try:
                    _overwrite(b, _inplace_op(b, f), f)
                except Reject:
                    continue
                if u == 0:
                    b.retire(f)
    u = ch.int(0, 3)
    if u == 0:
        _try(lambda: _overwrite(b, _inplace_op(b, x), x))  # the input read after its split
    elif u == 1 and len(fields) > 1:
        b.apply(REGISTRY.get("concat"), fields, {"axis": axis})  # views of x: keeps the copy
    elif u == 2:
        b.retire(x)
    return s


def _fan(b: FnBuilder) -> Val:
    """Two or three branches from one value, each a large intermediate (an op over it, or it
    next to itself) reduced to a scalar, the scalars summed. Mostly written breadth first
    (every large value before any reduction), so that they are all live at once and
    ReorderForMemory has an order to find (each large value reduced before the next is
    made); sometimes already depth first (nothing to gain), or with a large value read
    again at the end (a reduction's place is then fixed by that use)."""
    ch = b.ch

    def large(t: TensorType) -> bool:  # more than the 64 bytes a small value is planned in
        n = _elements_at(t, b.ctx.bounds, b.ctx.sym_values)
        return _numeric(t) and n * numpy_dtype(t.dtype).itemsize > 64

    pool = b.tensors(lambda t: t.ndim >= 1 and large(t))
    if pool and ch.int(0, 2) == 0:
        x = b.pick(pool)
    else:
        dtype = ch.choice([d for d in b.ctx.dtypes if d != "bool"])
        s = [max(b.size(static=True), 2) for _ in range(3)]
        x = b.new_input(TensorType((1, *s) if ch.bool() else tuple(s), dtype))
    breadth = ch.int(0, 3) > 0
    bigs: list[Val] = []
    smalls: list[Val] = []

    def reduce(big: Val) -> None:
        ops = ["sum", "max"] if x.type.dtype in INTS else ["sum", "mean", "max"]
        op = REGISTRY.get(ch.choice(ops))
        smalls.append(b.apply(op, [big], {}))
        if ch.int(0, 4):
            b.retire(big)

    for _ in range(ch.int(2, 3)):
        if ch.int(0, 2) == 0:
            axis = ch.int(0, x.type.ndim - 1)
            big = b.apply(REGISTRY.get("concat"), [x] * ch.int(2, 3), {"axis": axis})
        else:
            big = _try(lambda: _overwrite(b, _inplace_op(b, x, unary=True), x))
        bigs.append(big)
        if not breadth:
            reduce(big)
    if breadth:
        for big in bigs:
            reduce(big)
    acc = smalls[0]
    for v in smalls[1:]:
        acc = b.apply(REGISTRY.get("add"), [acc, v], {})
    if ch.int(0, 4) == 0:
        big = ch.choice(bigs)
        b.apply(REGISTRY.get("add"), [big, acc], {})  # a large value read at the end
    return acc


# ---------------------------------------------------------------------------------------
# Structure: aliases, tuples, projections, calls.


def _project(b: FnBuilder, t: Val) -> Val:
    assert isinstance(t.type, TupleType)
    i = b.ch.int(0, len(t.type.fields) - 1)
    return b.bind(Project(Var(t.name), i), t.type.fields[i], "f", src="project")


def _alias(b: FnBuilder) -> Val:
    v = b.pick(b.pool)
    return b.bind(Var(v.name), v.type, "a", src="alias")


def _tuple(b: FnBuilder) -> Val:
    k = b.ch.int(1, 3)
    fields = [b.pick(b.pool) for _ in range(k)]
    t = b.bind(
        TupleExpr(tuple(Var(f.name) for f in fields)),
        TupleType(tuple(f.type for f in fields)),
        "t",
        src="tuple",
    )
    if b.ch.int(0, 2):
        _project(b, t)
    return t


def _abstract(
    types: list[Type], prefix: str, keep_static: bool
) -> tuple[list[Type], dict[str, D.Dim]]:
    """``types`` with each symbolic dim (and maybe static ones) replaced by a callee dim
    name; equal dims get the same name. Returns the types and callee name -> caller dim."""
    names: list[tuple[D.Dim, str]] = []
    env: dict[str, D.Dim] = {}

    def dim(d: D.Dim) -> D.Dim:
        if isinstance(d, int) and keep_static:
            return d
        for known, nm in names:
            if D.dims_equal(known, d):
                return D.Sym(nm)
        nm = f"{prefix}{len(names)}"
        names.append((d, nm))
        env[nm] = d
        return D.Sym(nm)

    def conv(t: Type) -> Type:
        if isinstance(t, TensorType):
            return TensorType(tuple(dim(d) for d in t.shape), t.dtype)
        if isinstance(t, TupleType):
            return TupleType(tuple(conv(f) for f in t.fields))
        return t

    return [conv(t) for t in types], env


def _call_function(b: FnBuilder, primitive: bool) -> Val:
    """Define a new function on some values of the pool and call it (or call an earlier one)."""
    ctx = b.ctx
    earlier = [f for f in ctx.functions if f.is_primitive == primitive]
    if earlier and b.ch.int(0, 2) == 0:
        f = b.ch.choice(earlier)
        args = [_matching_arg(b, p.type) for p in f.params]
        if any(a is None for a in args):
            raise Reject()
        t = _call_result(f, [a.type for a in args])  # type: ignore[union-attr]
        how = "call" if primitive else "helper"
        return b.bind(CallFunc(f.name, tuple(Var(a.name) for a in args)), t, "r", src=how)  # type: ignore[union-attr]
    k = b.ch.int(1, 3)
    pred = (lambda t: t.dtype != "bf16") if primitive else (lambda t: True)
    args = (
        [b.pick_tensor(pred) for _ in range(k)] if primitive else [b.pick(b.pool) for _ in range(k)]
    )
    types, env = _abstract(
        [a.type for a in args], "p" if primitive else "q", keep_static=b.ch.bool()
    )
    params = [Param(f"arg{i}", t) for i, t in enumerate(types)]
    ctx.nfuncs += 1
    name = f"{'prim' if primitive else 'helper'}{ctx.nfuncs}"
    sub = FnBuilder(
        ctx, name, primitive, params, sizes=[D.Sym(s) for s in env] + [1, 2, 3], growable=False
    )
    sub.subst = {nm: D.substitute(d, b.subst) if b.subst else d for nm, d in env.items()}
    steps = b.ch.int(1, 4 if primitive else 6)
    for _ in range(steps):
        _step(sub, allow_calls=not primitive)
    fn = sub.finish(
        ret_many=not primitive, bounds=_callee_bounds(env, ctx.bounds) if not primitive else None
    )
    ctx.functions.append(fn)
    t = _call_result(fn, [a.type for a in args])
    how = "call" if primitive else "helper"
    return b.bind(CallFunc(fn.name, tuple(Var(a.name) for a in args)), t, "r", src=how)


def _callee_bounds(env: dict[str, D.Dim], bounds: dict[str, int]) -> dict[str, int] | None:
    out = {}
    for nm, d in env.items():
        if not isinstance(d, int):
            ub = D.upper_bound(d, bounds)
            if ub is not None and ub >= 1:  # upper_bounds are positive
                out[nm] = ub
    return out or None


def _matching_arg(b: FnBuilder, pt: Type) -> Val | None:
    cands = []
    for v in b.pool:
        env: dict[str, D.Dim] = {}
        if _unify(pt, v.type, env):
            cands.append(v)
    return b.pick(cands) if cands else None


def _unify(p: Type, a: Type, env: dict[str, D.Dim]) -> bool:
    if isinstance(p, TensorType):
        if not isinstance(a, TensorType) or p.dtype != a.dtype or p.ndim != a.ndim:
            return False
        for pd, ad in zip(p.shape, a.shape):
            if isinstance(pd, D.Sym):
                if pd.name in env:
                    if not D.dims_equal(env[pd.name], ad):
                        return False
                else:
                    env[pd.name] = ad
            elif not D.dims_equal(pd, ad):
                return False
        return True
    if isinstance(p, TupleType):
        return (
            isinstance(a, TupleType)
            and len(a.fields) == len(p.fields)
            and all(_unify(x, y, env) for x, y in zip(p.fields, a.fields))
        )
    return False


def _call_result(f: Function, arg_types: list[Type]) -> Type:
    env: dict[str, D.Dim] = {}
    for p, t in zip(f.params, arg_types):
        if not _unify(p.type, t, env):
            raise Reject()

    def subst(t: Type) -> Type:
        if isinstance(t, TensorType):
            return TensorType(tuple(D.simplify(D.substitute(d, env)) for d in t.shape), t.dtype)
        if isinstance(t, TupleType):
            return TupleType(tuple(subst(x) for x in t.fields))
        return t

    t = subst(f.ret_type)
    for leaf in tensor_leaves(t):
        if any(isinstance(d, int) and d < 0 for d in leaf.shape):
            raise Reject()  # the callee's shape formula is negative for these arguments
    return t


def _step(b: FnBuilder, allow_calls: bool) -> None:
    """One statement (or a few): an op of the registry, or structure."""
    ch = b.ch
    kind = ch.choice(
        ["op"] * 8
        + ["view"] * 2
        + ["chain"] * (1 if b.primitive else 3)
        + ([] if b.primitive else ["join"] * 3 + ["cut"] * 2 + ["fan"] * 3)
        + (["alias"] if not b.primitive else [])
        + ([] if b.primitive else ["tuple", "project"])
        + (["prim", "prim"] if allow_calls and not b.primitive else [])
        + (["helper"] if allow_calls and not b.primitive and not b.ctx.c_ok else [])
    )
    for _ in range(8):
        try:
            if kind == "op" or kind == "view":
                op = ch.choice(VIEW_OPS if kind == "view" else OP_DRAWS)
                (RECIPES.get(op.name) or generic)(b, op)
            elif kind == "chain":
                _chain(b)
            elif kind == "join":
                _join(b)
            elif kind == "cut":
                _cut(b)
            elif kind == "fan":
                _fan(b)
            elif kind == "alias":
                _alias(b)
            elif kind == "tuple":
                _tuple(b)
            elif kind == "project":
                tuples = [v for v in b.pool if isinstance(v.type, TupleType) and v.type.fields]
                _project(b, b.pick(tuples))
            elif kind == "prim":
                _call_function(b, primitive=True)
            elif kind == "helper":
                _call_function(b, primitive=False)
            return
        except Reject:
            kind = ch.choice(["op", "op", "op", "view"])


VIEW_OPS = tuple(o for o in FUZZED_OPS if o.is_view)
OP_DRAWS = FUZZED_OPS + tuple(o for o in FUZZED_OPS if not o.elementwise)
"""The ops an "op" step draws from: every fuzzed op, the ones that are not elementwise twice.
Most ops of the registry are elementwise (66 of 93 at issue 30), and the others (conv,
pools, norms, movement) are the ones whose shapes and memory the passes plan in the most
ways: drawn once each, they would come up too rarely in the fixed-seed run to be checked."""


def _finish(self: FnBuilder, ret_many: bool, bounds: dict[str, int] | None = None) -> Function:
    """Close the function: return one value or a tuple (of pool values, possibly repeated)."""
    ch = self.ch
    params = {p.name for p in self.params}
    computed = [v for v in self.pool if v.name not in params] or self.pool
    if self.primitive:
        # A primitive function returns tensors (usually computed in it, rarely a parameter).
        cands = [v for v in computed if isinstance(v.type, TensorType)] or self.tensors()
        k = ch.int(1, 2) if ch.int(0, 3) == 0 else 1
        rets = [cands[-1]] + [ch.choice(cands) for _ in range(k - 1)]
    else:
        k = ch.int(1, 4) if ret_many else ch.int(1, 2)
        rets = [computed[-1]] + [ch.choice(self.pool) for _ in range(k - 1)]
        rets = ch.perm(rets + self.keep[-2:])
    if len(rets) == 1 and ch.int(0, 3):
        ret: Var | TupleExpr = Var(rets[0].name)
        rt: Type = rets[0].type
    else:
        ret = TupleExpr(tuple(Var(r.name) for r in rets))
        rt = TupleType(tuple(r.type for r in rets))
    fattrs: list[tuple[str, Any]] = []
    if self.primitive:
        fattrs.append(("primitive", True))
    if bounds:
        fattrs.append(("upper_bounds", DictLit(tuple(sorted(bounds.items())))))
    return Function(self.name, tuple(self.params), rt, tuple(fattrs), tuple(self.body), ret)


FnBuilder.finish = _finish  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------
# Choices. Programs are drawn by hypothesis; the many small choices inside one program come
# either from hypothesis itself (``shrinkable=True``: hypothesis can shrink a failure, but
# drawing is ~50x slower) or from a ``random.Random`` seeded by one hypothesis draw (the
# default: fast, deterministic for a given seed; tests/fuzz/minimize.py shrinks failures).


class RandomChooser:
    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def bool(self) -> bool:
        return self.r.random() < 0.5

    def int(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def choice(self, seq: Sequence[Any]) -> Any:
        seq = list(seq)
        if not seq:
            raise Reject()
        return seq[self.r.randrange(len(seq))]

    def perm(self, seq: Sequence[Any]) -> list[Any]:
        out = list(seq)
        self.r.shuffle(out)
        return out

    def subset(self, seq: Sequence[Any], lo: int, hi: int) -> list[Any]:
        seq = list(seq)
        k = self.r.randint(lo, min(hi, len(seq)))
        return sorted(self.r.sample(seq, k), key=seq.index)


class DrawChooser:
    def __init__(self, draw: st.DrawFn):
        self.draw = draw

    def bool(self) -> bool:
        return self.draw(st.booleans())

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def choice(self, seq: Sequence[Any]) -> Any:
        seq = list(seq)
        if not seq:
            raise Reject()
        return seq[self.draw(st.integers(0, len(seq) - 1))]

    def perm(self, seq: Sequence[Any]) -> list[Any]:
        return list(self.draw(st.permutations(list(seq))))

    def subset(self, seq: Sequence[Any], lo: int, hi: int) -> list[Any]:
        seq = list(seq)
        picked = self.draw(
            st.lists(
                st.integers(0, len(seq) - 1), min_size=lo, max_size=min(hi, len(seq)), unique=True
            )
        )
        return [seq[i] for i in sorted(picked)]


# ---------------------------------------------------------------------------------------
# Whole programs.


def generate(
    ch: Any, max_steps: int = 5, c_share: float = 0.75, lead: int | None = None
) -> GenProgram:
    """One program from the choices ``ch`` (a RandomChooser or DrawChooser)."""
    c_ok = ch.int(0, 99) < int(c_share * 100)
    nsyms = ch.choice([0, 0, 1, 1, 1, 2])
    sym_values: dict[str, int] = {}
    bounds: dict[str, int] = {}
    for s in SYMS[:nsyms]:
        sym_values[s] = ch.choice([1, 2, 3, 4, 5]) if ch.int(0, 11) else 0
        if c_ok or ch.bool():
            bounds[s] = max(1, sym_values[s] + ch.choice([0, 0, 1, 3]))
    statics = ch.subset(STATIC_SIZES, 1, 3)
    sizes: list[D.Dim] = [*statics, *(D.Sym(s) for s in sym_values)]
    # (bf16 is storage-only: no input, constant or kernel can hold it, so no program runs with it.)
    dtypes = list(dict.fromkeys(["f32"] + ch.subset(FLOATS + INTS + ("bool",), 0, 2)))
    ctx = Ctx(ch, c_ok, sizes, dtypes, sym_values, bounds, seed=ch.int(0, 2**31))
    b = FnBuilder(ctx, "main", primitive=False)
    # Parameters: every symbolic dim appears alone in the first one.
    for i in range(ch.int(1, 3)):
        shape = [ch.choice(sizes) for _ in range(ch.int(0, 4))]
        if i == 0:
            shape = ([D.Sym(s) for s in sym_values] + shape)[:5]
        t = TensorType(tuple(shape), ch.choice(dtypes))
        pt: Type = t
        if not c_ok and i > 0 and ch.int(0, 5) == 0:
            pt = TupleType((t, TensorType(tuple(shape[:1]), "f32")))
        name = f"x{i}" if i else "x"
        b.params.append(Param(name, pt))
        b.pool.append(Val(name, pt))
        if isinstance(pt, TupleType):
            _project(b, b.pool[-1])
    if lead is not None:
        for j in range(LEAD_OPS):
            _lead_op(b, FUZZED_OPS[(lead * LEAD_OPS + j) % len(FUZZED_OPS)])
    for _ in range(ch.int(1, max_steps)):
        _step(b, allow_calls=True)
    fn = b.finish(ret_many=True, bounds=bounds or None)
    module = Module(tuple(ctx.functions) + (fn,))
    return GenProgram(
        module, print_module(module), ctx.weights, dict(sym_values), c_ok, tuple(ctx.used_ops)
    )


@st.composite
def fuzz_programs(
    draw: st.DrawFn, max_steps: int = 5, c_share: float = 0.75, shrinkable: bool = False
) -> GenProgram:
    """A random well-typed program (see the module docstring)."""
    ch = DrawChooser(draw) if shrinkable else RandomChooser(draw(st.integers(0, 2**63 - 1)))
    return generate(ch, max_steps, c_share)


LEAD_OPS = 3
"""How many ops of :data:`FUZZED_OPS` each seeded program starts with, in turn."""


def program_from_seed(seed: int, max_steps: int = 5, c_share: float = 0.75) -> GenProgram:
    """The program of the seed ``seed`` (used to replay a campaign): it starts with ops
    ``LEAD_OPS * seed`` to ``LEAD_OPS * seed + LEAD_OPS - 1`` of :data:`FUZZED_OPS` (counted
    round), so consecutive seeds try every op ``LEAD_OPS`` times per ``len(FUZZED_OPS)`` seeds,
    however many ops the registry has (the fixed-seed run's 300 seeds try each of 190 ops
    4 or 5 times before the random steps)."""
    return generate(RandomChooser(seed), max_steps, c_share, lead=seed)


def _lead_op(b: FnBuilder, op: OpDef) -> None:
    """``op`` applied to what the pool holds (a few tries; nothing if it never fits)."""
    for _ in range(8):
        try:
            (RECIPES.get(op.name) or generic)(b, op)
            return
        except Reject:
            pass


def legacy_programs() -> st.SearchStrategy:
    """The older strategy of tests/strategies.py, as GenPrograms."""
    from tests.strategies import programs

    from relaxc.frontend.parser import parse_module

    def conv(p: Any) -> GenProgram:
        m = parse_module(p.text, "gen.rx")
        c_ok = "call @helper" not in p.text and ("n" not in p.dims or "upper_bounds" in p.text)
        return GenProgram(m, p.text, {}, dict(p.dims), c_ok, (), "legacy")

    return programs().map(conv)

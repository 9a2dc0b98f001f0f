"""The op registry: one :class:`OpDef` per op, found by name.

An op declares its tensor inputs (a count or a range), its attributes with kinds and
defaults, a shape/dtype inference function, an optional numpy reference kernel, and its
category:

``kernel``   computes new tensors (ManifestAlloc gives its result storage);
``view``     returns an alias of input 0 (reshape, flatten, ...): no new storage;
``memory``   allocation and kill ops that later passes emit;
``runtime``  packed calls and C-target struct ops (arguments passed through unchecked);
``constant`` ``const``: a weight or an inline literal.

Call arguments bind like this: the leading ``%var`` arguments are the tensor inputs, the
positional literals after them fill the attributes in declaration order, and ``key=value``
arguments fill attributes by name (``reshape(%x, (2, 5))`` is ``reshape(%x, newshape=(2, 5))``).
Ops with ``free_args`` (the runtime calls) take their arguments as they come.

Adding an op (``tests/ir/test_op_coverage.py`` checks that each step is done):

1. ``register(OpDef(...))`` in a module of :mod:`relaxc.ir.ops` with the op's facts: its
   inputs, attributes, ``infer``, category, and where they hold ``elementwise``,
   ``inplace``, ``float_only`` and ``scalar`` (passes and backends read these, never a table
   of their own), and the ``family`` of a kernel op that is not elementwise (the report's
   pictures colour by it).
2. Its numpy ``kernel`` (the reference the interpreter, the VM and every test compare with).
3. Its C in ``backend/c/kernels/``: a generator in ``GENERATORS``, or for a plain
   elementwise op (no attributes, one or two inputs) its entry in ``C_FORMULAS``
   (``elementwise.py``: ``record_on_float``/``record_on_int`` where the record has a
   ``scalar`` formula); or an entry in ``REFUSED``, ``"not on the C target, because ..."``,
   the sentence the user's error ends with. The C backend checks at import that every
   kernel op has one or the other, and that the formulas agree with the records.
4. A fuzz recipe in ``tests/fuzz/gen.py`` if the generic one cannot draw valid inputs.
5. Regenerate the op list of ``docs/c.md`` (``relaxc.backend.c.op_list_markdown()``).
6. Tests of its inference and kernel in ``tests/ir/test_ops*.py`` and of its C in
   ``tests/backend/c/test_ops*.py`` (``test_ops.py``, or the family's ``test_ops_<family>.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import lowp
from .nodes import DictLit, DType, ListLit, Var
from .types import Type
from .vocab import is_dim, is_int


class OpError(Exception):
    """A call that does not fit its op (bad attribute, shape mismatch); the verifier adds the
    location."""


class _Required:
    def __repr__(self) -> str:
        return "<required>"


REQUIRED: Any = _Required()

OP_FAMILIES = (
    "matmul",
    "pooling",
    "normalization",
    "data movement",
    "reduction",
    "fill",
    "elementwise",
    "other",
)
"""The kinds of computation an op declares (:attr:`OpDef.family`)."""

ATTR_KINDS = (
    "int",
    "float",
    "bool",
    "str",
    "dtype",
    "ints",
    "axes",
    "shape",
    "dim",
    "value",
    "pad",
)


@dataclass(frozen=True, slots=True)
class AttrSpec:
    """An attribute: its name, kind (see :func:`check_attr`) and default (REQUIRED if none)."""

    name: str
    kind: str
    default: Any = REQUIRED
    doc: str = ""


InferFn = Callable[[Sequence[Type], Mapping[str, Any]], Type]
KernelFn = Callable[[Sequence[np.ndarray], Mapping[str, Any]], Any]
IntoFn = Callable[[Sequence[np.ndarray], Mapping[str, Any], np.ndarray], bool]
PreparedIntoFn = Callable[[Sequence[np.ndarray], np.ndarray], bool]
PrepareIntoFn = Callable[
    [Sequence[tuple[int, ...]], Sequence[np.dtype], Mapping[str, Any]], PreparedIntoFn | None
]


@dataclass(frozen=True)
class OpDef:
    """Everything relaxc knows about one op."""

    name: str
    summary: str
    category: str
    infer: InferFn
    min_inputs: int = 1
    max_inputs: int | None = 1
    attrs: tuple[AttrSpec, ...] = ()
    kernel: KernelFn | None = None
    kernel_into: IntoFn | None = None
    """The kernel writing its result straight into ``out`` (a writable, C-contiguous array
    of the output's shape and dtype, possibly the storage of an ``inplace`` input), the same
    bits as ``kernel``; it returns False, having written nothing, for a case it leaves to
    ``kernel`` (the binary elementwise ones decline an ``out`` that shares memory with an
    operand when both operands hold a NaN: numpy's in-place loops may then give the other
    NaN). The VM calls it to skip copying a fresh result into planned memory."""
    prepare_into: PrepareIntoFn | None = None
    """For an op whose ``kernel_into`` derives facts from its inputs' shapes and dtypes and
    its attributes (conv2d's geometry): given those (concrete), a function ``(xs, out) ->
    bool`` doing what ``kernel_into`` does for inputs of exactly those shapes and dtypes,
    with the facts derived once (None: ``kernel_into`` declines every such call). The VM
    prepares each instruction once per specialization; ``kernel_into`` is the prepared
    function made on each call, so both give the same bits."""
    elementwise: bool = False
    free_args: bool = False
    effectful: bool = False
    input_names: tuple[str, ...] = ()
    multi_output: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    inplace: tuple[int, ...] = ()
    """Inputs whose buffer the output may be written over, when the input has the output's
    type and dies at the op: the op reads every element of such an input that it needs
    before it writes the output element at that position (elementwise ops, normalizations,
    softmax). In-place passes and backends read this, never a table of their own."""
    float_only: bool = False
    """True when the op computes only on floating-point tensors (its input 0 is a float)."""
    scalar: str | None = None
    """For an elementwise op whose every backend computes one formula: that formula, over
    ``x0``, ``x1``, ... (the inputs' elements), in the common syntax of C and Python
    (``x0 + x1``); None where the op's semantics need more (integer division, NaN rules)."""
    family: str = ""
    """The kind of computation, one of :data:`OP_FAMILIES` (the report draws an op's buffers
    in its family's hue): given for every kernel op that is not elementwise; absent, it is
    ``elementwise`` for an elementwise op and ``other`` for the rest (views, memory, runtime
    and constant ops)."""
    example: str | None = None
    """A call of the op written in full (``memory.alloc_tensor(%s, 0, (2, 3), f32)``): a call
    missing its leading inputs is told which one (``input_names``) and shown this."""

    def __post_init__(self) -> None:
        if not self.family:
            object.__setattr__(self, "family", "elementwise" if self.elementwise else "other")

    @property
    def is_view(self) -> bool:
        return self.category == "view"

    @property
    def is_kernel(self) -> bool:
        """True for ops that compute tensors from tensors (views included)."""
        return self.category in ("kernel", "view")

    def attr_spec(self, name: str) -> AttrSpec | None:
        for a in self.attrs:
            if a.name == name:
                return a
        return None


class Registry:
    """A name → OpDef table. The default instance is built once in :mod:`relaxc.ir.ops`."""

    def __init__(self) -> None:
        self._ops: dict[str, OpDef] = {}

    def register(self, op: OpDef) -> OpDef:
        if op.name in self._ops:
            raise ValueError(f"op {op.name} registered twice")
        if op.family not in OP_FAMILIES:
            raise ValueError(f"op {op.name}: unknown family {op.family!r}")
        for a in op.attrs:
            if a.kind not in ATTR_KINDS:
                raise ValueError(f"op {op.name}: attribute {a.name} has unknown kind {a.kind}")
        op = _computing_bf16(op)
        self._ops[op.name] = op
        return op

    def get(self, name: str) -> OpDef | None:
        return self._ops.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._ops

    def names(self) -> list[str]:
        return sorted(self._ops)

    def ops(self) -> list[OpDef]:
        return [self._ops[n] for n in sorted(self._ops)]


def _computing_bf16(op: OpDef) -> OpDef:
    """``op`` with its kernels taking bf16 and the low-precision types through a wider type
    (ir/lowp.py), when numpy has them (ml_dtypes)."""
    if not lowp.WIDER or op.kernel is None:
        return op
    into = op.kernel_into
    prepare = op.prepare_into
    return replace(
        op,
        kernel=lowp.via_wider(op.kernel),
        kernel_into=None if into is None else lowp.into_declining_narrow(into),
        prepare_into=None if prepare is None else _prepare_declining_bf16(prepare),
    )


def _prepare_declining_bf16(prepare: PrepareIntoFn) -> PrepareIntoFn:
    def run(
        shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype], attrs: Mapping[str, Any]
    ) -> PreparedIntoFn | None:
        if any(d in lowp.WIDER for d in dtypes):
            return None
        return prepare(shapes, dtypes, attrs)

    return run


# ---------------------------------------------------------------------------------------
# Attribute checking and argument binding.


def check_attr(op: str, spec: AttrSpec, v: Any) -> Any:
    """Check ``v`` against ``spec`` and return it in the Python form kernels use.

    ``dtype`` becomes its name, ``axes`` a tuple of ints or None, ``float`` a float.
    """
    kind = spec.kind
    where = f"attribute '{spec.name}' of {op}"
    if kind == "int":
        if is_int(v):
            return v
        raise OpError(f"{where} must be an integer")
    if kind == "float":
        if is_int(v) or isinstance(v, float):
            return float(v)
        raise OpError(f"{where} must be a number")
    if kind == "bool":
        if isinstance(v, bool):
            return v
        raise OpError(f"{where} must be true or false")
    if kind == "str":
        if isinstance(v, str):
            return v
        raise OpError(f"{where} must be a string")
    if kind == "dtype":
        if isinstance(v, DType):
            return v.name
        raise OpError(f"{where} must be a dtype such as f32")
    if kind == "ints":
        if is_int(v):
            return (v,)
        if isinstance(v, tuple) and all(is_int(x) for x in v):
            return v
        raise OpError(f"{where} must be a tuple of integers")
    if kind == "axes":
        if v is None:
            return None
        if is_int(v):
            return (v,)
        if isinstance(v, tuple) and all(is_int(x) for x in v):
            return v
        raise OpError(f"{where} must be an integer or a tuple of integers")
    if kind == "shape":
        if isinstance(v, tuple) and all(is_dim(x) for x in v):
            return v
        raise OpError(f"{where} must be a shape such as (2, n)")
    if kind == "dim":
        if is_dim(v):
            return v
        raise OpError(f"{where} must be an integer or a symbolic dim")
    if kind == "pad":
        if is_int(v):
            return (v,)
        if isinstance(v, tuple) and all(is_int(x) for x in v):
            return v
        raise OpError(f"{where} must be an integer or a tuple of integers")
    # "value": any literal
    return v


@dataclass(frozen=True, slots=True)
class BoundCall:
    """A call's arguments matched to an op: tensor input variables and checked attributes."""

    inputs: tuple[Var, ...]
    attrs: Mapping[str, Any]
    literals: tuple[Any, ...] = ()


def bind_args(op: OpDef, args: Sequence[Any], kwargs: Sequence[tuple[str, Any]]) -> BoundCall:
    """Match ``args``/``kwargs`` of a call to ``op``; raise OpError naming what is wrong."""
    if op.free_args:
        inputs = tuple(a for a in args if isinstance(a, Var))
        attrs: dict[str, Any] = {}
        for k, v in kwargs:
            spec = op.attr_spec(k)
            if spec is None:
                raise OpError(_unknown_attr(op, k))
            attrs[k] = check_attr(op.name, spec, v)
        return BoundCall(inputs, attrs, tuple(args))
    n = 0
    while n < len(args) and isinstance(args[n], Var):
        n += 1
    inputs = tuple(args[:n])
    if n < op.min_inputs and op.example is not None and n < len(op.input_names):
        raise OpError(f"{op.name} needs its {op.input_names[n]} first, as in {op.example}")
    if n < op.min_inputs or (op.max_inputs is not None and n > op.max_inputs):
        raise OpError(f"{op.name} takes {_arity(op)}, got {n}")
    given: dict[str, Any] = {}
    rest = args[n:]
    if len(rest) > len(op.attrs):
        bad = rest[len(op.attrs)]
        if isinstance(bad, Var):
            raise OpError(f"{op.name}: tensor argument %{bad.name} after its attributes")
        raise OpError(
            f"{op.name} takes at most {len(op.attrs)} attribute(s) after its inputs, "
            f"got {len(rest)}"
        )
    for spec, v in zip(op.attrs, rest):
        if isinstance(v, Var):
            raise OpError(
                f"{op.name}: tensor argument %{v.name} where attribute '{spec.name}' is expected"
            )
        given[spec.name] = v
    for k, v in kwargs:
        spec = op.attr_spec(k)
        if spec is None:
            raise OpError(_unknown_attr(op, k))
        if k in given:
            raise OpError(f"{op.name}: attribute '{k}' given twice")
        given[k] = v
    attrs = {}
    for spec in op.attrs:
        if spec.name in given:
            attrs[spec.name] = check_attr(op.name, spec, given[spec.name])
        elif spec.default is REQUIRED:
            raise OpError(f"{op.name}: missing attribute '{spec.name}'")
        else:
            attrs[spec.name] = spec.default
    return BoundCall(inputs, attrs)


def _arity(op: OpDef) -> str:
    lo, hi = op.min_inputs, op.max_inputs
    if hi == lo:
        return f"{lo} tensor input{'s' if lo != 1 else ''}"
    if hi is None:
        return f"at least {lo} tensor input{'s' if lo != 1 else ''}"
    return f"{lo} to {hi} tensor inputs"


def _unknown_attr(op: OpDef, key: str) -> str:
    import difflib

    names = [a.name for a in op.attrs]
    close = difflib.get_close_matches(key, names, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    known = ", ".join(names) if names else "none"
    return f"{op.name} has no attribute '{key}'{hint} (attributes: {known})"


def value_is_literal_data(v: Any) -> bool:
    """True for the literals ``const(...)`` accepts inline: numbers, bools, nested lists."""
    if isinstance(v, (bool, int, float)):
        return True
    if isinstance(v, ListLit):
        return all(value_is_literal_data(x) for x in v.items)
    return False


__all__ = [
    "AttrSpec",
    "BoundCall",
    "DictLit",
    "OpDef",
    "OpError",
    "REQUIRED",
    "Registry",
    "bind_args",
    "check_attr",
]

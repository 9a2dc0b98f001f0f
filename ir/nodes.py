"""Immutable IR nodes: a module of functions whose bodies are SSA bindings.

Every node keeps its source location in a ``loc`` field that takes no part in equality, so
``parse(print(m)) == m`` compares meaning, not positions. Nodes are frozen; passes build new
ones (``dataclasses.replace`` is the usual tool).

Literal values used as call arguments and attributes are plain Python values:
``int``, ``float``, ``bool``, ``str``, symbolic dims (:mod:`relaxc.ir.dims`), :class:`DType`,
``tuple`` of values, :class:`ListLit` and :class:`DictLit`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Union

from .diagnostics import Loc
from .dims import BinOp, DimCall, Sym
from .types import Type


@dataclass(frozen=True, slots=True)
class DType:
    """A dtype used as a value, e.g. the ``f32`` in ``cast(%x, dtype=f32)``."""

    name: str


@dataclass(frozen=True, slots=True)
class ListLit:
    """A bracketed list ``[v, ...]`` (inline constant data)."""

    items: tuple["Value", ...]


@dataclass(frozen=True, slots=True)
class DictLit:
    """A braced mapping ``{key = value, ...}`` (function attributes such as upper_bounds)."""

    items: tuple[tuple[str, "Value"], ...]
    locs: tuple[Loc | None, ...] = field(default=(), compare=False, repr=False)  # of each key

    def get(self, key: str, default: "Value | None" = None) -> "Value | None":
        for k, v in self.items:
            if k == key:
                return v
        return default


Value = Union[int, float, bool, str, Sym, BinOp, DimCall, DType, tuple, ListLit, DictLit]


@dataclass(frozen=True, slots=True)
class Var:
    """A use of a local value ``%name``."""

    name: str
    loc: Loc | None = field(default=None, compare=False, repr=False)


Arg = Union[Var, Value]
KwArgs = tuple[tuple[str, Value], ...]


@dataclass(frozen=True, slots=True)
class Call:
    """``op(args..., key=value, ...)``: a registered op, memory op or runtime call."""

    op: str
    args: tuple[Arg, ...]
    kwargs: KwArgs = ()
    loc: Loc | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class CallFunc:
    """``call @f(args...)``: a call of a function of the module."""

    func: str
    args: tuple[Var, ...]
    loc: Loc | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Invoke:
    """``invoke @f(inputs) outs (outputs)`` or ``invoke op(inputs, attrs) outs (outputs)``.

    Destination passing: the kernel writes its results into the ``outs`` tensors.
    """

    target: str
    is_func: bool
    args: tuple[Arg, ...]
    kwargs: KwArgs
    outs: tuple[Var, ...]
    loc: Loc | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class TupleExpr:
    """``(%a, %b, ...)``."""

    fields: tuple[Var, ...]
    loc: Loc | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Project:
    """``%t.i``: field ``i`` of a tuple."""

    tuple_var: Var
    index: int
    loc: Loc | None = field(default=None, compare=False, repr=False)


Expr = Union[Var, Call, CallFunc, Invoke, TupleExpr, Project]


@dataclass(frozen=True, slots=True)
class Bind:
    """``%name[: Type] = expr``."""

    name: str
    type: Type | None
    value: Expr
    loc: Loc | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Effect:
    """An expression statement whose result is unused: ``memory.kill_tensor(%t)``, ``invoke``."""

    value: Expr
    loc: Loc | None = field(default=None, compare=False, repr=False)


Stmt = Union[Bind, Effect]


@dataclass(frozen=True, slots=True)
class Param:
    """``%name: Type`` in a function signature."""

    name: str
    type: Type
    loc: Loc | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Function:
    """``fn @name(params) -> ret_type attrs {...} { body; return ret }``."""

    name: str
    params: tuple[Param, ...]
    ret_type: Type
    attrs: KwArgs
    body: tuple[Stmt, ...]
    ret: Union[Var, TupleExpr]
    loc: Loc | None = field(default=None, compare=False, repr=False)
    attr_locs: tuple[Loc | None, ...] = field(default=(), compare=False, repr=False)  # of each attrs key

    def attr(self, key: str, default: Value | None = None) -> Value | None:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def is_primitive(self) -> bool:
        return self.attr("primitive", False) is True

    def attr_loc(self, key: str) -> Loc | None:
        """Where attribute ``key`` is written (the function's own location if unknown)."""
        for (k, _), loc in zip(self.attrs, self.attr_locs):
            if k == key and loc is not None:
                return loc
        return self.loc

    def upper_bounds(self) -> dict[str, int]:
        """The ``upper_bounds`` attribute as a plain dict (the verifier checks its shape)."""
        ub = self.attr("upper_bounds")
        if isinstance(ub, DictLit):
            return {k: v for k, v in ub.items if isinstance(v, int) and not isinstance(v, bool)}
        return {}


@dataclass(frozen=True, slots=True)
class Module:
    """A module: an ordered tuple of functions with distinct names."""

    functions: tuple[Function, ...]
    loc: Loc | None = field(default=None, compare=False, repr=False)

    def get(self, name: str) -> Function | None:
        for f in self.functions:
            if f.name == name:
                return f
        return None

    def __iter__(self) -> Iterator[Function]:
        return iter(self.functions)


def expr_vars(expr: Expr) -> Iterator[Var]:
    """Every variable an expression reads, in order (``invoke`` outs included)."""
    if isinstance(expr, Var):
        yield expr
    elif isinstance(expr, Call):
        for a in expr.args:
            if isinstance(a, Var):
                yield a
    elif isinstance(expr, CallFunc):
        yield from expr.args
    elif isinstance(expr, Invoke):
        for a in expr.args:
            if isinstance(a, Var):
                yield a
        yield from expr.outs
    elif isinstance(expr, TupleExpr):
        yield from expr.fields
    elif isinstance(expr, Project):
        yield expr.tuple_var


def stmt_expr(stmt: Stmt) -> Expr:
    return stmt.value

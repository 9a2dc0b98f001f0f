"""Immutable IR nodes: a module of functions whose bodies are SSA bindings.

Every node keeps its source location in a ``loc`` field that takes no part in equality, so
``parse(print(m)) == m`` compares meaning, not positions. Nodes are frozen; passes build new
ones (``dataclasses.replace`` is the usual tool).

Literal values used as call arguments and attributes are plain Python values:
``int``, ``float``, ``bool``, ``str``, symbolic dims (:mod:`relaxc.ir.dims`), :class:`DType`,
``tuple`` of values, :class:`ListLit` and :class:`DictLit`.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Union

from .diagnostics import Loc
from .dims import BinOp, DimCall, Sym
from .types import Type, tensor_leaves


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


Value = Union[int, float, bool, str, Sym, BinOp, DimCall, DType, tuple[Any, ...], ListLit, DictLit]


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
    """``invoke @f(inputs) outs (outputs)`` or ``invoke op(inputs, attrs) outs (outputs)``,
    optionally followed by ``scratch (%s)``.

    Destination passing: the kernel writes its results into the ``outs`` tensors. ``scratch``
    is a ``Tensor[(n,), u8]`` the kernel may use as it likes during the call (its contents
    mean nothing before or after): the working memory the target's kernel needs, planned
    like any other buffer (PlanKernelScratch adds it).
    """

    target: str
    is_func: bool
    args: tuple[Arg, ...]
    kwargs: KwArgs
    outs: tuple[Var, ...]
    loc: Loc | None = field(default=None, compare=False, repr=False)
    scratch: Var | None = None


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
    attr_locs: tuple[Loc | None, ...] = field(
        default=(), compare=False, repr=False
    )  # of each attrs key

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

    def with_attrs(self, new: Mapping[str, Value]) -> "Function":
        """This function with the attributes ``new`` set: an earlier one of the same key is
        dropped and ``new`` comes last, in its order. Every other attribute keeps its
        location; the new ones have none (they are not written in a source file)."""
        attrs = tuple((k, v) for k, v in self.attrs if k not in new) + tuple(new.items())
        locs: tuple[Loc | None, ...] = ()
        if len(self.attr_locs) == len(self.attrs):  # else the locations are not known
            kept = (loc for (k, _), loc in zip(self.attrs, self.attr_locs) if k not in new)
            locs = tuple(kept) + (None,) * len(new)
        return dataclasses.replace(self, attrs=attrs, attr_locs=locs)

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
    _by_name: dict[str, Function] = field(init=False, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        # Derived once, never changed: the first function of each name (a module the
        # verifier has not seen may repeat one), so a lookup is O(1), not a scan.
        by_name: dict[str, Function] = {}
        for f in self.functions:
            by_name.setdefault(f.name, f)
        object.__setattr__(self, "_by_name", by_name)

    @property
    def by_name(self) -> Mapping[str, Function]:
        """The functions by name (a read-only view; the first of a repeated name)."""
        return types.MappingProxyType(self._by_name)

    def get(self, name: str) -> Function | None:
        return self._by_name.get(name)

    def __iter__(self) -> Iterator[Function]:
        return iter(self.functions)


def _arg_vars(args: tuple[Any, ...]) -> list[Var]:
    return [a for a in args if isinstance(a, Var)]


_VARS_OF: dict[type, Callable[[Any], "tuple[Var, ...] | list[Var]"]] = {
    Var: lambda e: (e,),
    Call: lambda e: _arg_vars(e.args),
    CallFunc: lambda e: e.args,
    Invoke: lambda e: (
        _arg_vars(e.args) + list(e.outs) + ([e.scratch] if e.scratch is not None else [])
    ),
    TupleExpr: lambda e: e.fields,
    Project: lambda e: (e.tuple_var,),
}
"""The variables each kind of expression reads (a table, not a chain: this runs per binding)."""


def expr_vars(expr: Expr) -> Iterator[Var]:
    """Every variable an expression reads, in order (``invoke`` outs and scratch included)."""
    of = _VARS_OF.get(type(expr))
    return iter(of(expr) if of is not None else ())


def stmt_expr(stmt: Stmt) -> Expr:
    return stmt.value


def direct_constructor(cls: type) -> Callable[..., Any]:
    """A faster ``cls(*every_field)`` for a frozen, slotted dataclass such as the IR nodes.

    The ``__init__`` that ``dataclass`` writes for a frozen class sets each field through
    ``object.__setattr__`` (to get past the frozen ``__setattr__``), which is most of the
    cost of making a node, and the parser makes millions. This sets the slots through their
    descriptors instead, which gives the same object. It checks what makes that equivalent
    (a dataclass whose ``__init__`` is the generated one, no ``__post_init__``, every field
    a slot and an init argument) and returns ``cls`` itself otherwise.
    """
    init = cls.__dict__.get("__init__")
    if (
        not dataclasses.is_dataclass(cls)
        or hasattr(cls, "__post_init__")
        or init is None
        or getattr(init, "__code__", None) is None
        or init.__code__.co_filename != "<string>"  # written by dataclasses, not by hand
    ):
        return cls
    fields = dataclasses.fields(cls)
    if not all(
        f.init
        and not getattr(f, "kw_only", False)
        and isinstance(cls.__dict__.get(f.name), types.MemberDescriptorType)
        for f in fields
    ):
        return cls
    namespace: dict[str, Any] = {
        "_new": object.__new__,
        "_cls": cls,
        "_MISSING": dataclasses.MISSING,
    }
    params: list[str] = []
    body = ["    obj = _new(_cls)"]
    for i, f in enumerate(fields):  # same parameters and defaults as the generated __init__
        if f.default is not dataclasses.MISSING:
            namespace[f"_default{i}"] = f.default
            params.append(f"{f.name}=_default{i}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory{i}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            body.append(f"    if {f.name} is _MISSING:\n        {f.name} = _factory{i}()")
        else:
            params.append(f.name)
        namespace[f"_set{i}"] = cls.__dict__[f.name].__set__
        body.append(f"    _set{i}(obj, {f.name})")
    src = f"def new_{cls.__name__}({', '.join(params)}):\n" + "\n".join(body) + "\n    return obj\n"
    exec(compile(src, f"<direct constructor of {cls.__name__}>", "exec"), namespace)
    return namespace[f"new_{cls.__name__}"]


def function_dims(fn: Function) -> list[str]:
    """The symbolic dims ``fn`` binds from its parameters: those that appear alone, in order of
    first appearance, then those that appear only in a dimension ``a * n + b``.

    LegalizePackedCalls passes them after a packed call's buffers in this order and the C
    emitter reads them in the same order: both use this one definition.
    """
    out: list[str] = []
    for p in fn.params:
        for leaf in tensor_leaves(p.type):
            for d in leaf.shape:
                if isinstance(d, Sym) and d.name not in out:
                    out.append(d.name)
    # Then dims that appear only inside a parameter dimension ``a * n + b``, read back from it.
    from .dims import affine_in

    for p in fn.params:
        for leaf in tensor_leaves(p.type):
            for d in leaf.shape:
                aff = affine_in(d) if not isinstance(d, (int, Sym)) else None
                if aff is not None and aff[0] not in out:
                    out.append(aff[0])
    return out


def call_dims(callee: Function, arg_types: "list[Type]") -> dict[str, Any]:
    """The call site's value of each dim ``callee`` binds from its parameters, given the
    types of the arguments (in parameter order; fewer arguments bind fewer dims): a dim that
    appears alone takes the argument's dim there, one that appears only in ``a * n + b`` is
    solved from it. Nothing is checked here (the verifier checks every call)."""
    from .dims import solve_affine

    env: dict[str, Any] = {}
    pairs = [
        (pl, al)
        for p, t in zip(callee.params, arg_types)
        for pl, al in zip(tensor_leaves(p.type), tensor_leaves(t))
    ]
    for pl, al in pairs:
        for pd, ad in zip(pl.shape, al.shape):
            if isinstance(pd, Sym) and pd.name not in env:
                env[pd.name] = ad
    for pl, al in pairs:
        for pd, ad in zip(pl.shape, al.shape):
            if not isinstance(pd, (int, Sym)):
                solved = solve_affine(pd, ad)
                if solved is not None and solved[0] not in env:
                    env[solved[0]] = solved[1]
    return env

"""The IR builder of the .rx parser: a method per grammar rule that makes the rule's IR value.

:class:`IRBuilder` is what the LALR engine (:mod:`.lalr`) calls as it reduces: each method
gets the children of one rule of ``rx.lark`` (shaped as lark's tree builder would) and
returns an IR node, a type, a dimension or a literal value. It also does the checks the
grammar cannot express (a keyword argument given twice, a positional argument after a
keyword, an unknown dtype, a dtype or a number inside a dimension expression, ...) and
raises :class:`~relaxc.ir.diagnostics.RxError` at the offending token.

Every node gets a :class:`Loc` from the token that starts it; a token is the lexer's
``re.Match`` (``m[0]`` is its text), not a lark Token.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from typing import Any

from relaxc.ir import dims as D
from relaxc.ir.diagnostics import Loc, RxError
from relaxc.ir.nodes import (
    Bind,
    Call,
    CallFunc,
    DictLit,
    DType,
    Effect,
    Function,
    Invoke,
    ListLit,
    Module,
    Param,
    Project,
    TupleExpr,
    Var,
    direct_constructor,
)
from relaxc.ir.types import DTYPES, OBJECT, STORAGE, TensorType, TupleType, canonical_dtype

_FLOAT_NAMES = {"inf": float("inf"), "nan": float("nan")}
_NEWLINE = re.compile("\n")


def _int_fold(op: str, a: D.Dim, b: D.Dim) -> D.Dim:
    """Fold ``a op b`` when both are integers; keep the user's expression otherwise."""
    if (
        isinstance(a, int)
        and isinstance(b, int)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        if op in ("/", "%") and b == 0:
            return D.BinOp(op, a, b)
        return D._apply(op, a, b)
    return D.BinOp(op, a, b)


_DIM_TYPES = (int, D.Sym, D.BinOp, D.DimCall)
"""What a dimension expression is made of (``name`` may also give a DType or inf/nan)."""

_NODES = (Loc, Var, Call, CallFunc, Invoke, TupleExpr, Project, Bind, Effect, Param, Function)
(
    _new_Loc,
    _new_Var,
    _new_Call,
    _new_CallFunc,
    _new_Invoke,
    _new_TupleExpr,
    _new_Project,
    _new_Bind,
    _new_Effect,
    _new_Param,
    _new_Function,
) = map(direct_constructor, _NODES)
_new_TensorType, _new_TupleType, _new_Sym = map(direct_constructor, (TensorType, TupleType, D.Sym))


class IRBuilder:
    """Builds IR nodes as the parser reduces; one per parse (it knows the file and its text).

    A method gets the children of its rule as lark would pass them to a Transformer: anonymous
    punctuation filtered out, ``None`` for an absent ``[optional]`` part. A terminal arrives as
    the lexer's ``re.Match`` (``m[0]`` is its text), not as a lark Token.
    """

    def __init__(self, filename: str, text: str):
        self._file = filename
        self._text = text
        self._newlines: list[int] | None = None
        self._line = 1  # the line of the last location made (the next one is likely on it)
        self._last_non_dim: tuple[Any, re.Match] | None = None  # the latest dtype or number name()

    def _loc(self, m: re.Match) -> Loc:
        pos = m.start()
        newlines = self._newlines
        if newlines is None:  # offsets of every "\n", between -1 and a stop after the end
            text = self._text
            starts = (n.start() for n in _NEWLINE.finditer(text))
            newlines = self._newlines = [-1, *starts, len(text) + 1]
        line = self._line  # line n is newlines[n - 1] < pos <= newlines[n]
        if not newlines[line - 1] < pos <= newlines[line]:
            line = self._line = bisect_left(newlines, pos)
        # (no terminal is empty)
        return _new_Loc(self._file, line, pos - newlines[line - 1], m.end() - pos)

    # -- module structure -------------------------------------------------------------
    def start(self, children: list) -> Module:
        return Module(tuple(children))

    def function(self, c: list) -> Function:
        name_tok: re.Match = c[1]
        i = 2
        params: list[Param] = []
        while isinstance(c[i], Param) or c[i] is None:
            if c[i] is not None:
                params.append(c[i])
            i += 1
            if i >= len(c):
                break
        ret_type = c[i]
        i += 1
        attrs: tuple = ()
        attr_locs: tuple = ()
        if c[i] is None:  # no attrs: placeholders for ATTRS and dict
            i += 2
        else:
            attrs = c[i + 1].items
            attr_locs = c[i + 1].locs
            i += 2
        body = tuple(c[i:-1])
        ret = c[-1]
        return _new_Function(
            name_tok[0][1:],
            tuple(params),
            ret_type,
            attrs,
            body,
            ret,
            self._loc(name_tok),
            attr_locs,
        )

    def param(self, c: list) -> Param:
        return _new_Param(c[0][0][1:], c[1], self._loc(c[0]))

    def bind(self, c: list) -> Bind:
        return _new_Bind(c[0][0][1:], c[1], c[2], self._loc(c[0]))

    def effect(self, c: list) -> Effect:
        return _new_Effect(c[0], c[0].loc)

    def ret(self, c: list):
        return c[1]

    # -- expressions ------------------------------------------------------------------
    def var(self, c: list) -> Var:
        m = c[0]
        return _new_Var(m[0][1:], self._loc(m))

    def args(self, c: list) -> tuple[tuple, tuple]:
        pos: list = []
        kw: list = []
        last_kw: "_KwArg | None" = None
        for a in c:
            if a is None:
                continue
            if isinstance(a, _KwArg):
                if any(k == a.key for k, _ in kw):
                    raise RxError(f"keyword argument '{a.key}' given twice", a.loc)
                kw.append((a.key, a.value))
                last_kw = a
            else:
                if kw:
                    loc = (
                        a.loc
                        if isinstance(a, Var)
                        else last_kw.loc
                        if last_kw is not None
                        else None
                    )
                    what = f"%{a.name}" if isinstance(a, Var) else "a value"
                    raise RxError(
                        f"positional argument after a keyword argument ({what} after "
                        f"'{last_kw.key if last_kw else '?'}=')",
                        loc,
                    )
                pos.append(a)
        return tuple(pos), tuple(kw)

    def opcall(self, c: list) -> Call:
        pos, kw = c[1]
        return _new_Call(c[0][0], pos, kw, self._loc(c[0]))

    def funccall(self, c: list) -> CallFunc:
        return _new_CallFunc(c[1][0][1:], tuple(v for v in c[2:] if v is not None), self._loc(c[1]))

    def invoke(self, c: list) -> Invoke:
        target: re.Match = c[1]
        is_func = target.lastgroup == "GLOBAL"
        pos, kw = c[2]
        rest = [v for v in c[4:] if v is not None]
        scratch = None
        if len(rest) >= 2 and not isinstance(rest[-2], Var):  # the SCRATCH keyword, then %s
            scratch = rest[-1]
            rest = rest[:-2]
        name = target[0][1:] if is_func else target[0]
        return _new_Invoke(name, is_func, pos, kw, tuple(rest), self._loc(c[0]), scratch)

    def tuple_expr(self, c: list) -> TupleExpr:
        fields = tuple(v for v in c if v is not None)
        return _new_TupleExpr(fields, fields[0].loc if fields else None)

    def project(self, c: list) -> Project:
        return _new_Project(c[0], int(c[1][0]), c[0].loc)

    def kwarg(self, c: list) -> "_KwArg":
        return _KwArg(c[0][0], c[1], self._loc(c[0]))

    # -- values -----------------------------------------------------------------------
    def int(self, c: list) -> int:
        try:
            return int(c[0][0])
        except ValueError:  # longer than Python converts (4300 digits)
            raise RxError(
                f"integer literal of {len(c[0][0])} digits is too long", self._loc(c[0])
            ) from None

    def name(self, c: list) -> Any:
        text = c[0][0]
        dtype = canonical_dtype(text)
        if dtype is not None:
            v: Any = DType(dtype)
            self._last_non_dim = (v, c[0])
            return v
        if text in _FLOAT_NAMES:
            v = _FLOAT_NAMES[text]
            self._last_non_dim = (v, c[0])
            return v
        if "." in text:
            raise RxError(
                f"'{text}' is not a valid value (a symbolic dim has no dots)", self._loc(c[0])
            )
        return _new_Sym(text)

    def dimcall(self, c: list) -> D.Dim:
        func = c[0][0]
        if func not in D.DIM_FUNCS:
            raise RxError(
                f"'{func}(...)' is not allowed in a dimension expression (only max and min)",
                self._loc(c[0]),
            )
        for a in reversed(c[1:]):
            if not isinstance(a, _DIM_TYPES):
                self._not_a_dim(a)
        return D.DimCall(func, tuple(c[1:]))

    def _not_a_dim(self, v: Any) -> None:
        """Refuse a dtype or a number (``inf``, ``nan``) inside a dimension expression.

        Such an operand is always the latest one :meth:`name` made (each arithmetic rule
        checks its operands as soon as it is reduced, the right one first), so
        ``_last_non_dim`` holds its token."""
        last = self._last_non_dim
        loc = self._loc(last[1]) if last is not None and last[0] is v else None
        what = f"'{v.name}' is a dtype" if isinstance(v, DType) else f"'{v}' is a number"
        raise RxError(
            f"{what}, not a dimension (dimension expressions combine integers and "
            "symbolic names with + - * / % and max/min)",
            loc,
        )

    def _arith(self, op: str, c: list) -> D.Dim:
        a, b = c[0], c[1]
        if not isinstance(b, _DIM_TYPES):
            self._not_a_dim(b)
        if not isinstance(a, _DIM_TYPES):
            self._not_a_dim(a)
        return _int_fold(op, a, b)

    def add(self, c: list) -> D.Dim:
        return self._arith("+", c)

    def sub(self, c: list) -> D.Dim:
        return self._arith("-", c)

    def mul(self, c: list) -> D.Dim:
        return self._arith("*", c)

    def div(self, c: list) -> D.Dim:
        return self._arith("/", c)

    def mod(self, c: list) -> D.Dim:
        return self._arith("%", c)

    def neg(self, c: list) -> Any:
        v = c[0]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            r = -v
            # -inf: still a number
            if self._last_non_dim is not None and self._last_non_dim[0] is v:
                self._last_non_dim = (r, self._last_non_dim[1])
            return r
        if not isinstance(v, _DIM_TYPES):
            self._not_a_dim(v)
        return D.BinOp("-", 0, v)

    def float(self, c: list) -> float:
        return float(c[0][0])

    def neg_float(self, c: list) -> float:
        return -float(c[0][0])

    def string(self, c: list) -> str:
        try:
            return json.loads(c[0][0])
        except ValueError:
            raise RxError("invalid escape in string literal", self._loc(c[0])) from None

    def true(self, c: list) -> bool:
        return True

    def false(self, c: list) -> bool:
        return False

    def empty_tuple(self, c: list) -> tuple:
        return ()

    def tuple_value(self, c: list) -> tuple:
        return tuple(v for v in c if v is not None)

    def list_value(self, c: list) -> ListLit:
        return ListLit(tuple(v for v in c if v is not None))

    def dict(self, c: list) -> DictLit:
        items = [v for v in c if v is not None]
        seen: set[str] = set()
        for key, _val, loc in items:
            if key in seen:
                raise RxError(f"key '{key}' given twice", loc)
            seen.add(key)
        return DictLit(tuple((k, v) for k, v, _ in items), tuple(loc for _, _, loc in items))

    def dict_item(self, c: list) -> tuple:
        return (c[0][0], c[1], self._loc(c[0]))

    # -- types ------------------------------------------------------------------------
    def tensor_type(self, c: list) -> TensorType:
        shape, dtype_tok = c
        dtype_name = dtype_tok[0]
        dtype = canonical_dtype(dtype_name)
        if dtype is None:
            raise RxError(
                f"unknown dtype '{dtype_name}'",
                self._loc(dtype_tok),
                notes=("dtypes are: " + " ".join(DTYPES),),
            )
        for d in reversed(shape):  # (the right one first: see _not_a_dim)
            if isinstance(d, bool) or not isinstance(d, _DIM_TYPES):
                self._not_a_dim(d)
        return _new_TensorType(shape, dtype)

    def shape(self, c: list) -> tuple:
        return tuple(v for v in c if v is not None)

    def empty_shape(self, c: list) -> tuple:
        return ()

    def tuple_type(self, c: list) -> TupleType:
        return _new_TupleType(tuple(t for t in c if t is not None))

    def storage_type(self, c: list):
        return STORAGE

    def object_type(self, c: list):
        return OBJECT


class _KwArg:
    """A ``key=value`` argument on its way into a call (never part of the IR)."""

    __slots__ = ("key", "value", "loc")

    def __init__(self, key: str, value: Any, loc: Loc):
        self.key = key
        self.value = value
        self.loc = loc

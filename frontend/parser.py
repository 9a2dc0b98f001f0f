"""Parse .rx text into an IR :class:`~relaxc.ir.nodes.Module`.

The grammar (``rx.lark``) is LALR(1); the tree builder runs inside lark's parser as it
reduces, so no intermediate parse tree is built. Every node gets a :class:`Loc` from the
token that starts it. Syntax errors become :class:`RxError` with the location of the
offending token and a message that says what was expected, in words.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from relaxc.ir import dims as D

from .lexer import LexError, RxLexer
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
)
from relaxc.ir.types import OBJECT, STORAGE, TensorType, TupleType, canonical_dtype

_FLOAT_NAMES = {"inf": float("inf"), "nan": float("nan")}


def _int_fold(op: str, a: D.Dim, b: D.Dim) -> D.Dim:
    """Fold ``a op b`` when both are integers; keep the user's expression otherwise."""
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
        if op in ("/", "%") and b == 0:
            return D.BinOp(op, a, b)
        return D._apply(op, a, b)
    return D.BinOp(op, a, b)


class _Builder(Transformer):
    """Builds IR nodes from lark reductions. Holds only the (immutable) file name."""

    def __init__(self, filename: str):
        super().__init__(visit_tokens=False)
        self._file = filename

    def _loc(self, tok: Token) -> Loc:
        return Loc(self._file, tok.line, tok.column, max(1, len(tok)))

    # -- module structure -------------------------------------------------------------
    def start(self, children: list) -> Module:
        return Module(tuple(children))

    def function(self, c: list) -> Function:
        name_tok: Token = c[1]
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
        if c[i] is None:  # no attrs: placeholders for ATTRS and dict
            i += 2
        else:
            attrs = c[i + 1].items
            i += 2
        body = tuple(c[i:-1])
        ret = c[-1]
        return Function(name_tok[1:], tuple(params), ret_type, attrs, body, ret, self._loc(name_tok))

    def param(self, c: list) -> Param:
        return Param(c[0][1:], c[1], self._loc(c[0]))

    def bind(self, c: list) -> Bind:
        return Bind(c[0][1:], c[1], c[2], self._loc(c[0]))

    def effect(self, c: list) -> Effect:
        return Effect(c[0], c[0].loc)

    def ret(self, c: list):
        return c[1]

    # -- expressions ------------------------------------------------------------------
    def var(self, c: list) -> Var:
        tok = c[0]
        return Var(tok[1:], self._loc(tok))

    def args(self, c: list) -> tuple[tuple, tuple]:
        pos: list = []
        kw: list = []
        for a in c:
            if a is None:
                continue
            if isinstance(a, _KwArg):
                if any(k == a.key for k, _ in kw):
                    raise RxError(f"keyword argument '{a.key}' given twice", a.loc)
                kw.append((a.key, a.value))
            else:
                if kw:
                    loc = a.loc if isinstance(a, Var) else None
                    raise RxError("positional argument after a keyword argument", loc)
                pos.append(a)
        return tuple(pos), tuple(kw)

    def opcall(self, c: list) -> Call:
        pos, kw = c[1]
        return Call(str(c[0]), pos, kw, self._loc(c[0]))

    def funccall(self, c: list) -> CallFunc:
        return CallFunc(c[1][1:], tuple(v for v in c[2:] if v is not None), self._loc(c[1]))

    def invoke(self, c: list) -> Invoke:
        target: Token = c[1]
        is_func = target.type == "GLOBAL"
        pos, kw = c[2]
        outs = tuple(v for v in c[4:] if v is not None)
        name = target[1:] if is_func else str(target)
        return Invoke(name, is_func, pos, kw, outs, self._loc(c[0]))

    def tuple_expr(self, c: list) -> TupleExpr:
        fields = tuple(v for v in c if v is not None)
        return TupleExpr(fields, fields[0].loc if fields else None)

    def project(self, c: list) -> Project:
        return Project(c[0], int(c[1]), c[0].loc)

    def kwarg(self, c: list) -> "_KwArg":
        return _KwArg(str(c[0]), c[1], self._loc(c[0]))

    # -- values -----------------------------------------------------------------------
    def int(self, c: list) -> int:
        return int(c[0])

    def name(self, c: list) -> Any:
        text = str(c[0])
        dtype = canonical_dtype(text)
        if dtype is not None:
            return DType(dtype)
        if text in _FLOAT_NAMES:
            return _FLOAT_NAMES[text]
        if "." in text:
            raise RxError(f"'{text}' is not a valid value (a symbolic dim has no dots)", self._loc(c[0]))
        return D.Sym(text)

    def dimcall(self, c: list) -> D.Dim:
        func = str(c[0])
        if func not in D.DIM_FUNCS:
            raise RxError(
                f"'{func}(...)' is not allowed in a dimension expression (only max and min)",
                self._loc(c[0]),
            )
        return D.DimCall(func, tuple(c[1:]))

    def add(self, c: list) -> D.Dim:
        return _int_fold("+", c[0], c[1])

    def sub(self, c: list) -> D.Dim:
        return _int_fold("-", c[0], c[1])

    def mul(self, c: list) -> D.Dim:
        return _int_fold("*", c[0], c[1])

    def div(self, c: list) -> D.Dim:
        return _int_fold("/", c[0], c[1])

    def mod(self, c: list) -> D.Dim:
        return _int_fold("%", c[0], c[1])

    def neg(self, c: list) -> Any:
        v = c[0]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v
        return D.BinOp("-", 0, v)

    def float(self, c: list) -> float:
        return float(c[0])

    def neg_float(self, c: list) -> float:
        return -float(c[0])

    def string(self, c: list) -> str:
        try:
            return json.loads(c[0])
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
        return DictLit(tuple((k, v) for k, v, _ in items))

    def dict_item(self, c: list) -> tuple:
        return (str(c[0]), c[1], self._loc(c[0]))

    # -- types ------------------------------------------------------------------------
    def tensor_type(self, c: list) -> TensorType:
        shape, dtype_tok = c
        dtype = canonical_dtype(str(dtype_tok))
        if dtype is None:
            raise RxError(
                f"unknown dtype '{dtype_tok}'",
                self._loc(dtype_tok),
                notes=("dtypes are: bool i8 i16 i32 i64 u8 u16 u32 f16 bf16 f32 f64",),
            )
        for d in shape:
            if isinstance(d, bool) or not isinstance(d, (int, D.Sym, D.BinOp, D.DimCall)):
                raise RxError(f"a tensor dimension must be an integer or a symbolic expression", self._loc(dtype_tok))
        return TensorType(shape, dtype)

    def shape(self, c: list) -> tuple:
        return tuple(v for v in c if v is not None)

    def empty_shape(self, c: list) -> tuple:
        return ()

    def tuple_type(self, c: list) -> TupleType:
        return TupleType(tuple(t for t in c if t is not None))

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


def _grammar() -> str:
    return resources.files("relaxc.frontend").joinpath("rx.lark").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=16)
def _parser_for(filename: str) -> Lark:
    """A lark LALR parser whose builder stamps ``filename`` on every location (memoized)."""
    return Lark(
        _grammar(), parser="lalr", lexer=RxLexer, transformer=_Builder(filename), maybe_placeholders=True
    )


_TOKEN_WORDS = {
    "LPAR": "'('",
    "RPAR": "')'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COMMA": "','",
    "COLON": "':'",
    "EQUAL": "'='",
    "DOT": "'.'",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "STAR": "'*'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "__ANON_0": "'->'",
    "LOCAL": "a local name (%x)",
    "GLOBAL": "a function name (@f)",
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "STRING": "a string",
    "FN": "'fn'",
    "ATTRS": "'attrs'",
    "CALL": "'call'",
    "INVOKE": "'invoke'",
    "RETURN": "'return'",
    "OUTS": "'outs'",
    "$END": "end of file",
}


def _describe(name: str, parser: Lark) -> str:
    if name in _TOKEN_WORDS:
        return _TOKEN_WORDS[name]
    for term in parser.terminals:
        if term.name == name and term.pattern.type == "str":
            return f"'{term.pattern.value}'"
    return name.lower()


def _token_text(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    return f"'{tok}'"


def parse_module(text: str, filename: str = "<input>") -> Module:
    """Parse ``text`` (the contents of ``filename``) into a module, or raise RxError."""
    parser = _parser_for(filename)
    try:
        return parser.parse(text)
    except LexError as e:
        ch = e.char
        shown = repr(ch) if ch.isprintable() else f"character U+{ord(ch):04X}"
        hint = ""
        if ch == '"':
            hint = " (a string that is not closed on its line?)"
        raise RxError(f"unexpected character {shown}{hint}", Loc(filename, e.line, e.column)) from None
    except UnexpectedCharacters as e:
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        shown = repr(ch) if ch.isprintable() else f"byte {ch.encode('utf-8', 'replace')!r}"
        raise RxError(f"unexpected character {shown}", Loc(filename, e.line, e.column)) from None
    except UnexpectedToken as e:
        tok = e.token
        expected = sorted({_describe(t, parser) for t in e.expected})
        hint = ", ".join(expected[:8]) + (", ..." if len(expected) > 8 else "")
        line = tok.line if tok.line is not None else max(1, text.count("\n") + 1)
        col = tok.column if tok.column is not None else 1
        if tok.type == "$END":
            line, col = _end_position(text)
        width = max(1, len(tok)) if tok.type != "$END" else 1
        raise RxError(
            f"unexpected {_token_text(tok)}; expected {hint}", Loc(filename, line, col, width)
        ) from None
    except UnexpectedEOF as e:
        line, col = _end_position(text)
        raise RxError("unexpected end of file", Loc(filename, line, col)) from None
    except UnexpectedInput as e:  # pragma: no cover - other lark errors
        raise RxError(f"syntax error: {e}", Loc(filename, getattr(e, "line", 1), getattr(e, "column", 1))) from None


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    # Point after the last non-empty line.
    while len(lines) > 1 and not lines[-1].strip():
        lines.pop()
    return len(lines), len(lines[-1]) + 1

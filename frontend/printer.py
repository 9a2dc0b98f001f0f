"""Print IR in the canonical .rx format (what ``relaxc fmt`` writes).

The output parses back to an equal module: ``parse_module(print_module(m)) == m``.
Floats print with ``repr`` (shortest round-tripping form), strings as JSON strings, and
every function is followed by one blank line, so printing is deterministic byte for byte.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from relaxc.ir import dims as D
from relaxc.ir.nodes import (
    Bind,
    Call,
    CallFunc,
    DictLit,
    DType,
    Effect,
    Expr,
    Function,
    Invoke,
    KwArgs,
    ListLit,
    Module,
    Project,
    TupleExpr,
    Var,
)
from relaxc.ir.types import type_to_str
from relaxc.ir.vocab import is_dim
from relaxc.ir.walk import ExprFunctor

if TYPE_CHECKING:
    from .comments import Comments

INDENT = "  "


def value_to_str(v: object) -> str:
    """The .rx spelling of a literal value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = repr(v)
        if "e" in text and "." not in text.split("e")[0]:
            mant, exp = text.split("e")
            text = f"{mant}.0e{exp}"
        return text
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, DType):
        return v.name
    if is_dim(v):  # (ints are printed above)
        return D.dim_to_str(v)
    if isinstance(v, tuple):
        if len(v) == 1:
            return f"({value_to_str(v[0])},)"
        return "(" + ", ".join(value_to_str(x) for x in v) + ")"
    if isinstance(v, ListLit):
        return "[" + ", ".join(value_to_str(x) for x in v.items) + "]"
    if isinstance(v, DictLit):
        return "{" + ", ".join(f"{k} = {value_to_str(x)}" for k, x in v.items) + "}"
    raise TypeError(f"not an IR value: {v!r}")


def _arg(a: object) -> str:
    return f"%{a.name}" if isinstance(a, Var) else value_to_str(a)


def _args(args: tuple, kwargs: KwArgs) -> str:
    parts = [_arg(a) for a in args]
    parts += [f"{k}={value_to_str(v)}" for k, v in kwargs]
    return ", ".join(parts)


def _vars(vs: tuple[Var, ...]) -> str:
    return ", ".join(f"%{v.name}" for v in vs)


class _ExprPrinter(ExprFunctor[str]):
    """The .rx spelling of each kind of expression."""

    def visit_var(self, e: Var) -> str:
        return f"%{e.name}"

    def visit_call(self, e: Call) -> str:
        return f"{e.op}({_args(e.args, e.kwargs)})"

    def visit_call_func(self, e: CallFunc) -> str:
        return f"call @{e.func}({_vars(e.args)})"

    def visit_invoke(self, e: Invoke) -> str:
        target = f"@{e.target}" if e.is_func else e.target
        text = f"invoke {target}({_args(e.args, e.kwargs)}) outs ({_vars(e.outs)})"
        return text if e.scratch is None else f"{text} scratch (%{e.scratch.name})"

    def visit_tuple(self, e: TupleExpr) -> str:
        if len(e.fields) == 1:
            return f"(%{e.fields[0].name},)"
        return f"({_vars(e.fields)})"

    def visit_project(self, e: Project) -> str:
        return f"%{e.tuple_var.name}.{e.index}"


_PRINTER = _ExprPrinter()


def expr_to_str(e: Expr) -> str:
    """The .rx spelling of an expression (TypeError for anything that is not one)."""
    return _PRINTER.visit_expr(e)


def stmt_to_str(s: Bind | Effect) -> str:
    if isinstance(s, Bind):
        ann = f": {type_to_str(s.type)}" if s.type is not None else ""
        return f"%{s.name}{ann} = {expr_to_str(s.value)}"
    return expr_to_str(s.value)


class _CommentSink:
    """Hands out each attached comment once, by the source line of a node."""

    def __init__(self, comments: "Comments | None"):
        self.c = comments
        self.used: set[tuple[str, int]] = set()

    def leading(self, loc: object, indent: str) -> list[str]:
        line = getattr(loc, "line", None)
        if self.c is None or line is None or ("l", line) in self.used:
            return []
        self.used.add(("l", line))
        return [indent + c for c in self.c.leading.get(line, [])]

    def trailing(self, loc: object) -> str:
        line = getattr(loc, "line", None)
        if (
            self.c is None
            or line is None
            or ("t", line) in self.used
            or line not in self.c.trailing
        ):
            return ""
        self.used.add(("t", line))
        return "  " + self.c.trailing[line]


def function_to_str(f: Function, sink: _CommentSink | None = None) -> str:
    sink = sink or _CommentSink(None)
    params = ", ".join(f"%{p.name}: {type_to_str(p.type)}" for p in f.params)
    head = f"fn @{f.name}({params}) -> {type_to_str(f.ret_type)}"
    if f.attrs:
        head += "\n" + INDENT * 2 + "attrs " + value_to_str(DictLit(f.attrs))
    lines = sink.leading(f.loc, "")
    lines.append(head + " {" + sink.trailing(f.loc))
    for s in f.body:
        lines += sink.leading(s.loc, INDENT)
        lines.append(INDENT + stmt_to_str(s) + sink.trailing(s.loc))
    ret_loc = getattr(f.ret, "loc", None)
    lines += sink.leading(ret_loc, INDENT)
    lines.append(INDENT + "return " + expr_to_str(f.ret) + sink.trailing(ret_loc))
    lines.append("}")
    return "\n".join(lines)


def print_module(m: Module, comments: "Comments | None" = None) -> str:
    """The canonical text of ``m``; functions separated by one blank line, ending in a newline.

    With ``comments`` (from :func:`relaxc.frontend.comments.attach_comments`) the source's
    comments are kept next to the nodes they were written beside.
    """
    sink = _CommentSink(comments)
    text = "\n\n".join(function_to_str(f, sink) for f in m.functions)
    tail = comments.tail if comments is not None else []
    if tail:
        text = (text + "\n\n" if text else "") + "\n".join(tail)
    return text + "\n" if text else ""

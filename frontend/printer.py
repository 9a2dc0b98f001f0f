"""Print IR in the canonical .rx format (what ``relaxc fmt`` writes).

The output parses back to an equal module: ``parse_module(print_module(m)) == m``.
Floats print with ``repr`` (shortest round-tripping form), strings as JSON strings, and
every function is followed by one blank line, so printing is deterministic byte for byte.
"""

from __future__ import annotations

import json
import math

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
    if isinstance(v, (D.Sym, D.BinOp, D.DimCall)):
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


def expr_to_str(e: Expr) -> str:
    """The .rx spelling of an expression."""
    if isinstance(e, Var):
        return f"%{e.name}"
    if isinstance(e, Call):
        return f"{e.op}({_args(e.args, e.kwargs)})"
    if isinstance(e, CallFunc):
        return f"call @{e.func}({_vars(e.args)})"
    if isinstance(e, Invoke):
        target = f"@{e.target}" if e.is_func else e.target
        return f"invoke {target}({_args(e.args, e.kwargs)}) outs ({_vars(e.outs)})"
    if isinstance(e, TupleExpr):
        if len(e.fields) == 1:
            return f"(%{e.fields[0].name},)"
        return f"({_vars(e.fields)})"
    if isinstance(e, Project):
        return f"%{e.tuple_var.name}.{e.index}"
    raise TypeError(f"not an IR expression: {e!r}")


def stmt_to_str(s: Bind | Effect) -> str:
    if isinstance(s, Bind):
        ann = f": {type_to_str(s.type)}" if s.type is not None else ""
        return f"%{s.name}{ann} = {expr_to_str(s.value)}"
    return expr_to_str(s.value)


def function_to_str(f: Function) -> str:
    params = ", ".join(f"%{p.name}: {type_to_str(p.type)}" for p in f.params)
    head = f"fn @{f.name}({params}) -> {type_to_str(f.ret_type)}"
    if f.attrs:
        head += "\n" + INDENT * 2 + "attrs " + value_to_str(DictLit(f.attrs))
    lines = [head + " {"]
    lines += [INDENT + stmt_to_str(s) for s in f.body]
    lines.append(INDENT + "return " + expr_to_str(f.ret))
    lines.append("}")
    return "\n".join(lines)


def print_module(m: Module) -> str:
    """The canonical text of ``m``; functions separated by one blank line, ending in a newline."""
    return "\n\n".join(function_to_str(f) for f in m.functions) + ("\n" if m.functions else "")

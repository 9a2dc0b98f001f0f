"""Parse .rx text into an IR :class:`~relaxc.ir.nodes.Module`.

:func:`parse_module` is the front door. The work is done by two modules:

* :mod:`.lalr`, the LALR(1) engine: lark compiles ``rx.lark`` and this engine runs lark's
  parse table with its own loop, fed by the single-regex lexer of :mod:`.lexer`, calling a
  builder method as each rule is reduced (no parse tree is built);
* :mod:`.ir_builder`, the builder: a method per grammar rule that makes the IR value.

This module builds the tables once per process and turns the engine's errors into
:class:`RxError`: a character that starts no token, or a token the grammar does not allow
there, with its location and a message that says what was expected, in words.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from importlib import resources
from typing import Iterator

from lark import Lark

from relaxc.ir.diagnostics import Loc, RxError
from relaxc.ir.nodes import Module

from .ir_builder import IRBuilder
from .lalr import _SKIP, LalrSyntaxError, LalrTables
from .lexer import LexError, line_col
from .out_of_scope import out_of_scope


def _grammar() -> str:
    return resources.files("relaxc.frontend").joinpath("rx.lark").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def _tables() -> LalrTables:
    """The parser's tables, built once per process (lark compiles the grammar)."""
    return LalrTables(_grammar(), IRBuilder)


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
    "SCRATCH": "'scratch'",
    "$END": "end of file",
}


def _describe(name: str, parser: Lark) -> str:
    if name in _TOKEN_WORDS:
        return _TOKEN_WORDS[name]
    for term in parser.terminals:
        if term.name == name and term.pattern.type == "str":
            return f"'{term.pattern.value}'"
    return name.lower()


def parse_module(text: str, filename: str = "<input>") -> Module:
    """Parse ``text`` (the contents of ``filename``) into a module, or raise RxError."""
    tables = _tables()
    try:
        with _cycle_collector_paused():
            return tables.parse(text, IRBuilder(filename, text))
    except LexError as e:
        ch = e.char
        shown = repr(ch) if ch.isprintable() else f"U+{ord(ch):04X}"
        hint = ""
        if ch == '"':
            hint = " (a string that is not closed on its line?)"
        loc = Loc(filename, e.line, e.column)
        raise RxError(f"unexpected character {shown}{hint}", loc) from None
    except LalrSyntaxError as e:
        expected = sorted({_describe(t, tables.lark) for t in tables.expected(e.stack)})
        m = e.match
        tokens = _tokens_to(tables, text, len(text) if m is None else m.start())
        refused = out_of_scope(tokens, len(tokens) - (m is not None), expected, filename, text)
        if refused is not None:
            raise refused from None
        hint = ", ".join(expected[:8]) + (", ..." if len(expected) > 8 else "")
        if m is None:
            line, col = _end_position(text)
            shown, width = "end of file", 1
        else:
            token = text[m.start() : m.end(m.lastindex)]  # (without the whitespace it may take)
            line, col = line_col(text, m.start())
            shown, width = f"'{token}'", max(1, len(token))
        loc = Loc(filename, line, col, width)
        notes: tuple[str, ...] = ()
        if m is not None and token in tables.keywords and "a name" in expected:
            notes = (f"'{token}' is a keyword of the .rx format, not a name: choose another name",)
        raise RxError(f"unexpected {shown}; expected {hint}", loc, notes) from None


@contextlib.contextmanager
def _cycle_collector_paused() -> Iterator[None]:
    """Run the body without Python's cycle collector, and file what it made as old objects.

    A parse allocates millions of small objects, none of them in a reference cycle. With
    the collector on, it would traverse the young ones over and over as the module grows,
    and then promote the finished module generation by generation, each time traversing it
    all (a third of the parse time, and half of the verifier's on a big module), finding
    nothing. So it is paused; and then (unless the program uses gc.freeze itself) freeze +
    unfreeze moves every young object straight to the oldest generation, which is a list
    splice in CPython, not a traversal. Full collections still examine them as usual.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def _tokens_to(tables: LalrTables, text: str, pos: int) -> list[tuple[str, int]]:
    """``(text, offset)`` of the tokens of ``text`` that start at or before ``pos`` (lexed
    again only on this error path)."""
    out = []
    group_token = tables.group_token
    for m in tables.master.finditer(text):
        start = m.start()
        if start > pos:
            break
        if group_token[m.lastindex] != _SKIP:  # (not whitespace or a comment)
            out.append((text[start : m.end(m.lastindex)], start))
    return out


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    # Point after the last non-empty line.
    while len(lines) > 1 and not lines[-1].strip():
        lines.pop()
    return len(lines), len(lines[-1]) + 1

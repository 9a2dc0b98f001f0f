"""A fast tokenizer for the .rx grammar, plugged into lark's LALR parser.

lark's own lexer tries terminals one by one; this one scans with a single compiled regular
expression whose alternatives are the grammar's terminals, which makes lexing several
times faster on large modules. It is built from the terminal definitions lark hands it, so
the grammar file stays the single source of truth: keywords and punctuation come from the
grammar's string terminals, and every regex terminal of the grammar must be one this lexer
knows how to order (construction fails loudly otherwise).
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from lark.lexer import Lexer, Token

# Regex terminals in the order they must be tried (longer/more specific first).
_REGEX_ORDER = ("LOCAL", "GLOBAL", "FLOAT", "INT", "NAME", "STRING")
_IGNORED = ("WS", "COMMENT")


class LexError(Exception):
    """A character that starts no token; the parser turns it into an RxError."""

    def __init__(self, pos: int, line: int, column: int, char: str):
        super().__init__(f"unexpected character {char!r} at {line}:{column}")
        self.pos = pos
        self.line = line
        self.column = column
        self.char = char


class RxLexer(Lexer):
    """Single-regex lexer producing lark Tokens with line and column."""

    def __init__(self, lexer_conf: Any):
        terminals = {t.name: t for t in lexer_conf.terminals}
        name_re = re.compile(terminals["NAME"].pattern.to_regexp())
        self.keywords: dict[str, str] = {}
        punct: list[tuple[str, str]] = []
        regexes: dict[str, str] = {}
        for t in lexer_conf.terminals:
            if t.pattern.type == "str":
                if name_re.fullmatch(t.pattern.value):
                    self.keywords[t.pattern.value] = t.name
                else:
                    punct.append((t.name, t.pattern.value))
            elif t.name not in _IGNORED:
                regexes[t.name] = t.pattern.to_regexp()
        unknown = set(regexes) - set(_REGEX_ORDER)
        if unknown:
            raise ValueError(f"RxLexer does not know how to order terminals {sorted(unknown)}")
        parts = [r"(?P<WS>\s+)", r"(?P<COMMENT>#[^\n]*)"]
        parts += [f"(?P<{name}>{regexes[name]})" for name in _REGEX_ORDER if name in regexes]
        punct.sort(key=lambda kv: -len(kv[1]))
        self.punct_names = {value: name for name, value in punct}
        parts.append("(?P<PUNCT>" + "|".join(re.escape(v) for _, v in punct) + ")")
        self.master = re.compile("|".join(parts))

    def lex(self, data: Any) -> Iterator[Token]:  # type: ignore[override]
        text = data if isinstance(data, str) else getattr(data, "text", data)
        match = self.master.match
        keywords = self.keywords
        punct_names = self.punct_names
        pos = 0
        end = len(text)
        line = 1
        line_start = 0
        while pos < end:
            m = match(text, pos)
            if m is None:
                raise LexError(pos, line, pos - line_start + 1, text[pos])
            kind = m.lastgroup
            value = m.group()
            new_pos = m.end()
            if kind == "WS":
                nl = value.count("\n")
                if nl:
                    line += nl
                    line_start = pos + value.rindex("\n") + 1
            elif kind != "COMMENT":
                if kind == "NAME":
                    kind = keywords.get(value, "NAME")
                elif kind == "PUNCT":
                    kind = punct_names[value]
                col = pos - line_start + 1
                yield Token(kind, value, pos, line, col, line, col + len(value), new_pos)
            pos = new_pos

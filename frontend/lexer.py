"""A fast tokenizer for the .rx grammar, built from the terminals lark compiles from rx.lark.

lark's own lexer tries terminals one by one; this one scans with a single compiled regular
expression whose alternatives are the grammar's terminals, which makes lexing several
times faster on large modules. It is built from the terminal definitions lark hands it, so
the grammar file stays the single source of truth: keywords and punctuation come from the
grammar's string terminals, and every regex terminal of the grammar must be one this lexer
knows how to order (construction fails loudly otherwise).

The master expression has one named group per terminal (and one per punctuation string),
matched empty at the end of the token, so the LALR engine (:mod:`relaxc.frontend.lalr`)
identifies a token by the match's ``lastindex`` alone: :attr:`RxLexer.group_kinds` maps a
group number to its terminal name, to :data:`SKIP` (whitespace, comments), to
:data:`KEYWORD_OR_NAME` (look the text up in :attr:`RxLexer.keywords`) or to
:data:`BAD_CHAR` (a character that starts no token). The last alternative matches any
single character, so ``finditer`` covers the text without gaps. The match of a terminal in
``space_after`` also takes the whitespace that follows it; the token ends at
``m.end(m.lastindex)``.

:meth:`RxLexer.lex` still yields lark Tokens, so the class also works as a plain lark lexer.
"""

from __future__ import annotations

import re
from typing import Any, Collection, Iterator

from lark.lexer import Lexer, Token

# Regex terminals in the order they must be tried (longer/more specific first).
_REGEX_ORDER = ("LOCAL", "GLOBAL", "FLOAT", "INT", "NAME", "STRING")
_IGNORED = ("WS", "COMMENT")

SKIP = "<skip>"
"""Group kind of whitespace and comments."""
KEYWORD_OR_NAME = "NAME"
"""Group kind of names: a keyword when its text is in :attr:`RxLexer.keywords`."""
BAD_CHAR = "<bad>"
"""Group kind of the catch-all alternative: a character that starts no token."""


class LexError(Exception):
    """A character that starts no token; the parser turns it into an RxError."""

    def __init__(self, pos: int, line: int, column: int, char: str):
        super().__init__(f"unexpected character {char!r} at {line}:{column}")
        self.pos = pos
        self.line = line
        self.column = column
        self.char = char


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of offset ``pos`` (lines are separated by ``\\n`` only)."""
    return text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)


class RxLexer(Lexer):
    """Single-regex lexer for the .rx terminals (see the module docstring)."""

    def __init__(self, lexer_conf: Any, space_after: Collection[str] = ()):
        """``space_after``: terminals whose match also takes the whitespace after them.

        That saves a match per gap after such a token (the parser passes the punctuation
        whose text it never uses); the token itself ends at ``m.end(m.lastindex)``.
        """
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
        # Whitespace is Python's \s (wider than the grammar's WS) and, like comments, skipped.
        parts = [("_WS", r"\s+", SKIP), ("_COMMENT", r"#[^\n]*", SKIP)]
        parts += [(name, regexes[name], name) for name in _REGEX_ORDER if name in regexes]
        # Longest punctuation first ("->" before "-"); one group each.
        punct.sort(key=lambda kv: -len(kv[1]))
        parts += [(name, re.escape(value), name) for name, value in punct]
        parts.append(("_BAD", ".", BAD_CHAR))  # never matches "\n", which \s+ takes
        # Each alternative is the terminal's regex followed by an empty group named after it:
        # the match's lastindex is that group, and an alternative that starts with a literal
        # or a character class is skipped on its first character (re does not do that for an
        # alternative that starts with a group), which makes the scan much cheaper.
        self.master = re.compile(
            "|".join(
                f"(?:{regex})(?P<{group}>)" + (r"\s*" if group in space_after else "")
                for group, regex, _ in parts
            )
        )
        kinds: list[str | None] = [None] * (self.master.groups + 1)  # inner groups: never lastindex
        for group, _, kind in parts:
            kinds[self.master.groupindex[group]] = kind
        self.group_kinds: tuple[str | None, ...] = tuple(kinds)

    def lex(self, data: Any) -> Iterator[Token]:  # type: ignore[override]
        """lark's lexer interface: Tokens with line and column (the parser has a faster path)."""
        text = data if isinstance(data, str) else getattr(data, "text", data)
        kinds = self.group_kinds
        keywords = self.keywords
        line, line_start = 1, 0
        for m in self.master.finditer(text):
            kind = kinds[m.lastindex]
            pos = m.start()
            end = m.end(m.lastindex)  # the token's end (whitespace it took comes after)
            if kind is not SKIP:
                col = pos - line_start + 1
                if kind is BAD_CHAR:
                    raise LexError(pos, line, col, text[pos])
                value = text[pos:end]
                if kind == KEYWORD_OR_NAME:
                    kind = keywords.get(value, KEYWORD_OR_NAME)
                yield Token(kind, value, pos, line, col, line, col + len(value), end)
            newlines = text.count("\n", pos, m.end())
            if newlines:
                line += newlines
                line_start = text.rindex("\n", pos, m.end()) + 1

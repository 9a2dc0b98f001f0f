"""Grammar-aware mutations of .rx programs, at the level of relaxc's own tokens.

A program is cut into tokens by relaxc's lexer (the terminals lark compiles from rx.lark);
each mutation edits the text at token boundaries, so whitespace, comments and the rest of
the program stay as they were and the result looks like something a person could have
written: a token deleted, duplicated, swapped with its neighbour or replaced by another of
the program's tokens, an integer made huge, negative or zero, a dtype or a name replaced by
another valid-looking one, a shape replaced, an operator or a bracket changed, the text cut
at a token boundary. Everything is drawn from a ``random.Random`` with a fixed seed, so the
corpus is the same on every run (for a given grammar and sample).

:func:`mutants` gives ``(name, text)`` pairs; the name says what was done and where
(``int@37:4611686018427387904``), so a failing case can be reproduced by hand.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator

from relaxc.frontend.lexer import RxLexer
from relaxc.frontend.parser import _tables

INTS = (
    "0",
    "1",
    "-1",
    "2",
    "-2",
    "3",
    "7",
    "64",
    "65",
    "128",
    "4096",
    "2147483647",
    "2147483648",
    "4294967296",
    "4611686018427387904",  # 2**62
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "1" + "0" * 40,
    "00",
    "0x10",
)
DTYPES = (
    "bool",
    "i8",
    "i16",
    "i32",
    "i64",
    "u8",
    "u16",
    "u32",
    "f16",
    "bf16",
    "f32",
    "f64",
    "float32",
    "int64",
    "f33",
    "F32",
    "Tensor",
    "Storage",
    "inf",
    "nan",
    "max",
    "n",
    "m",
)
NAMES = (
    "n",
    "m",
    "k",
    "h",
    "q",
    "inf",
    "nan",
    "true",
    "false",
    "fn",
    "return",
    "call",
    "invoke",
    "outs",
    "attrs",
    "Tensor",
    "Tuple",
    "f32",
    "max",
    "min",
    "primitive",
    "upper_bounds",
    "a.b",
    "_",
    "x" * 300,
)
OPS = (
    "add",
    "subtract",
    "multiply",
    "relu",
    "exp",
    "dense",
    "matmul",
    "reshape",
    "flatten",
    "softmax",
    "conv2d",
    "concat",
    "transpose",
    "layer_norm",
    "const",
    "memory.alloc_storage",
    "memory.alloc_tensor",
    "memory.kill_tensor",
    "memory.kill_storage",
    "vm.kill_object",
    "call_packed",
    "no_such_op",
    "add.add",
)
SHAPES = (
    "()",
    "(0,)",
    "(1,)",
    "(-1,)",
    "(0, 0)",
    "(n,)",
    "(n, n)",
    "(m,)",
    "(n * 2 + 1,)",
    "(n / 0,)",
    "(4611686018427387904,)",
    "(4611686018427387904, 4611686018427387904)",
    "(9223372036854775808,)",
    "(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
    "1, 1, 1, 1, 1, 1)",
    "(max(n, 4),)",
    "(min(n, 0),)",
    "((n),)",
    "(-n,)",
    "(n - 200,)",
)
PUNCT = (
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "=",
    "->",
    ".",
    "+",
    "-",
    "*",
    "/",
    "%",
    "@",
    '"',
    "#",
    ";",
)
STRINGS = (
    '""',
    '"a"',
    '"fc1.weight"',
    '"\\u0000"',
    '"\\ud800"',
    '"\\q"',
    '"' + "w" * 5000 + '"',
    '"é"',
    '"\\n"',
)
FLOATS = ("0.0", "-0.0", "1e400", "-1e400", "1.5", "1e-400", "inf", "nan", "-inf", "3")
LOCALS = ("%undefined", "%0", "%x", "%_", "%" + "a" * 300)
GLOBALS = ("@main", "@undefined", "@fused_add_subtract", "@scaled_softmax", "@_")
KEYWORDS = ("fn", "call", "invoke", "return", "outs", "attrs")


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int
    end: int


def tokens(text: str) -> list[Token]:
    """The tokens of ``text`` (which must lex), by relaxc's own lexer."""
    lexer = RxLexer(_tables().lark.lexer_conf)
    return [Token(t.type, t.value, t.start_pos, t.end_pos) for t in lexer.lex(text)]


class Mutator:
    """Mutations of one program; every choice comes from ``rng``."""

    def __init__(self, text: str, rng: random.Random):
        self.text = text
        self.rng = rng
        self.toks = tokens(text)
        self.by_kind: dict[str, list[int]] = {}
        for i, t in enumerate(self.toks):
            self.by_kind.setdefault(t.kind, []).append(i)
        own = lambda kind: sorted({t.text for t in self.toks if t.kind == kind})  # noqa: E731
        self.locals = own("LOCAL") + list(LOCALS)
        self.globals = own("GLOBAL") + list(GLOBALS)
        self.shapes = self._shape_spans()

    # -- helpers -----------------------------------------------------------------------------
    def _replace(self, i: int, new: str) -> str:
        t = self.toks[i]
        return self.text[: t.start] + new + self.text[t.end :]

    def _pick(self, *kinds: str) -> int | None:
        idx = [i for k in kinds for i in self.by_kind.get(k, ())]
        return self.rng.choice(idx) if idx else None

    def _where(self, i: int) -> str:
        return str(self.toks[i].start)

    def _shape_spans(self) -> list[tuple[int, int]]:
        """(start, end) offsets of the shape of every ``Tensor[(...), dtype]``."""
        spans = []
        toks = self.toks
        for i, t in enumerate(toks):
            if (
                t.text == "Tensor"
                and i + 2 < len(toks)
                and toks[i + 1].text == "["
                and toks[i + 2].text == "("
            ):
                depth = 0
                for j in range(i + 2, len(toks)):
                    depth += {"(": 1, ")": -1}.get(toks[j].text, 0)
                    if depth == 0:
                        spans.append((toks[i + 2].start, toks[j].end))
                        break
        return spans

    # -- the mutations (each gives a name and a text, or None when it does not apply) ----
    def delete(self) -> tuple[str, str]:
        i = self.rng.randrange(len(self.toks))
        return f"delete@{self._where(i)}", self._replace(i, "")

    def duplicate(self) -> tuple[str, str]:
        i = self.rng.randrange(len(self.toks))
        t = self.toks[i]
        return f"duplicate@{self._where(i)}", self._replace(i, f"{t.text} {t.text}")

    def swap(self) -> tuple[str, str] | None:
        if len(self.toks) < 2:
            return None
        i = self.rng.randrange(len(self.toks) - 1)
        a, b = self.toks[i], self.toks[i + 1]
        text = (
            self.text[: a.start] + b.text + self.text[a.end : b.start] + a.text + self.text[b.end :]
        )
        return f"swap@{self._where(i)}", text

    def copy_token(self) -> tuple[str, str]:
        i = self.rng.randrange(len(self.toks))
        j = self.rng.randrange(len(self.toks))
        return f"copy@{self._where(i)}<-{self._where(j)}", self._replace(i, self.toks[j].text)

    def _from(self, name: str, kinds: tuple[str, ...], pool) -> tuple[str, str] | None:
        i = self._pick(*kinds)
        if i is None:
            return None
        new = self.rng.choice(list(pool))
        return f"{name}@{self._where(i)}:{new[:24]}", self._replace(i, new)

    def integer(self):
        return self._from("int", ("INT",), INTS)

    def dtype(self):
        # A NAME right after "," inside Tensor[...] is a dtype; any NAME will do for the rest.
        idx = [
            i
            for i in self.by_kind.get("NAME", ())
            if i + 1 < len(self.toks) and self.toks[i + 1].text == "]"
        ]
        if not idx:
            return None
        i = self.rng.choice(idx)
        new = self.rng.choice(DTYPES)
        return f"dtype@{self._where(i)}:{new}", self._replace(i, new)

    def name(self):
        return self._from("name", ("NAME",), NAMES)

    def op(self):
        idx = [
            i
            for i in self.by_kind.get("NAME", ())
            if i + 1 < len(self.toks) and self.toks[i + 1].text == "("
        ]
        if not idx:
            return None
        i = self.rng.choice(idx)
        new = self.rng.choice(OPS)
        return f"op@{self._where(i)}:{new}", self._replace(i, new)

    def local(self):
        return self._from("local", ("LOCAL",), self.locals)

    def global_(self):
        return self._from("global", ("GLOBAL",), self.globals)

    def keyword(self):
        return self._from("keyword", ("FN", "CALL", "INVOKE", "RETURN", "OUTS", "ATTRS"), KEYWORDS)

    def string(self):
        return self._from("string", ("STRING",), STRINGS)

    def number(self):
        return self._from("float", ("FLOAT",), FLOATS)

    def punct(self):
        i = self.rng.randrange(len(self.toks))
        new = self.rng.choice(PUNCT)
        return f"punct@{self._where(i)}:{new}", self._replace(i, new)

    def shape(self):
        if not self.shapes:
            return None
        start, end = self.rng.choice(self.shapes)
        new = self.rng.choice(SHAPES)
        return f"shape@{start}:{new[:24]}", self.text[:start] + new + self.text[end:]

    def truncate(self):
        i = self.rng.randrange(len(self.toks))
        t = self.toks[i]
        cut = t.start if self.rng.random() < 0.5 else t.end
        return f"truncate@{cut}", self.text[:cut]

    def unbalance(self):
        i = self.rng.randrange(len(self.toks))
        t = self.toks[i]
        new = self.rng.choice(("(", ")", "[", "]", "{", "}", "((((", "}}}}"))
        at = t.start if self.rng.random() < 0.5 else t.end
        return f"unbalance@{at}:{new}", self.text[:at] + new + self.text[at:]

    KINDS = (
        "delete",
        "duplicate",
        "swap",
        "copy_token",
        "integer",
        "dtype",
        "name",
        "op",
        "local",
        "global_",
        "keyword",
        "string",
        "number",
        "punct",
        "shape",
        "truncate",
        "unbalance",
    )

    def one(self) -> tuple[str, str]:
        """One mutation of a kind chosen at random (another kind if it does not apply)."""
        while True:
            m = getattr(self, self.rng.choice(self.KINDS))()
            if m is not None:
                return m


def mutants(text: str, seed: int, count: int) -> list[tuple[str, str]]:
    """``count`` distinct mutants of ``text`` (never ``text`` itself), deterministic in ``seed``."""
    mut = Mutator(text, random.Random(seed))
    out: dict[str, tuple[str, str]] = {}
    tries = 0
    while len(out) < count and tries < count * 20:
        tries += 1
        name, new = mut.one()
        if new != text and new not in out:
            out[new] = (name, new)
    return list(out.values())


def truncations(text: str) -> Iterator[tuple[str, str]]:
    """``text`` cut before and after one token of every kind (and at its very end)."""
    seen: set[str] = set()
    for t in tokens(text):
        if t.kind in seen:
            continue
        seen.add(t.kind)
        yield f"cut-before-{t.kind}@{t.start}", text[: t.start]
        yield f"cut-after-{t.kind}@{t.end}", text[: t.end]
        yield f"cut-inside-{t.kind}@{t.start}", text[: t.start + max(1, len(t.text) // 2)]

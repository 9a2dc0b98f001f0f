"""Constructs relaxc does not have, recognised where a syntax error stops at them.

Users arriving from Relay or Relax write ``if``/``else``, ``match`` with ``type``
declarations, ``dataflow`` blocks and ``Shape`` / ``R.Shape`` types. None of these is in the
grammar, and none of their words is a keyword (``if`` or ``type`` may name an op or an
attribute), so valid programs parse exactly as before and the LALR path pays nothing. When
the parser stops with a syntax error, :func:`out_of_scope` looks at the tokens where it
stopped; if they are one of these constructs, the error becomes a sentence that says it is
not supported, located at the construct's first word, instead of "unexpected ...".

A construct is recognised only in the shape a user would write it, by the token the parser
stopped at:

* ``if %c {``, ``if (%c) {``, ``if %c:`` (and a stray ``else {``): stopped just after
  ``if``, or at the ``{`` after ``if ( ... )`` (which parses as far as a call of an op
  named ``if``);
* ``match %l {`` / ``match (%l) {``: the same;
* ``dataflow {``, ``dataflow() {``, ``with R.dataflow():``;
* ``type List = ...`` where a function must start;
* ``Shape``, ``Shape[(n,)]``, ``R.Shape(["n"])`` where a type must come.
"""

from __future__ import annotations

from typing import Collection

from relaxc.ir.diagnostics import Loc, RxError

from .lexer import line_col

_IF = "if/else is not supported: relaxc function bodies are straight-line, with no control flow"
_MATCH = (
    "match is not supported: relaxc function bodies are straight-line, and relaxc has no "
    "algebraic data types"
)
_TYPE_DECL = (
    "type declarations and match are not supported: relaxc has no algebraic data types "
    "(values are tensors, tuples of them, storages and objects)"
)
_DATAFLOW = (
    "dataflow blocks are not supported (a relaxc body is already one straight-line "
    "block): write the block's bindings directly in the function body"
)
_SHAPE_PARAM = (
    "Shape parameters are not supported: shapes are dims of tensor parameters "
    "(write the dims in a tensor's type, e.g. %x: Tensor[(n, 4), f32], and use n)"
)
_SHAPE_TYPE = (
    "Shape types are not supported: a shape is the dims of a tensor type, symbolic ones "
    "included (e.g. Tensor[(n, 4), f32])"
)

_BLOCK_WORDS = {
    "if": _IF,
    "else": _IF,
    "match": _MATCH,
    "dataflow": _DATAFLOW,
    "R.dataflow": _DATAFLOW,
}
_SHAPE_WORDS = ("Shape", "R.Shape")


def out_of_scope(
    tokens: list[tuple[str, int]],
    error_at: int,
    expected: Collection[str],
    filename: str,
    text: str,
) -> RxError | None:
    """The refusal of an unsupported construct the parser stopped at, or None.

    ``tokens`` are ``(text, offset)`` of the tokens up to the one the parser stopped at
    (included; the end of the input has none), ``error_at`` the index of that token in
    ``tokens`` (``len(tokens)`` at the end of the input), ``expected`` the descriptions of the
    tokens the parser could have taken there (as in its message: ``"'Tensor'"``, ``"'fn'"``).
    """

    def at(i: int, message: str) -> RxError:
        word, pos = tokens[i]
        line, col = line_col(text, pos)
        return RxError(message, Loc(filename, line, col, max(1, len(word))))

    def word(i: int) -> str | None:
        return tokens[i][0] if 0 <= i < len(tokens) else None

    e = error_at
    here = word(e)
    if here in _SHAPE_WORDS and "'Tensor'" in expected:
        return at(e, _SHAPE_PARAM if _in_parameters(tokens, e) else _SHAPE_TYPE)
    if here == "type" and "'fn'" in expected:
        return at(e, _TYPE_DECL)
    # Stopped just after the construct's word: `if %c {`, `match %l {`, `dataflow {`, `if %c:`.
    before = word(e - 1)
    if before in _BLOCK_WORDS and here != "(":
        return at(e - 1, _BLOCK_WORDS[before])
    if before == "with" and here is not None and here.split(".")[-1] == "dataflow":
        return at(e - 1, _DATAFLOW)
    # Stopped at the `{` (or `:`) after `if ( ... )`, `match (...)`, `dataflow()`.
    if here in ("{", ":") and before == ")":
        depth, i = 0, e - 1
        while i >= 0:
            w = word(i)
            depth += (w == ")") - (w == "(")
            if depth == 0:
                break
            i -= 1
        if word(i - 1) in _BLOCK_WORDS:
            return at(i - 1, _BLOCK_WORDS[word(i - 1)])  # type: ignore[index]
    return None


def _in_parameters(tokens: list[tuple[str, int]], e: int) -> bool:
    """True if token ``e`` is in a function's parameter list (after ``fn @f(``, before ``->``)."""
    for i in range(e - 1, -1, -1):
        w = tokens[i][0]
        if w in ("->", "{", "}", "="):
            return False
        if w == "fn":
            return True
    return False

"""Turning errors into messages and exit codes (the only place relaxc decides how to fail).

Exit status: 0 success, 1 an error in the user's input (IR, weights, inputs, a budget
exceeded), 2 a usage error (click's own), 3 an internal error (a bug in relaxc), 130
interrupted by Ctrl-C; a stdout closed by its reader is a normal end, 0 (see
:mod:`relaxc.cli.entry`).
Tracebacks appear only with ``--debug``.
"""

from __future__ import annotations

import re
import sys
import traceback
import unicodedata
from contextlib import contextmanager
from typing import Iterator

import click

from relaxc.ir.diagnostics import InternalError, Loc, RxError, render_error

EXIT_USER_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130
"""Ctrl-C: 128 + SIGINT, as a shell reports a command that SIGINT ended."""
EXIT_OUTPUT_CLOSED = 0
"""stdout was a pipe whose reader went away (``| head -1``): a normal end, whenever it
happens (a command whose output fits in the pipe never notices the reader leave)."""


class Interrupted(BaseException):
    """Ctrl-C, carried past click (which would print ``Aborted!`` and exit 1) to
    :mod:`relaxc.cli.entry`, which exits 130 without a traceback."""


class OutputClosed(BaseException):
    """The reader of stdout went away (``| head -1``): a normal end, not an error, carried
    past click (which would exit 1) to :mod:`relaxc.cli.entry`, which exits 0 quietly."""


class Sources(dict):
    """File name → text of every source read in this invocation (for carets in errors)."""


_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def printable(text: str) -> str:
    """``text`` with control and invisible formatting characters (escape sequences, bidi
    overrides, zero-width spaces, byte-order marks, line separators) shown as U+FFFD: an
    error quoting a hostile source line cannot drive the terminal, and its caret stays
    under its column. Newlines and tabs stay."""
    text = _ASCII_CONTROL.sub("\ufffd", text)
    if text.isascii():
        return text
    return "".join(
        "\ufffd" if c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c
        for c in text
    )


_BRACKET = re.compile(r'#[^\n]*|"(?:[^"\\\n]|\\.)*"|[(\[{]|[)\]}]')
_DEEP = 32
"""Nesting from which the deepest bracket is named as the likely cause of a RecursionError."""


def _too_deep(sources: Sources) -> RxError:
    """The error for a program too deep for Python's recursion: at its deepest bracket when
    brackets nest deeply (found only now, on this rare path), else about the whole file."""
    if not sources:
        return RxError("the program nests too deeply for relaxc")
    name, text = list(sources.items())[-1]
    opened: list[int] = []  # offsets of the brackets open at this point
    deepest = at = 0
    for m in _BRACKET.finditer(text):
        c = text[m.start()]
        if c in "([{":
            opened.append(m.start())
            if len(opened) > deepest:
                deepest = len(opened)
                at = opened[min(deepest, _DEEP) - 1]
        elif c in ")]}" and opened:
            opened.pop()
    if deepest >= _DEEP:
        line = text.count("\n", 0, at) + 1
        col = at - text.rfind("\n", 0, at)
        return RxError(
            f"brackets nest {deepest:,} levels deep (level {_DEEP} opens here), more "
            "than relaxc can handle (split the expression or type into several bindings)",
            Loc(name, line, col),
        )
    return RxError(
        f"{name}: the program nests too deeply for relaxc (a very long chain of + - * / in a "
        "dimension expression?); split it into several bindings"
    )


@contextmanager
def reported_errors(sources: Sources, debug: bool) -> Iterator[None]:
    """Render RxError as ``file:line:col: error: ...`` with a caret, exit 1; bugs exit 3."""
    try:
        yield
    except RxError as e:
        if debug:
            traceback.print_exc(file=sys.stderr)
        click.echo(printable(render_error(e, sources)), err=True)
        sys.exit(EXIT_USER_ERROR)
    except (click.exceptions.Exit, click.ClickException, SystemExit, KeyboardInterrupt):
        raise
    except BrokenPipeError:
        raise OutputClosed() from None
    except RecursionError:
        if debug:
            traceback.print_exc(file=sys.stderr)
        click.echo(printable(render_error(_too_deep(sources), sources)), err=True)
        sys.exit(EXIT_USER_ERROR)
    except (InternalError, Exception) as e:  # noqa: BLE001 - the last line of defence
        if debug:
            traceback.print_exc(file=sys.stderr)
            click.echo(f"internal error: {type(e).__name__}: {e}", err=True)
        else:
            click.echo(
                f"internal error: {type(e).__name__}: {e}\n"
                "this is a bug in relaxc; re-run with --debug for a traceback and please report it",
                err=True,
            )
        sys.exit(EXIT_INTERNAL)

"""Source locations and the one error type every user-facing mistake is reported with.

An :class:`RxError` carries a message and, when it is about IR text, a :class:`Loc`.
Rendering (``file:line:col: error: message``, the source line, a caret) needs the source
text, which the caller holds; :func:`render_error` takes it as an argument so nothing here
keeps global state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True, slots=True)
class Loc:
    """A position in a source file: 1-based line and column, and an optional span width.

    ``origin`` is set for a program that was not read from text but made from another file
    (an ONNX model imported in memory): what in that file the IR node comes from, such as
    ``node 'conv1' (Conv)`` or ``input 'gpu_0/data_0'``. Such a location is printed as
    ``model.onnx: node 'conv1' (Conv)``; its ``line`` is then the line the node would have
    in the text ``relaxc import`` writes (it orders program points; no file has it)."""

    file: str
    line: int
    col: int
    width: int = 1
    origin: str = ""

    def __str__(self) -> str:
        if self.origin:
            return f"{self.file}: {self.origin}"
        return f"{self.file}:{self.line}:{self.col}"

    @property
    def at(self) -> str:
        """Where, inside its file: ``line 12``, or the origin (``node 'conv1' (Conv)``)."""
        return self.origin or f"line {self.line}"


class RxError(Exception):
    """An error in the user's input (IR text, weights, options), rendered without a traceback.

    ``notes`` are extra lines printed after the caret (hints, the alternatives to a typo).
    """

    def __init__(
        self,
        message: str,
        loc: Loc | None = None,
        notes: tuple[str, ...] = (),
        snippet: tuple[str, ...] = (),
    ):
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.notes = tuple(notes)
        self.snippet = tuple(
            snippet
        )  # lines shown verbatim under the message (e.g. an option and a caret)

    def __str__(self) -> str:
        prefix = f"{self.loc}: " if self.loc is not None else ""
        return f"{prefix}error: {self.message}"


class InternalError(Exception):
    """A bug in relaxc itself (for example, a pass that produced invalid IR)."""


def source_line(text: str, line: int) -> str | None:
    """Return line ``line`` (1-based) of ``text`` without its newline, or None if absent."""
    lines = text.split("\n")  # only "\n" ends a line in .rx (not \f, \v or U+2028)
    if 1 <= line <= len(lines):
        return lines[line - 1].rstrip("\r")
    return None


def render_error(err: RxError, sources: Mapping[str, str] | None = None) -> str:
    """Render ``err`` as ``file:line:col: error: msg`` plus the source line and a caret."""
    out = [str(err)]
    if (
        err.loc is not None
        and not err.loc.origin
        and sources is not None
        and err.loc.file in sources
    ):
        text_line = source_line(sources[err.loc.file], err.loc.line)
        if text_line is not None:
            printable = text_line.replace("\t", " ")
            out.append("  " + printable)
            col = max(err.loc.col, 1)
            width = max(1, min(err.loc.width, max(1, len(printable) - col + 1)))
            out.append("  " + " " * (col - 1) + "^" * width)
    out.extend(err.snippet)
    for note in err.notes:
        out.append(f"note: {note}")
    return "\n".join(out)

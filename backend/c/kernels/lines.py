"""The one builder of C text the kernels write through: lines with their nesting.

:class:`Gen` (a kernel's body) is one; the micro-tiles of :mod:`.microtile` and the static
functions of a Winograd kernel (:mod:`.winograd`) use it alone. A block indents its body by
4 spaces, or by the ``step`` it is given (``{ const float w = ...;`` bodies indent by 2 in
the micro-tiles); preprocessor lines go at column 0 (:meth:`CLines.raw`).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


class CLines:
    """C lines under construction, each indented to the depth of the blocks around it."""

    def __init__(self, depth: int = 0) -> None:
        self.lines: list[str] = []
        self.indent = "    " * depth

    def emit(self, line: str) -> None:
        """``line`` at the current depth."""
        self.lines.append(self.indent + line)

    def raw(self, line: str) -> None:
        """``line`` as it is (``#if``, ``#endif``: at column 0)."""
        self.lines.append(line)

    @contextmanager
    def opened(self, line: str, step: int = 4, close: str | None = "}") -> Iterator[None]:
        """``line`` (which opens a brace), the body ``step`` spaces deeper, then ``close`` at
        ``line``'s depth (none: the next line closes it, ``} else {``)."""
        self.emit(line)
        outer = self.indent
        self.indent = outer + " " * step
        yield
        self.indent = outer
        if close is not None:
            self.emit(close)

    @contextmanager
    def block(self, head: str) -> Iterator[None]:
        """``head {``, the body 4 spaces deeper, ``}``."""
        with self.opened(head + " {"):
            yield

    @contextmanager
    def loop(self, var: str, extent: str, start: str = "0") -> Iterator[None]:
        with self.block(f"for ({var} = {start}; {var} < {extent}; ++{var})"):
            yield

    def text(self) -> str:
        return "\n".join(self.lines)

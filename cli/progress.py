"""Progress of long work: a ``rich`` display on stderr for the steps of a command.

A command runs its long work in steps (``with progress.step("emitting C", total) as s:
... s.update(done)``). A step's display appears only once the step has run for about a
second (``delay``), is redrawn a few times a second by rich's own thread, and is erased when
the step ends, so nothing is left between the lines a command prints and a quick command
shows nothing at all. There is no display with ``-q``, when stderr is not a terminal (a pipe,
a file, click's CliRunner), or with ``RELAXC_PROGRESS=0``; ``RELAXC_PROGRESS=1`` forces it
(even when stderr is not a terminal), and ``RELAXC_PROGRESS_DELAY=SECONDS`` changes the
delay. Tests inject a console through the click context object (``obj["progress_console"]``,
``obj["progress_delay"]``).

A disabled display costs one method call per update; an enabled one forwards at most about
twenty updates a second to rich, so a step may report every statement it emits.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress as RichProgress,
    ProgressColumn,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

DELAY = 1.0
"""Seconds a step runs before its display appears."""

ENV = "RELAXC_PROGRESS"
ENV_DELAY = "RELAXC_PROGRESS_DELAY"
_FORWARD_EVERY = 0.05  # seconds between updates forwarded to rich


class Step:
    """One step of a command; :meth:`update` says how far it is."""

    def update(self, done: int, total: int | None = None, what: str | None = None) -> None:
        """``done`` units of ``total`` (which may change, e.g. from statements to bytes);
        ``what`` replaces the description."""

    def advance(self, n: int = 1) -> None:
        """``n`` more units done."""


class _ShownStep(Step):
    def __init__(self, owner: "Progress", description: str, total: int | None):
        self.owner = owner
        self.description = description
        self.total = total
        self.done = 0
        self._last = 0.0
        self._lock = threading.Lock()
        self._rich: RichProgress | None = None
        self._task: Any = None
        self._closed = False
        self._timer = threading.Timer(owner.delay, self._show)
        self._timer.daemon = True
        self._started_at = time.monotonic()

    def start(self) -> None:
        if self.owner.delay <= 0:
            self._show()
        else:
            self._timer.start()

    def _show(self) -> None:
        with self._lock:
            if self._closed or self._rich is not None:
                return
            columns: list[ProgressColumn] = [SpinnerColumn(), TextColumn("{task.description}")]
            if self.total is not None:  # else a spinner and the time only
                columns += [BarColumn(), TaskProgressColumn()]
            rich = RichProgress(
                *columns,
                TimeElapsedColumn(),
                console=self.owner.console,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
                refresh_per_second=8,
            )
            self._task = rich.add_task(self.description, total=self.total, completed=self.done)
            # The elapsed time counts from the start of the step, not from the display.
            rich.tasks[0].start_time = rich.get_time() - (time.monotonic() - self._started_at)
            rich.start()
            self._rich = rich

    def update(self, done: int, total: int | None = None, what: str | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        renamed = what is not None and what != self.description
        if renamed:
            self.description = what  # type: ignore[assignment]
        now = time.monotonic()
        if self._rich is None or (now - self._last < _FORWARD_EVERY and not renamed):
            return
        self._last = now
        with self._lock:
            if self._rich is not None and not self._closed:
                self._rich.update(
                    self._task, completed=self.done, total=self.total, description=self.description
                )

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._closed = True
            if self._rich is not None:
                self._rich.stop()
                self._rich = None


class Progress:
    """The progress display of one command (disabled when ``console`` is None)."""

    def __init__(self, console: Console | None, delay: float = DELAY):
        self.console = console
        self.delay = delay

    @property
    def enabled(self) -> bool:
        return self.console is not None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        return None  # each step erases its own display

    @contextmanager
    def step(self, description: str, total: int | None = None) -> Iterator[Step]:
        """A step of the command: shown once it has run for :attr:`delay` seconds, erased
        when it ends (also by an exception)."""
        if self.console is None:
            yield Step()
            return
        s = _ShownStep(self, description, total)
        s.start()
        try:
            yield s
        finally:
            s.close()

    def callback(self, step: Step, labels: Mapping[str, str] | None = None):
        """A ``(what, done, total)`` callback for a backend, updating ``step`` (``labels``
        names each ``what`` in the display)."""

        def report(what: str, done: int, total: int) -> None:
            step.update(done, total, labels.get(what) if labels else None)

        return report


def make_progress(obj: Mapping[str, Any] | None, quiet: bool = False) -> Progress:
    """The display for a command: disabled with ``quiet``, without a terminal on stderr, or
    with RELAXC_PROGRESS=0 (see the module's docstring)."""
    env = os.environ.get(ENV, "").strip()
    if quiet or env == "0":
        return Progress(None)
    obj = obj or {}
    console = obj.get("progress_console")
    if console is None:
        console = Console(file=sys.stderr, force_terminal=True if env == "1" else None)
    if not console.is_terminal:
        return Progress(None)
    delay = obj.get("progress_delay")
    if delay is None:
        try:
            delay = float(os.environ.get(ENV_DELAY, DELAY))
        except ValueError:
            delay = DELAY
    return Progress(console, delay)

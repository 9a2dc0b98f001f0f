"""``--time-passes``: the wall time of every step of a command, not only of the passes.

Real models spend their time outside the passes too (parsing a large .rx, importing an ONNX
model, reading the weights, code generation, writing), so a :class:`Stopwatch` records each
step in the order it ran and the passes' own times are slotted in where the pipeline ran.
One stopwatch lives for one command invocation.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from rich.console import Console
from rich.table import Table


@dataclass
class Stopwatch:
    """Steps (kind, name, seconds) in run order; a disabled one records nothing."""

    enabled: bool = True
    steps: list[tuple[str, str, float]] = field(default_factory=list)

    @contextmanager
    def step(self, kind: str, name: str = "") -> Iterator[None]:
        """Time the body as one step (``kind``: parse, verify, weights, import, codegen,
        write, ...); a step that raises is not recorded."""
        if not self.enabled:
            yield
            return
        start = time.perf_counter()
        yield
        self.steps.append((kind, name, time.perf_counter() - start))

    def add_passes(self, times: Sequence[tuple[str, float]]) -> None:
        """The pipeline's passes, each as a step of kind ``pass``."""
        if self.enabled:
            self.steps.extend(("pass", name, secs) for name, secs in times)


def print_steps(watch: Stopwatch) -> None:
    """The table ``--time-passes`` prints on stderr: every step, then the passes' subtotal
    and the total."""
    table = Table(title="times", show_edge=False)
    table.add_column("#", justify="right")
    table.add_column("step")
    table.add_column("", no_wrap=False)
    table.add_column("seconds", justify="right")
    passes = total = 0.0
    for i, (kind, name, secs) in enumerate(watch.steps, start=1):
        table.add_row(str(i), kind, name, f"{secs:.4f}")
        total += secs
        if kind == "pass":
            passes += secs
    table.add_row("", "passes", "", f"{passes:.4f}")
    table.add_row("", "total", "", f"{total:.4f}")
    Console(stderr=True).print(table)

"""The memory budget (``--max-arena``): nothing passes silently.

A function's workspace (its arenas plus its bounded storages outside an arena, every
symbolic size counted at its upper bound: ``workspace_bytes``) must fit the budget. A
function whose memory the report cannot count fails the check rather than pass with 0
bytes: one whose memory is implicit (no ManifestAlloc or PlanMemory ran on it), and one with
an allocation that has no upper bound, unless ``--allow-unbounded`` says to check only the
bounded part (a warning then names what was left out). Explicit memory that no PlanMemory
planned is counted in full, every allocation as if all were live at once.
"""

from __future__ import annotations

from typing import Callable, Sequence

import click

from relaxc.ir.diagnostics import RxError

from .report.analysis import FunctionReport
from .units import ByteSize, format_bytes


def budget_options(
    max_arena_help: str, allow_unbounded_help: str | None = None
) -> Callable[[Callable], Callable]:
    """Decorate a command with ``--max-arena`` (described by ``max_arena_help``) and
    ``--allow-unbounded`` (``allow_unbounded_help``, or its meaning for the budget alone)."""

    def decorate(f: Callable) -> Callable:
        f = click.option(
            "--allow-unbounded",
            is_flag=True,
            help=allow_unbounded_help
            or "With --max-arena: check only the bounded memory, with a warning naming the "
            "allocations that have no upper bound (without it, they fail the check).",
        )(f)
        return click.option("--max-arena", type=ByteSize(), metavar="BYTES", help=max_arena_help)(f)

    return decorate


def _unbounded(r: FunctionReport) -> str:
    shown = ", ".join(f"%{d.name} ({d.size.expr} bytes)" for d in r.dynamic[:3])
    more = f" and {len(r.dynamic) - 3} more" if len(r.dynamic) > 3 else ""
    return f"@{r.name} has {len(r.dynamic)} allocation(s) with no upper bound: {shown}{more}"


def _budget_text(n: int) -> str:
    try:
        return format_bytes(n)
    except OverflowError:  # more than a float holds (a budget of 400 digits)
        return f"{n:,} B"


def budget_problems(
    reports: Sequence[FunctionReport], max_arena: int, allow_unbounded: bool = False
) -> tuple[list[str], list[str]]:
    """What stops ``reports`` from passing a budget of ``max_arena`` bytes: the functions
    whose memory cannot be counted, and those that need more (both empty: they fit)."""
    uncounted: list[str] = []
    over: list[str] = []
    for r in reports:
        if not r.explicit:
            uncounted.append(
                f"@{r.name} is not planned (no ManifestAlloc or PlanMemory ran on it), so its "
                "memory is not known"
            )
            continue
        if r.dynamic and not allow_unbounded:
            uncounted.append(_unbounded(r))
        if r.workspace_bytes > max_arena:
            over.append(f"@{r.name} needs {format_bytes(r.workspace_bytes)}")
    return uncounted, over


def _planner_notes(reports: Sequence[FunctionReport], max_arena: int) -> list[str]:
    """For each function over the budget, what its planner proved: that nothing fits (its
    arena cannot be smaller), or only a bound below the budget, so that a longer search
    (the planner was asked for the budget: PlanMemory.capacity) may still find a plan."""
    notes = []
    for r in reports:
        if not r.explicit or r.workspace_bytes <= max_arena or not r.arena_bytes:
            continue
        if r.unplanned_static_bytes:
            continue  # storages outside the arena: a planner that placed them might fit
        bound = max(r.proven_bound, r.lower_bound)
        if bound > max_arena:
            notes.append(f"@{r.name} cannot fit: no arena below {format_bytes(bound)} exists")
        else:
            notes.append(
                f"@{r.name}: only an arena below {format_bytes(bound)} is proven impossible, so "
                "one within the budget may exist: the best planner (with a longer "
                "PlanMemory.time_limit) may find it"
            )
    return notes


def unbounded_warnings(reports: Sequence[FunctionReport]) -> list[str]:
    """What ``--allow-unbounded`` leaves out of the budget, one line per function."""
    return [
        f"{_unbounded(r)}; --allow-unbounded leaves them out of the budget"
        for r in reports
        if r.explicit and r.dynamic
    ]


def check_budget_options(max_arena: int | None, allow_unbounded: bool) -> None:
    """Refuse ``--allow-unbounded`` without a budget to loosen (before any work is done)."""
    if allow_unbounded and max_arena is None:
        raise click.UsageError("--allow-unbounded only changes what --max-arena checks")


def warn_unbounded(
    reports: Sequence[FunctionReport], max_arena: int | None, allow_unbounded: bool
) -> None:
    """Print (on stderr) what ``--allow-unbounded`` leaves out of the budget."""
    if allow_unbounded and max_arena is not None:
        for line in unbounded_warnings(reports):
            click.echo(f"warning: {line}", err=True)


def check_budget(
    reports: Sequence[FunctionReport],
    max_arena: int | None,
    allow_unbounded: bool = False,
    bound_hint: str | None = None,
) -> None:
    """RxError naming every function that does not fit ``max_arena`` bytes or cannot be
    counted (nothing to check when ``max_arena`` is None). ``bound_hint`` says how to bound
    the program's own dims (``--bound N=...``: cli/unbounded.py)."""
    if max_arena is None:
        return
    uncounted, over = budget_problems(reports, max_arena, allow_unbounded)
    if not uncounted and not over:
        return
    budget = f"the budget (--max-arena) is {_budget_text(max_arena)}"
    if not uncounted:
        raise RxError(
            f"memory budget exceeded: {'; '.join(over)}; {budget}",
            notes=tuple(_planner_notes(reports, max_arena)),
        )
    notes: list[str] = []
    if any(r.explicit and r.dynamic for r in reports) and not allow_unbounded:
        how = bound_hint or "attrs {upper_bounds = {n = 64}}, or relaxc import --bound n=64"
        notes.append(
            f"give the symbolic dims upper bounds ({how}) so that the budget counts them, or "
            "pass --allow-unbounded to check the bounded memory only"
        )
    if any(not r.explicit for r in reports):
        notes.append("run a pipeline with PlanMemory, not -p none on a source that is not planned")
    raise RxError(
        f"memory budget cannot be checked: {'; '.join(uncounted + over)}; {budget}",
        notes=tuple(notes),
    )

"""Drawing memory reports: a one-line summary, full rich tables, and a terminal memory map."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from relaxc.ir.types import shape_to_str
from relaxc.passes.memory_report import FunctionReport, Size

from .units import format_bytes

MARKS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


IMPLICIT = (
    "NO: no pass made this function's memory explicit (ManifestAlloc, PlanMemory), so the "
    "figures below count none of it (run the target's pipeline: -p none reports only IR "
    "that is already planned)"
)
UNPLANNED = (
    "no: no PlanMemory ran on this function, so nothing is in an arena; every allocation "
    "is counted in full, as if all were live at once (unplanned)"
)


def _b(v: Size) -> str:
    return format_bytes(v.bound) if v.bound is not None else f"{v.expr} bytes"


def summary_line(rep: FunctionReport) -> str:
    """One line: arena, how close to the lower bound, saving, and dynamic allocations."""
    if not rep.explicit:
        text = f"@{rep.name}: not planned (no PlanMemory ran on it): its memory is not counted"
    elif not rep.buffers and not rep.arenas:
        state = "no planned memory" if rep.planned else "not planned (no PlanMemory ran on it)"
        text = f"@{rep.name}: {state}"
        if rep.unplanned_static_bytes:
            text += f", {format_bytes(rep.unplanned_static_bytes)} in unplanned allocations"
    else:
        ratio = (
            f"{rep.ratio:.2f}x the lower bound {format_bytes(rep.lower_bound)}"
            if rep.ratio
            else "no lower bound"
        )
        saving = (
            f", {rep.saving:.0%} less than without reuse ({format_bytes(rep.naive_bytes)})"
            if rep.saving is not None
            else ""
        )
        io = ", inputs and outputs included" if rep.io_in_arena else ""
        text = f"@{rep.name}: arena {format_bytes(rep.arena_bytes)}{io}, {ratio}{saving}"
    if rep.dynamic:
        text += f"; {len(rep.dynamic)} dynamic allocation(s)"
    return text


def memory_map(rep: FunctionReport, width: int = 64, height: int = 16) -> Text:
    """Offsets (rows, high at the top) against program points (columns), one mark per buffer."""
    text = Text()
    if not rep.buffers or rep.arena_bytes <= 0:
        text.append("(nothing placed)\n")
        return text
    points = max(rep.program_points, 1)
    cols = min(width, points)
    grid = [[" "] * cols for _ in range(height)]
    for k, b in enumerate(rep.buffers):
        if b.bytes <= 0:
            continue
        mark = MARKS[k % len(MARKS)]
        c0 = b.first * cols // points
        c1 = max(c0, b.last * cols // points)
        r0 = b.offset * height // rep.arena_bytes
        r1 = max(r0, (b.offset + b.bytes - 1) * height // rep.arena_bytes)
        for r in range(r0, min(r1, height - 1) + 1):
            for c in range(c0, min(c1, cols - 1) + 1):
                grid[r][c] = mark if grid[r][c] in (" ", mark) else "#"
    label_w = len(format_bytes(rep.arena_bytes).split(" (")[0])
    for r in reversed(range(height)):
        # Row r covers offsets [r * A / H, (r + 1) * A / H): label the top edge of the arena,
        # the lower edge of the middle row, and 0 at the bottom.
        if r == height - 1:
            label = format_bytes(rep.arena_bytes).split(" (")[0]
        elif r == height // 2 or r == 0:
            label = format_bytes(r * rep.arena_bytes // height).split(" (")[0]
        else:
            label = ""
        text.append(f"{label:>{label_w}} |", style="dim")
        text.append("".join(grid[r]) + "\n")
    text.append(" " * label_w + " +" + "-" * cols + "\n", style="dim")
    text.append(" " * label_w + f"  program point 0 .. {points - 1}\n", style="dim")
    return text


def _in_arena(rep: FunctionReport, held: int, total: Size) -> str:
    """How much of the inputs (or outputs) the arena holds, with inputs and outputs in it."""
    if not rep.io_in_arena:
        return ""
    if held == 0:
        return "  (the caller's memory)"
    if total.bound is not None and held >= total.bound:
        return "  (in the arena)"
    return f"  ({format_bytes(held)} of it in the arena)"


def full_report(rep: FunctionReport) -> Group:
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    if not rep.planned:
        facts.add_row("planned", UNPLANNED if rep.explicit else IMPLICIT)
    facts.add_row(
        "arena",
        ("none (not planned)" if not rep.planned else format_bytes(rep.arena_bytes))
        + (
            "  ("
            + ", ".join(f"{a['name']}: {a['scope']}, align {a['align']}" for a in rep.arenas)
            + ("; inputs and outputs included" if rep.io_in_arena else "")
            + ")"
            if rep.arenas
            else ""
        ),
    )
    facts.add_row(
        "lower bound", format_bytes(rep.lower_bound) + "  (most bytes live at any program point)"
    )
    facts.add_row("ratio", f"{rep.ratio:.3f}" if rep.ratio else "-")
    if rep.optimal:
        facts.add_row("optimal", "yes: the planner proved that no smaller arena exists")
    elif rep.proven_bound:
        facts.add_row(
            "proven bound",
            format_bytes(rep.proven_bound)
            + "  (no arena below this exists; the plan may not be optimal)",
        )
    if rep.clock_stopped:
        facts.add_row(
            "warning",
            "the planner's safety clock ended its search far past its work budget: this plan "
            "may differ from run to run (raise PlanMemory.time_limit, or use greedy-size)",
        )
    if rep.order_peak_written is not None and rep.order_peak_chosen is not None:
        facts.add_row(
            "order peak",
            f"{format_bytes(rep.order_peak_chosen)} as reordered, "
            f"{format_bytes(rep.order_peak_written)} as written  (ReorderForMemory's model)",
        )
    if rep.written_into_views:
        facts.add_row(
            "shared",
            f"{rep.written_into_views:,} values written into another's bytes (in place over "
            "a dying input, or into a concat's slice): no buffer of their own",
        )
    facts.add_row("naive total", format_bytes(rep.naive_bytes) + "  (every buffer its own memory)")
    facts.add_row("saving", f"{rep.saving:.1%}" if rep.saving is not None else "-")
    facts.add_row(
        "inputs", _b(rep.input_bytes) + _in_arena(rep, rep.inputs_in_arena_bytes, rep.input_bytes)
    )
    facts.add_row(
        "outputs",
        _b(rep.output_bytes) + _in_arena(rep, rep.outputs_in_arena_bytes, rep.output_bytes),
    )
    facts.add_row("constants", format_bytes(rep.constant_bytes))
    if rep.unplanned_static_bytes:
        facts.add_row(
            "unplanned", format_bytes(rep.unplanned_static_bytes) + "  (bounded, not in the arena)"
        )
    parts: list = [facts]
    if rep.dynamic:
        dyn = Table(title="dynamic allocations (sized at run time)", show_edge=False)
        for col in ("storage", "bytes", "scope", "first", "last"):
            dyn.add_column(col)
        for d in rep.dynamic:
            dyn.add_row(d.name, d.size.expr, d.scope, str(d.first), str(d.last))
        parts.append(dyn)
    if rep.buffers:
        bufs = Table(title="placed buffers", show_edge=False)
        for col in ("", "tensor", "shape", "dtype", "bytes", "offset", "first", "last"):
            bufs.add_column(
                col, justify="right" if col in ("bytes", "offset", "first", "last") else "left"
            )
        for k, b in enumerate(rep.buffers):
            bufs.add_row(
                MARKS[k % len(MARKS)],
                b.name,
                shape_to_str(b.shape),
                b.dtype,
                f"{b.bytes:,}",
                f"{b.offset:,}",
                str(b.first),
                str(b.last),
            )
        parts.append(bufs)
        parts.append(Text("memory map (offset against program point)", style="bold"))
        parts.append(memory_map(rep))
    return Group(Panel(Group(*parts), title=f"@{rep.name}", title_align="left"))


def print_reports(reports: list[FunctionReport], console: Console) -> None:
    for rep in reports:
        console.print(full_report(rep))

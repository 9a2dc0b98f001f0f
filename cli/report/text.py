"""Drawing memory reports: a one-line summary, full rich tables, and a terminal memory map."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from relaxc.ir.types import shape_to_str

from ..units import format_bytes, short_bytes
from .analysis import FunctionReport, Size
from .origins import Origins
from .picture.layout import Layout, layout
from .picture.terminal import memory_map
from .picture.totals import ram_text

__all__ = ["full_report", "memory_map", "print_reports", "summary_line"]

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
            f", {rep.saving:.0%} less than one buffer per tensor "
            f"({short_bytes(rep.baseline_bytes or 0)})"
            if rep.saving is not None
            else ""
        )
        io = ", inputs and outputs included" if rep.io_in_arena else ""
        text = f"@{rep.name}: arena {format_bytes(rep.arena_bytes)}{io}, {ratio}{saving}"
    if rep.dynamic:
        text += f"; {len(rep.dynamic)} dynamic allocation(s)"
    return text


def saving_text(rep: FunctionReport) -> str:
    """The saving against the baseline, and what was compared with it."""
    if rep.saving is None or rep.values_bytes is None:
        return "-"
    return f"{rep.saving:.1%}  (the plan holds the values in {short_bytes(rep.values_bytes)})"


def _in_arena(rep: FunctionReport, held: int, total: Size) -> str:
    """How much of the inputs (or outputs) the arena holds, with inputs and outputs in it."""
    if not rep.io_in_arena:
        return ""
    if held == 0:
        return "  (the caller's memory)"
    if total.bound is not None and held >= total.bound:
        return "  (in the arena)"
    return f"  ({format_bytes(held)} of it in the arena)"


def full_report(rep: FunctionReport, width: int = 80, origins: Origins | None = None) -> Group:
    """Everything about ``rep`` in a panel ``width`` columns wide."""
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
    if rep.kernel_scratch_calls:
        facts.add_row(
            "scratch",
            f"{rep.kernel_scratch_calls:,} kernel calls get working memory of their own "
            f"(at most {format_bytes(rep.kernel_scratch_max_bytes)}; in the buffers below)",
        )
    facts.add_row(
        "baseline",
        (format_bytes(rep.baseline_bytes) if rep.baseline_bytes is not None else "unbounded")
        + "  (one buffer per tensor: every value computed, no reuse, no in-place)",
    )
    facts.add_row("saving", saving_text(rep))
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
    if rep.calls:
        facts.add_row(
            "callees",
            (format_bytes(rep.callee_bytes) if rep.callees_bounded else "unbounded")
            + f"  (the most {rep.calls:,} call(s) of other functions hold at once)",
        )
    facts.add_row("RAM", ram_text(rep))
    facts.add_row("ROM", format_bytes(rep.rom_bytes) + "  (constants; the C build adds its code)")
    parts: list = [facts]
    if rep.dynamic:
        dyn = Table(title="dynamic allocations (sized at run time)", show_edge=False)
        for col in ("storage", "bytes", "scope", "first", "last"):
            dyn.add_column(col)
        for d in rep.dynamic:
            dyn.add_row(d.name, d.size.expr, d.scope, str(d.first), str(d.last))
        parts.append(dyn)
    if rep.buffers:
        lay = layout(rep)
        bufs = Table(title="placed buffers", show_edge=False)
        for col in ("", "tensor", "shape", "dtype", "bytes", "offset", "first", "last"):
            bufs.add_column(
                col, justify="right" if col in ("bytes", "offset", "first", "last") else "left"
            )
        for r in lay.rects:
            b = r.row
            bufs.add_row(
                Text(r.mark, style=f"bold {r.colour}"),
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
        parts.append(memory_map(rep, max(width - 4, 40), origins))
        parts.append(op_legend(lay))
    return Group(Panel(Group(*parts), title=f"@{rep.name}", title_align="left"))


def op_legend(lay: Layout) -> Text:
    """What the colours of the marks mean: the op that wrote each buffer."""
    text = Text("colour = the op that wrote the buffer: ", style="dim")
    for k, kind in enumerate(lay.ops):
        text.append(", " if k else "")
        text.append("■ ", style=kind.colour)
        text.append(kind.op)
    return text


def print_reports(
    reports: list[FunctionReport], console: Console, origins: Origins | None = None
) -> None:
    """Each report as a panel as wide as the console."""
    for rep in reports:
        console.print(full_report(rep, console.width, origins))

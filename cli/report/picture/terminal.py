"""The memory map in a terminal, laid out as TFLite Micro's ``PrintMemoryPlan`` is: one row
per stretch of program points (a segment of :mod:`.layout`, over which the same buffers are
live), the arena's offsets across the terminal's width, and at the end of each row the live
bytes and the buffers that start there. Depth adds rows, never squeezes them, so it reads
the same on a ten-layer sample and on densenet121.

A cell stands for a range of offsets in one row. It shows the buffer that holds the offset
at its middle, or else the largest live buffer that touches its range, so a buffer smaller
than a cell still shows. Two buffers that live at the same time bear different glyphs. ``#``
marks a cell whose middle two live buffers both hold: an overlap in memory and time, which a
correct plan never has; so a glyph cell is never given to two tensors that do not overlap.
"""

from __future__ import annotations

import textwrap

from rich.text import Text

from ...units import short_bytes
from ..analysis import FunctionReport
from ..origins import Origins
from .layout import Layout, Rect, layout

OVERLAP = "#"


def live_rects(lay: Layout) -> list[list[Rect]]:
    """The rects live in each segment (a sweep: each rect is visited once per segment it
    covers, never once per segment of the program)."""
    starts: dict[int, list[Rect]] = {}
    for r in lay.rects:
        if r.row.bytes > 0:
            starts.setdefault(r.seg0, []).append(r)
    out: list[list[Rect]] = []
    live: list[Rect] = []
    for seg in range(lay.segments):
        live = [r for r in live if r.seg1 > seg] + starts.get(seg, [])
        out.append(live)
    return out


def cell_rects(
    lay: Layout, seg: int, cols: int, live: list[Rect] | None = None
) -> list[int | None]:
    """For row ``seg``: per column, the index of the rect drawn there, -1 for an overlap, or
    None. Column ``c`` covers offsets ``[c * H / cols, (c + 1) * H / cols)``. ``live`` is
    the rects live in the segment, if the caller has them."""
    height = lay.height
    if live is None:
        live = [r for r in lay.rects if r.seg0 <= seg < r.seg1 and r.row.bytes > 0]
    holders: list[list[Rect]] = [[] for _ in range(cols)]
    touching: list[Rect | None] = [None] * cols
    for r in live:
        end = r.y + r.row.bytes
        # the columns the rect may reach, one more each side against rounding; the exact
        # tests below decide
        c0 = max(int(r.y * cols // height) - 1, 0)
        c1 = min(int(end * cols // height) + 2, cols)
        for c in range(c0, c1):
            lo, hi = c * height / cols, (c + 1) * height / cols
            if not (r.y < hi and end > lo):
                continue
            if r.y <= (lo + hi) / 2 < end:
                holders[c].append(r)
            best = touching[c]
            if best is None or (r.row.bytes, -r.index) > (best.row.bytes, -best.index):
                touching[c] = r
    out: list[int | None] = []
    for c in range(cols):
        if len(holders[c]) > 1:
            out.append(-1)
        elif holders[c]:
            out.append(holders[c][0].index)
        else:
            t = touching[c]
            out.append(t.index if t is not None else None)
    return out


def memory_map(rep: FunctionReport, width: int = 80, origins: Origins | None = None) -> Text:
    """The map of ``rep`` in ``width`` terminal columns; the peak names its source line
    (and ONNX node) when ``origins`` knows it."""
    text = Text()
    if not rep.buffers or rep.arena_bytes <= 0:
        text.append("(nothing placed)\n")
        return text
    lay = layout(rep)
    left = len(str(lay.points - 1))
    live_w = max(len(short_bytes(n)) for n in lay.live)
    # row: POINT ' |' cells '| ' LIVE ' ' names; the names get a quarter of the width
    fixed = left + 4 + live_w
    cols = max(8, min(width - fixed - max((width - fixed) // 4, 0), 160))
    names_w = max(width - fixed - cols, 0)
    per_col = lay.height / cols
    note = (
        "a row per stretch of program points with the same buffers live, a column per "
        f"{short_bytes(max(int(per_col), 1))} of offsets; then the bytes live and the "
        "buffers that start"
    )
    for line in textwrap.wrap(note, max(width, 20)):
        text.append(line + "\n", style="dim")
    axis = [" "] * cols
    for frac in (0.0, 0.5, 1.0):
        label = short_bytes(int(lay.height * frac))
        at = min(int(frac * cols), cols - len(label)) if frac > 0 else 0
        at = max(at - (len(label) // 2 if 0 < frac < 1 else 0), 0)
        for k, ch in enumerate(label):
            if at + k < cols:
                axis[at + k] = ch
    text.append(" " * (left + 2) + "".join(axis) + "\n", style="dim")
    starts: dict[int, list[Rect]] = {}
    for r in lay.rects:
        starts.setdefault(r.seg0, []).append(r)
    for seg, live in enumerate(live_rects(lay)):
        text.append(f"{lay.cuts[seg]:>{left}} |", style="dim")
        for idx in cell_rects(lay, seg, cols, live):
            if idx is None:
                text.append(" ")
            elif idx < 0:
                text.append(OVERLAP, style="bold red")
            else:
                r = lay.rects[idx]
                text.append(r.mark, style=f"bold {r.colour}")
        text.append("| ", style="dim")
        text.append(f"{short_bytes(lay.live[seg]):>{live_w}}", style="dim")
        names = " ".join(f"{r.mark}=%{r.row.name}" for r in starts.get(seg, []))
        if names and names_w > 2:
            clipped = names if len(names) <= names_w - 1 else names[: names_w - 2] + "…"
            text.append(" " + clipped)
        text.append("\n")
    point = lay.cuts[lay.peak]
    line = rep.point_lines[point] if point < len(rep.point_lines) else 0
    where = (origins or Origins()).describe(line)
    foot = (
        f"peak {short_bytes(lay.live[lay.peak])} live at program point {point}"
        + (f" ({where})" if where else "")
        + f"; lower bound {short_bytes(lay.lower_bound)}, arena {short_bytes(lay.arena_bytes)}"
    )
    for line in textwrap.wrap(foot, max(width, 20)):
        text.append(line + "\n", style="dim")
    return text

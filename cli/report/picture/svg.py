"""The memory map as an SVG picture that reads without hovering.

One panel per function: the map (x = program point on the compressed axis of
:mod:`.layout`, y = offset), the live-bytes curve under it with the lower bound and the arena
marked, the peak drawn across both and its tensors listed, and a legend on the right (the
colour of each op kind, the largest buffers by number, what is live at the peak). Names are
written on every rectangle large enough to carry one; the tooltips add shape, bytes, offset,
lifetime and source line. Every element is written in a fixed order with fixed precision,
so the same report gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from relaxc.ir.types import shape_to_str

from ...units import short_bytes
from ..analysis import FunctionReport
from ..origins import Origins
from .colours import ink
from .layout import Layout, Rect, byte_ticks, layout, segment_ticks
from .totals import footprint_line

CHAR_W = 6.6  # width of a character at font-size 10 (DejaVu Sans digits), a safe overestimate
LEGEND_CHAR_W = 5.7  # ... of the legend's mixed text, on average
WIDTH = 1400
LEGEND_W = 330


PX_PER_SEGMENT = 4.0
"""The map widens past WIDTH for programs with many segments, up to MAX_WIDTH."""
MAX_WIDTH = 2400


@dataclass(frozen=True)
class Frame:
    """Where the panels of one function go, in pixels."""

    left: float = 84.0
    top: float = 54.0  # under the title and the totals
    map_h: float = 440.0
    gap: float = 34.0
    live_h: float = 130.0
    width: float = WIDTH - LEGEND_W - 84.0 - 20.0

    @property
    def total_width(self) -> float:
        return self.left + self.width + 20.0 + LEGEND_W

    @property
    def live_top(self) -> float:
        return self.top + self.map_h + self.gap

    @property
    def bottom(self) -> float:
        return self.live_top + self.live_h

    @property
    def height(self) -> float:
        return self.bottom + 52.0


def frame_for(lay: Layout) -> Frame:
    """The frame of ``lay``: the map is at least WIDTH's share wide, wider for many segments
    (PX_PER_SEGMENT each) up to MAX_WIDTH, so a rectangle stays wide enough to see."""
    base = Frame()
    wide = min(lay.segments * PX_PER_SEGMENT, MAX_WIDTH - LEGEND_W - base.left - 20.0)
    return Frame(width=max(base.width, wide))


def _f(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".")


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(chars - 1, 1)] + "…"


class _Scale:
    def __init__(self, lay: Layout, fr: Frame):
        self.lay, self.fr = lay, fr
        self.seg_w = fr.width / max(lay.segments, 1)

    def x(self, seg: float) -> float:
        return self.fr.left + seg * self.seg_w

    def y(self, offset: int) -> float:
        return self.fr.top + self.fr.map_h - offset * self.fr.map_h / self.lay.height

    def live_y(self, n: int) -> float:
        top = max(self.lay.height, max(self.lay.live, default=0), 1)
        return self.fr.live_top + self.fr.live_h - n * self.fr.live_h / top


def tooltip(r: Rect, origins: Origins) -> str:
    b = r.row
    where = origins.describe(b.line)
    return (
        f"%{b.name} {shape_to_str(b.shape)} {b.dtype}: {b.bytes:,} B at offset {b.offset:,} "
        f"({b.arena}), "
        f"live at program points {b.first}..{b.last}, written by {b.op or 'no op'}"
        + (f" at {where}" if where else "")
    )


def _rect(r: Rect, sc: _Scale, origins: Origins, peak: bool) -> list[str]:
    b = r.row
    x0, x1 = sc.x(r.seg0), sc.x(r.seg1)
    y1 = sc.y(r.y)
    y0 = sc.y(r.y + b.bytes)
    w, h = x1 - x0, max(y1 - y0, 0.6)
    stroke = ' stroke="#111" stroke-width="1.2"' if peak else ' stroke="#fff" stroke-width="0.6"'
    out = [
        f'<rect class="buf" data-i="{r.index}" data-op="{escape(b.op)}" x="{_f(x0)}" '
        f'y="{_f(y0)}" width="{_f(w)}" height="{_f(h)}" fill="{r.colour}"{stroke}>'
        f"<title>{escape(tooltip(r, origins))}</title></rect>"
    ]
    label = r.label
    cx, cy = x0 + w / 2, y0 + h / 2
    style = f' style="fill:{ink(r.colour)}"'
    if w >= len(label) * CHAR_W + 4 and h >= 12:
        size = short_bytes(b.bytes)
        two = h >= 25 and w >= len(size) * CHAR_W + 4
        dy = -5 if two else 0
        out.append(
            f'<text class="label" x="{_f(cx)}" y="{_f(cy + 3.5 + dy)}" text-anchor="middle"{style}>'
            f"{escape(label)}</text>"
        )
        if two:
            out.append(
                f'<text class="label" x="{_f(cx)}" y="{_f(cy + 3.5 + 6)}" '
                f'text-anchor="middle" fill-opacity="0.8"{style}>{escape(size)}</text>'
            )
    elif w >= 11 and h >= len(label) * CHAR_W + 4:  # tall and narrow: write it upwards
        out.append(
            f'<text class="label" transform="translate({_f(cx + 3.5)},{_f(cy)}) rotate(-90)" '
            f'text-anchor="middle"{style}>{escape(label)}</text>'
        )
    elif r.rank and w >= len(str(r.rank)) * CHAR_W + 3 and h >= 11:
        out.append(
            f'<text class="label" x="{_f(cx)}" y="{_f(cy + 3.5)}" text-anchor="middle"{style}>'
            f"{r.rank}</text>"
        )
    return out


def _axes(lay: Layout, sc: _Scale) -> list[str]:
    fr = sc.fr
    out = []
    for t in byte_ticks(lay.height):
        y = sc.y(t)
        out.append(
            f'<line class="grid" x1="{_f(fr.left)}" y1="{_f(y)}" x2="{_f(fr.left + fr.width)}" '
            f'y2="{_f(y)}"/>'
            f'<text class="tick" x="{_f(fr.left - 5)}" y="{_f(y + 3.5)}" text-anchor="end">'
            f"{short_bytes(t)}</text>"
        )
    mid = fr.top + fr.map_h / 2
    out.append(
        f'<text class="axis" transform="translate({_f(fr.left - 62)},{_f(mid)}) rotate(-90)" '
        'text-anchor="middle">offset in the arena (bytes)</text>'
    )
    for k in segment_ticks(lay.segments):
        x = sc.x(k)
        point = lay.cuts[k]
        out.append(
            f'<line class="tickmark" x1="{_f(x)}" y1="{_f(fr.bottom)}" x2="{_f(x)}" '
            f'y2="{_f(fr.bottom + 4)}"/>'
            f'<line class="tickmark" x1="{_f(x)}" y1="{_f(fr.top + fr.map_h)}" x2="{_f(x)}" '
            f'y2="{_f(fr.top + fr.map_h + 4)}"/>'
            f'<text class="tick" x="{_f(x)}" y="{_f(fr.bottom + 15)}" text-anchor="middle">'
            f"{point}</text>"
        )
    out.append(
        f'<text class="axis" x="{_f(fr.left + fr.width / 2)}" y="{_f(fr.bottom + 32)}" '
        f'text-anchor="middle">program point (0 .. {lay.points - 1}; the axis keeps only the '
        f"{lay.segments} stretches between points where a buffer starts or ends, each "
        "equally wide)</text>"
    )
    return out


def _live_panel(lay: Layout, sc: _Scale, origins: Origins, lines: list[int]) -> list[str]:
    fr = sc.fr
    out = [
        f'<rect class="panel" x="{_f(fr.left)}" y="{_f(fr.live_top)}" width="{_f(fr.width)}" '
        f'height="{_f(fr.live_h)}"/>',
        f'<text class="axis" transform="translate({_f(fr.left - 62)},'
        f'{_f(fr.live_top + fr.live_h / 2)}) rotate(-90)" text-anchor="middle">live bytes</text>',
    ]
    pts = [f"{_f(sc.x(0))},{_f(sc.live_y(0))}"]
    for k, n in enumerate(lay.live):
        y = _f(sc.live_y(n))
        pts.append(f"{_f(sc.x(k))},{y}")
        pts.append(f"{_f(sc.x(k + 1))},{y}")
    pts.append(f"{_f(sc.x(lay.segments))},{_f(sc.live_y(0))}")
    out.append(f'<polygon class="live" points="{" ".join(pts)}"/>')
    for k, n in enumerate(lay.live):  # a hover target per stretch: its points and source
        a, b = lay.segment_points(k)
        src = sorted({lines[p] for p in range(a, b + 1) if 0 <= p < len(lines) and lines[p]})
        where = ""
        if src:
            first = origins.describe(src[0])
            where = f"; source {first}" + (f" .. line {src[-1]}" if len(src) > 1 else "")
        out.append(
            f'<rect class="seg" data-seg="{k}" x="{_f(sc.x(k))}" y="{_f(fr.live_top)}" '
            f'width="{_f(sc.seg_w)}" height="{_f(fr.live_h)}" fill="transparent">'
            f"<title>program points {a}..{b}: {n:,} B live{escape(where)}</title></rect>"
        )
    top = max(lay.height, max(lay.live, default=0), 1)
    marks = [("arena", lay.arena_bytes, "arena"), ("lower bound", lay.lower_bound, "bound")]
    same = lay.arena_bytes == lay.lower_bound
    for what, n, cls in marks:
        if n <= 0 or n > top:
            continue
        y = sc.live_y(n)
        text = f"arena = lower bound = {short_bytes(n)}" if same else f"{what} {short_bytes(n)}"
        out.append(
            f'<line class="{cls}" x1="{_f(fr.left)}" y1="{_f(y)}" x2="{_f(fr.left + fr.width)}" '
            f'y2="{_f(y)}"/>'
        )
        if not (same and cls == "bound"):
            dy = -3 if cls == "arena" or same else 11
            out.append(
                f'<text class="note" x="{_f(fr.left + fr.width - 4)}" y="{_f(y + dy)}" '
                f'text-anchor="end">{escape(text)}</text>'
            )
    out.append(
        f'<text class="tick" x="{_f(fr.left - 5)}" y="{_f(sc.live_y(0) + 3.5)}" '
        'text-anchor="end">0</text>'
        f'<text class="tick" x="{_f(fr.left - 5)}" y="{_f(sc.live_y(top) + 3.5)}" '
        f'text-anchor="end">{short_bytes(top)}</text>'
    )
    return out


def _peak(lay: Layout, sc: _Scale, origins: Origins, lines: list[int]) -> list[str]:
    if lay.peak < 0:
        return []
    fr = sc.fr
    x = sc.x(lay.peak + 0.5)
    a, b = lay.segment_points(lay.peak)
    where = origins.describe(lines[a]) if a < len(lines) else ""
    text = f"peak: {short_bytes(lay.live[lay.peak])} live at program point {a}" + (
        f" ({where})" if where else ""
    )
    anchor = "start" if lay.peak < lay.segments / 2 else "end"
    tx = x + 4 if anchor == "start" else x - 4
    return [
        f'<line class="peak" x1="{_f(x)}" y1="{_f(fr.top - 6)}" x2="{_f(x)}" '
        f'y2="{_f(fr.bottom)}"/>',
        f'<text class="peaknote" x="{_f(tx)}" y="{_f(fr.top - 8)}" text-anchor="{anchor}">'
        f"{escape(_clip(text, 110))}</text>",
    ]


def _legend(
    lay: Layout, origins: Origins, x: float, right: float, top: float, bottom: float
) -> list[str]:
    out: list[str] = []
    y = top
    chars = int((right - x) / LEGEND_CHAR_W)

    def line(text: str, cls: str = "legend", dx: float = 0.0) -> None:
        nonlocal y
        if y < bottom:
            out.append(
                f'<text class="{cls}" x="{_f(x + dx)}" y="{_f(y)}">'
                f"{escape(_clip(text, chars - int(dx / LEGEND_CHAR_W)))}</text>"
            )
        y += 13

    line("colour: the op that wrote the buffer", "head")
    for k in lay.ops:
        if y >= bottom:
            break
        out.append(
            f'<rect class="swatch" data-op="{escape(k.op)}" x="{_f(x)}" y="{_f(y - 9)}" '
            f'width="10" height="10" fill="{k.colour}"/>'
        )
        line(
            f"{k.op}: {k.count} buffer{'s' if k.count != 1 else ''}, {short_bytes(k.bytes)}", dx=15
        )
    y += 6
    line(f"the {len(lay.named)} largest buffers", "head")
    for i in lay.named:
        r = lay.rects[i]
        b = r.row
        out.append(
            f'<rect class="swatch" data-i="{r.index}" x="{_f(x)}" y="{_f(y - 9)}" width="10" '
            f'height="10" fill="{r.colour}"/>'
        )
        line(
            f"{r.rank} %{b.name} {shape_to_str(b.shape)} {short_bytes(b.bytes)}, "
            f"points {b.first}..{b.last}",
            dx=15,
        )
        where = origins.describe(b.line)
        if where:
            line(where, "sub", dx=15)
    if lay.peak >= 0:
        y += 6
        line(f"live at the peak ({len(lay.at_peak)} buffers)", "head")
        for i in lay.at_peak[:8]:
            b = lay.rects[i].row
            line(f"%{b.name} {short_bytes(b.bytes)} at offset {b.offset:,}", dx=15)
        if len(lay.at_peak) > 8:
            line(f"... and {len(lay.at_peak) - 8} more", dx=15)
    return out


STYLE = (
    "text{font-family:DejaVu Sans,Helvetica,Arial,sans-serif}"
    ".title{font-size:14px;font-weight:bold}.totals{font-size:12px}.label{font-size:10px;fill:#fff;"
    "pointer-events:none}.tick{font-size:10px;fill:#333}.axis{font-size:11px;fill:#222}"
    ".legend{font-size:10px;fill:#222}.sub{font-size:9px;fill:#666}"
    ".head{font-size:11px;font-weight:bold;fill:#222}.note{font-size:10px;fill:#7a1f1f}"
    ".peaknote{font-size:11px;fill:#7a1f1f;font-weight:bold}"
    ".panel{fill:#f4f4f4;stroke:#999}.grid{stroke:#ddd;stroke-width:0.5}"
    ".tickmark{stroke:#666}.live{fill:#9fb7d4;stroke:#2f5c8a;stroke-width:1}"
    ".arena{stroke:#7a1f1f;stroke-width:1.2}.bound{stroke:#7a1f1f;stroke-width:1;"
    "stroke-dasharray:5 3}.peak{stroke:#7a1f1f;stroke-width:1;stroke-dasharray:3 2}"
)


def function_svg(
    rep: FunctionReport, origins: Origins | None = None, top_n: int | None = None
) -> str:
    """One function's picture as a standalone ``<svg>`` element."""
    origins = origins or Origins()
    lay = layout(rep) if top_n is None else layout(rep, top_n)
    fr = frame_for(lay)
    total = _f(fr.total_width)
    sc = _Scale(lay, fr)
    lines = rep.point_lines
    ratio = f", ratio {rep.ratio:.3f}" if rep.ratio else ""
    title = (
        f"@{rep.name}: arena {short_bytes(rep.arena_bytes)}, lower bound "
        f"{short_bytes(rep.lower_bound)}{ratio}; {len(rep.buffers)} placed buffers over "
        f"{rep.program_points} program points"
        + (f"; {len(rep.dynamic)} dynamic allocations" if rep.dynamic else "")
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="map" width="{total}" '
        f'height="{_f(fr.height)}" viewBox="0 0 {total} {_f(fr.height)}">',
        f"<style>{STYLE}</style>",
        f'<rect x="0" y="0" width="{total}" height="{_f(fr.height)}" fill="#fff"/>',
        f'<text class="title" x="{_f(fr.left)}" y="18">{escape(title)}</text>',
        f'<text class="totals" x="{_f(fr.left)}" y="34">{escape(footprint_line(rep))}</text>',
        f'<rect class="panel" x="{_f(fr.left)}" y="{_f(fr.top)}" width="{_f(fr.width)}" '
        f'height="{_f(fr.map_h)}"/>',
    ]
    out += _axes(lay, sc)
    peak = set(lay.at_peak)
    out.append('<g class="rects">')
    for r in lay.rects:
        out += _rect(r, sc, origins, r.index in peak)
    out.append("</g>")
    out += _live_panel(lay, sc, origins, lines)
    out += _peak(lay, sc, origins, lines)
    x = fr.left + fr.width + 30
    out += _legend(lay, origins, x, x + LEGEND_W - 20, fr.top + 4, fr.height - 6)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def empty_svg(text: str) -> str:
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="40"><text x="10" '
        f'y="25">{escape(text)}</text></svg>\n'
    )


def report_svg(reports: list[FunctionReport], origins: Origins | None = None) -> str:
    """Every function with placed buffers, one under the other, in one SVG document."""
    bodies = [function_svg(r, origins) for r in reports if r.buffers]
    if not bodies:
        return empty_svg("no planned memory")
    if len(bodies) == 1:
        return bodies[0]
    frames = [frame_for(layout(r)) for r in reports if r.buffers]
    width = _f(max(f.total_width for f in frames))
    inner, y = [], 0.0
    for fr, body in zip(frames, bodies):
        inner.append(f'<g transform="translate(0,{_f(y)})">{body}</g>')
        y += fr.height
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{_f(y)}" '
        f'viewBox="0 0 {width} {_f(y)}">{"".join(inner)}</svg>\n'
    )

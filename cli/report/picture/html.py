"""The report as one self-contained HTML page: the figures, the picture of :mod:`.svg`
(zoomable), the placed buffers with a swatch that links each row to its rectangle, and the
dynamic allocations (sized at run time, so on no map) with their lifetimes drawn on the
program's time line. Script and style are inline (:mod:`.page_script`); nothing is fetched.
"""

from __future__ import annotations

from html import escape

from relaxc.ir.types import shape_to_str

from ...units import format_bytes
from ..analysis import FunctionReport
from ..origins import Origins
from .colours import op_colour
from .layout import layout
from .page_script import CSS, JS
from .svg import function_svg
from .totals import ram_text


def _facts(r: FunctionReport) -> str:
    ratio = f"{r.ratio:.3f}" if r.ratio else "-"
    saving = f"{r.saving:.1%}" if r.saving is not None else "-"
    baseline = format_bytes(r.baseline_bytes) if r.baseline_bytes is not None else "unbounded"
    rows = [
        ("arena", format_bytes(r.arena_bytes)),
        ("lower bound", format_bytes(r.lower_bound)),
        ("ratio", ratio),
        ("baseline (one buffer per tensor)", baseline),
        ("saving", saving),
        ("RAM", ram_text(r)),
        ("ROM", format_bytes(r.rom_bytes) + "  (constants)"),
        ("placed buffers", f"{len(r.buffers):,}"),
        ("program points", f"{r.program_points:,}"),
        ("dynamic allocations", f"{len(r.dynamic):,}"),
    ]
    body = "".join(f"<tr><td><b>{k}</b></td><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="facts">{body}</table>'


def _buffers(r: FunctionReport, origins: Origins) -> str:
    lay = layout(r)
    left = ("tensor", "shape", "dtype", "op", "source")
    head = "".join(
        f'<th class="l">{c}</th>' if c in left else f"<th>{c}</th>"
        for c in (
            "",
            "#",
            "tensor",
            "shape",
            "dtype",
            "bytes",
            "offset",
            "first",
            "last",
            "op",
            "source",
        )
    )
    rows = []
    for rect in lay.rects:
        b = rect.row
        rows.append(
            f'<tr data-i="{rect.index}"><td><span class="sw" style="background:{rect.colour}">'
            f'</span></td><td>{rect.rank or ""}</td><td class="l">%{escape(b.name)}</td>'
            f'<td class="l">{escape(shape_to_str(b.shape))}</td>'
            f'<td class="l">{escape(b.dtype)}</td>'
            f"<td>{b.bytes:,}</td><td>{b.offset:,}</td><td>{b.first}</td><td>{b.last}</td>"
            f'<td class="l">{escape(b.op)}</td>'
            f'<td class="l">{escape(origins.describe(b.line))}</td></tr>'
        )
    return (
        '<h3>placed buffers</h3><div class="scroll"><table><tr>'
        + head
        + "</tr>"
        + "".join(rows)
        + "</table></div>"
    )


def _dynamic(r: FunctionReport, origins: Origins) -> str:
    """The dynamic allocations: a table, and their lifetimes against the program points."""
    points = max(r.program_points, 1)
    shown = r.dynamic[:400]
    w, row_h, left = 900.0, 13.0, 10.0
    h = row_h * len(shown) + 30
    bars = []
    for k, d in enumerate(shown):
        x0 = left + d.first * w / points
        x1 = left + (d.last + 1) * w / points
        y = 4 + k * row_h
        bars.append(
            f'<rect x="{x0:.2f}" y="{y:.2f}" width="{max(x1 - x0, 1.0):.2f}" '
            f'height="{row_h - 2:.2f}" fill="{op_colour(d.op)}"><title>%{escape(d.name)}: '
            f"{escape(d.size.expr)} bytes, points {d.first}..{d.last}, written by "
            f"{escape(d.op or 'no op')}</title></rect>"
            f'<text x="{x1 + 4:.2f}" y="{y + row_h - 4:.2f}" font-size="10">%{escape(d.name)}'
            f" ({escape(d.size.expr)} B)</text>"
        )
    lifetimes = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="dyn" width="{w + 300:.0f}" '
        f'height="{h:.0f}" viewBox="0 0 {w + 300:.0f} {h:.0f}">'
        + "".join(bars)
        + f'<text x="{left}" y="{h - 6:.0f}" font-size="11">program point 0 .. {points - 1}'
        "</text></svg>"
    )
    more = (
        f"<p>({len(r.dynamic) - len(shown):,} more not drawn; all are in the table)</p>"
        if len(r.dynamic) > len(shown)
        else ""
    )
    rows = "".join(
        f'<tr><td class="l">%{escape(d.name)}</td><td class="l">{escape(d.size.expr)}</td>'
        f'<td class="l">{escape(d.scope)}</td><td>{d.first}</td><td>{d.last}</td>'
        f'<td class="l">{escape(d.op)}</td><td class="l">{escape(origins.describe(d.line))}</td>'
        "</tr>"
        for d in r.dynamic
    )
    return (
        f"<h3>dynamic allocations ({len(r.dynamic):,}, sized at run time)</h3>"
        "<p>Their sizes depend on dims without an upper bound, so they are on no map; "
        "<code>--bound NAME=N</code> at import (or <code>upper_bounds</code>) plans them.</p>"
        + lifetimes
        + more
        + '<div class="scroll"><table><tr><th class="l">storage</th><th class="l">bytes</th>'
        '<th class="l">scope</th><th>first</th><th>last</th><th class="l">op</th>'
        f'<th class="l">source</th></tr>{rows}</table></div>'
    )


def function_section(r: FunctionReport, origins: Origins) -> str:
    parts = [f'<section class="fn" id="fn-{escape(r.name)}"><h2>@{escape(r.name)}</h2>']
    parts.append(_facts(r))
    if r.buffers:
        parts.append(
            '<div class="tools"><button data-zoom="in">zoom in</button>'
            '<button data-zoom="out">zoom out</button><button data-zoom="reset">reset</button>'
            " wheel: zoom, drag: pan; hover a rectangle or a row to find the other</div>"
            f'<div class="viewport">{function_svg(r, origins)}</div>'
        )
    elif not r.dynamic:
        parts.append("<p>No planned memory.</p>")
    if r.dynamic:
        parts.append(_dynamic(r, origins))
    if r.buffers:
        parts.append(_buffers(r, origins))
    parts.append("</section>")
    return "".join(parts)


def report_html(reports: list[FunctionReport], title: str, origins: Origins | None = None) -> str:
    origins = origins or Origins()
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>'
        + escape(title)
        + f"</title><style>{CSS}</style></head><body><h1>"
        + escape(title)
        + "</h1>"
        + "".join(function_section(r, origins) for r in reports)
        + f"<script>{JS}</script></body></html>\n"
    )

"""A memory map a person can open: SVG (and HTML around it), one rectangle per buffer."""

from __future__ import annotations

import html

from relaxc.ir.types import shape_to_str
from relaxc.passes.memory_report import FunctionReport

from .units import format_bytes

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)


def function_svg(rep: FunctionReport, width: int = 900, height: int = 360) -> str:
    """An SVG of one function's arena: x = program point, y = offset."""
    pad_l, pad_b, pad_t = 90, 30, 24
    w, h = width - pad_l - 10, height - pad_b - pad_t
    points = max(rep.program_points, 1)
    arena = max(rep.arena_bytes, 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<text x="{pad_l}" y="15" font-weight="bold">@{html.escape(rep.name)}: arena '
        f"{html.escape(format_bytes(rep.arena_bytes))}, lower bound "
        f"{html.escape(format_bytes(rep.lower_bound))}</text>",
        f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="#f7f7f7" stroke="#999"/>',
    ]
    for k, b in enumerate(rep.buffers):
        x = pad_l + b.first * w / points
        bw = max(1.0, (b.last - b.first + 1) * w / points)
        y = pad_t + h - (b.offset + b.bytes) * h / arena
        bh = max(1.0, b.bytes * h / arena)
        tip = (
            f"%{b.name} {shape_to_str(b.shape)} {b.dtype}: {b.bytes:,} B at offset "
            f"{b.offset:,}, live {b.first}..{b.last}"
        )
        out.append(
            f'<rect x="{x:.2f}" y="{y:.2f}" width="{bw:.2f}" height="{bh:.2f}" '
            f'fill="{PALETTE[k % len(PALETTE)]}" fill-opacity="0.85" stroke="#333" '
            'stroke-width="0.5">'
            f"<title>{html.escape(tip)}</title></rect>"
        )
    out.append(
        f'<text x="{pad_l - 6}" y="{pad_t + 4}" '
        f'text-anchor="end">{html.escape(format_bytes(rep.arena_bytes).split(" (")[0])}</text>'
    )
    out.append(f'<text x="{pad_l - 6}" y="{pad_t + h}" text-anchor="end">0</text>')
    out.append(
        f'<text x="{pad_l + w / 2:.0f}" y="{height - 8}" text-anchor="middle">program point (0 .. '
        f"{points - 1})</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def report_svg(reports: list[FunctionReport]) -> str:
    """All functions stacked in one SVG document."""
    bodies = [function_svg(r) for r in reports if r.buffers]
    if not bodies:
        return (
            '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="40"><text x="10" '
            'y="25">no planned memory</text></svg>\n'
        )
    height = 360 * len(bodies)
    inner = "".join(f'<g transform="translate(0,{i * 360})">{b}</g>' for i, b in enumerate(bodies))
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{height}">{inner}</svg>\n'


def report_html(reports: list[FunctionReport], title: str) -> str:
    rows = []
    for r in reports:
        table = "".join(
            f"<tr><td>%{html.escape(b.name)}</td><td>{html.escape(shape_to_str(b.shape))}</td><td>{b.dtype}</td>"
            f"<td>{b.bytes:,}</td><td>{b.offset:,}</td><td>{b.first}</td><td>{b.last}</td></tr>"
            for b in r.buffers
        )
        ratio = f"{r.ratio:.3f}" if r.ratio else "-"
        rows.append(
            f"<h2>@{html.escape(r.name)}</h2><p>arena "
            f"{html.escape(format_bytes(r.arena_bytes))}; lower bound "
            f"{html.escape(format_bytes(r.lower_bound))}; ratio {ratio}; naive "
            f"{html.escape(format_bytes(r.naive_bytes))}; dynamic allocations "
            f"{len(r.dynamic)}</p>{function_svg(r) if r.buffers else ''}<table><tr><th>tensor</th>"
            "<th>shape</th><th>dtype</th><th>bytes</th><th>offset</th><th>first</th><th>last</th>"
            f"</tr>{table}</table>"
        )
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>'
        + html.escape(title)
        + "</title><style>body{font-family:sans-serif}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;"
        "padding:2px 6px;text-align:right}</style></head><body><h1>"
        + html.escape(title)
        + "</h1>"
        + "".join(rows)
        + "</body></html>\n"
    )

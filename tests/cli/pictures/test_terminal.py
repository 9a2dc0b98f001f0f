"""The terminal map: as wide as asked, one row per segment, and no false overlap."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.cli.report.picture.layout import layout
from relaxc.cli.report.picture.terminal import cell_rects, live_rects, memory_map

from .plans import reports


def _overlap(a, b) -> bool:
    return (
        a.seg0 < b.seg1 and b.seg0 < a.seg1 and a.y < b.y + b.row.bytes and b.y < a.y + a.row.bytes
    )


@settings(max_examples=100, deadline=None)
@given(reports(valid=False), st.integers(1, 120))
def test_a_cell_shows_a_live_buffer_that_touches_it_and_an_overlap_only_when_real(
    rep, cols
) -> None:
    lay = layout(rep)
    for seg in range(lay.segments):
        live = [r for r in lay.rects if r.seg0 <= seg < r.seg1]
        for c, idx in enumerate(cell_rects(lay, seg, cols)):
            lo, hi = c * lay.height / cols, (c + 1) * lay.height / cols
            if idx is None:
                assert not any(r.y < hi and r.y + r.row.bytes > lo for r in live)
            elif idx == -1:  # two live buffers both hold the cell's middle: they overlap
                mid = (lo + hi) / 2
                holders = [r for r in live if r.y <= mid < r.y + r.row.bytes]
                assert len(holders) >= 2 and _overlap(holders[0], holders[1])
            else:
                r = lay.rects[idx]
                assert r.seg0 <= seg < r.seg1 and r.y < hi and r.y + r.row.bytes > lo


@settings(max_examples=100, deadline=None)
@given(reports(valid=True), st.integers(1, 120))
def test_a_valid_plan_never_draws_an_overlap(rep, cols) -> None:
    lay = layout(rep)
    for seg, live in enumerate(live_rects(lay)):
        assert -1 not in cell_rects(lay, seg, cols, live)


@settings(max_examples=100, deadline=None)
@given(reports(valid=False))
def test_the_sweep_finds_the_buffers_live_in_each_row(rep) -> None:
    lay = layout(rep)
    for seg, live in enumerate(live_rects(lay)):
        expected = {r.index for r in lay.rects if r.seg0 <= seg < r.seg1 and r.row.bytes > 0}
        assert {r.index for r in live} == expected


@settings(max_examples=60, deadline=None)
@given(reports(valid=True), st.integers(40, 220))
def test_the_map_fits_the_width_and_has_a_row_per_segment(rep, width) -> None:
    text = memory_map(rep, width).plain
    rows = [line for line in text.splitlines() if re.match(r"^ *\d+ \|", line)]
    lay = layout(rep)
    assert len(rows) == lay.segments
    assert all(len(line) <= width for line in text.splitlines())
    assert "#" not in "".join(line.split("|")[1] for line in rows)
    # every buffer is named on the row where it starts, with its glyph
    for r in lay.rects:
        row = rows[r.seg0]
        assert f"{r.mark}=%{r.row.name}" in row or row.endswith("…")


def test_wider_terminals_get_more_columns() -> None:
    from .plans import BufferRow, FunctionReport

    rep = FunctionReport("main", True, 4, arena_bytes=2048)
    rep.arenas = [{"name": "a", "scope": "global", "bytes": 2048, "align": 1, "proven_bound": 0}]
    rep.buffers = [
        BufferRow("x", (8,), "f32", 1024, 0, 0, 1, "a", "relu"),
        BufferRow("y", (8,), "f32", 1024, 1024, 1, 3, "a", "add"),
    ]
    narrow = [
        len(line.split("|")[1]) for line in memory_map(rep, 60).plain.splitlines() if " |" in line
    ]
    wide = [
        len(line.split("|")[1]) for line in memory_map(rep, 200).plain.splitlines() if " |" in line
    ]
    assert narrow[0] < wide[0]
    row = next(line for line in memory_map(rep, 60).plain.splitlines() if line.startswith("1 |"))
    assert row.split("|")[1] == "a" * (len(row.split("|")[1]) // 2) + "b" * (
        len(row.split("|")[1]) - len(row.split("|")[1]) // 2
    )

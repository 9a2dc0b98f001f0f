"""The geometry every picture shares: the compressed time axis, the live curve, the marks."""

from __future__ import annotations

from hypothesis import given, settings

from relaxc.cli.report.picture.colours import op_colour
from relaxc.cli.report.picture.layout import NO_KERNEL, byte_ticks, layout, segment_ticks

from .plans import live_at, reports


@settings(max_examples=100, deadline=None)
@given(reports(valid=False))
def test_segments_keep_every_point_where_the_live_set_changes(rep) -> None:
    lay = layout(rep)
    assert lay.cuts[0] == 0 and lay.cuts[-1] == rep.program_points
    for r in lay.rects:  # a buffer covers exactly the segments of its program points
        assert lay.cuts[r.seg0] == r.row.first and lay.cuts[r.seg1] == r.row.last + 1
    for k in range(lay.segments):  # within a segment the live bytes are those of each point
        a, b = lay.segment_points(k)
        assert {live_at(rep, p) for p in range(a, b + 1)} == {lay.live[k]}


@settings(max_examples=100, deadline=None)
@given(reports())
def test_the_curve_peaks_at_the_most_bytes_live_and_names_what_is_live_there(rep) -> None:
    lay = layout(rep)
    most = max(live_at(rep, p) for p in range(rep.program_points))
    assert max(lay.live) == lay.live[lay.peak] == most
    a, _ = lay.segment_points(lay.peak)
    assert {lay.rects[i].row.name for i in lay.at_peak} == {
        b.name for b in rep.buffers if b.first <= a <= b.last
    }


@settings(max_examples=100, deadline=None)
@given(reports(valid=False))
def test_buffers_live_at_once_bear_different_marks(rep) -> None:
    lay = layout(rep)
    for k in range(lay.segments):
        marks = [r.mark for r in lay.rects if r.seg0 <= k < r.seg1]
        assert len(marks) == len(set(marks))


@settings(max_examples=100, deadline=None)
@given(reports())
def test_the_legend_names_the_largest_buffers_and_every_op_once(rep) -> None:
    lay = layout(rep, top_n=3)
    sizes = sorted((b.bytes for b in rep.buffers), reverse=True)
    assert [lay.rects[i].row.bytes for i in lay.named] == sizes[:3]
    assert [lay.rects[i].rank for i in lay.named] == list(range(1, len(lay.named) + 1))
    assert sorted(k.op for k in lay.ops) == sorted({b.op or NO_KERNEL for b in rep.buffers})
    assert sum(k.count for k in lay.ops) == len(rep.buffers)
    for r in lay.rects:
        assert r.colour == op_colour(r.row.op)


def test_colours_are_a_function_of_the_op_and_differ_between_common_ops() -> None:
    common = ["conv2d", "dense", "relu", "add", "max_pool2d", "batch_norm", "concat", "softmax"]
    assert len({op_colour(op) for op in common}) == len(common)
    assert op_colour("conv2d") == op_colour("conv2d")
    assert op_colour("no_such_op") == op_colour("") != op_colour("conv2d")


def test_ticks() -> None:
    assert byte_ticks(7225344) == [k * 1024 * 1024 for k in range(7)]
    assert byte_ticks(8192)[-1] == 8192 and byte_ticks(0) == [0]
    assert segment_ticks(5) == [0, 1, 2, 3, 4, 5]
    ticks = segment_ticks(111)
    assert ticks[0] == 0 and ticks[-1] == 111 and 10 <= len(ticks) <= 13


def test_short_byte_spellings() -> None:
    from relaxc.cli.units import short_bytes

    assert short_bytes(512) == "512 B" and short_bytes(1024) == "1 KiB"
    assert short_bytes(7225344) == "6.9 MiB" and short_bytes(3 << 30) == "3 GiB"


def test_label_ink_reads_on_its_fill() -> None:
    from relaxc.cli.report.picture.colours import ink

    assert ink("#4e79a7") == "#fff" and ink("#edc948") == "#222"
    assert ink("#000000") == "#fff" and ink("#ffffff") == "#222"

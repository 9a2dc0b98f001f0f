"""The SVG picture, read as XML: a rectangle per buffer where its offset says, names on the
rectangles that can carry one, ticks, the legend, colours by op kind."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given, settings

from relaxc.cli.report.picture.layout import NO_KERNEL, layout
from relaxc.cli.report.origins import Origins
from relaxc.cli.report.picture.svg import CHAR_W, frame_for, function_svg, report_svg

from .plans import BufferRow, FunctionReport, reports

NS = "{http://www.w3.org/2000/svg}"


def texts(root: ET.Element, cls: str | None = None) -> list[str]:
    return [
        "".join(t.itertext())
        for t in root.iter(f"{NS}text")
        if cls is None or t.get("class") == cls
    ]


def buffer_rects(root: ET.Element) -> dict[int, ET.Element]:
    return {int(r.get("data-i")): r for r in root.iter(f"{NS}rect") if r.get("class") == "buf"}


@settings(max_examples=80, deadline=None)
@given(reports())
def test_every_buffer_has_a_rectangle_where_its_offset_and_lifetime_say(rep) -> None:
    root = ET.fromstring(function_svg(rep))
    lay = layout(rep)
    fr = frame_for(lay)
    rects = buffer_rects(root)
    assert sorted(rects) == list(range(len(rep.buffers)))
    seg_w = fr.width / lay.segments
    for i, b in enumerate(rep.buffers):
        e = rects[i]
        x, y, w, h = (float(e.get(k)) for k in ("x", "y", "width", "height"))
        bottom = fr.top + fr.map_h - lay.rects[i].y * fr.map_h / lay.height
        assert abs(y + h - bottom) < 0.01 or h == 0.6  # thinner than a pixel: drawn at 0.6
        assert abs(h - max(b.bytes * fr.map_h / lay.height, 0.6)) < 0.02
        assert abs(x - (fr.left + lay.rects[i].seg0 * seg_w)) < 0.01
        assert abs(w - (lay.rects[i].seg1 - lay.rects[i].seg0) * seg_w) < 0.02
        assert f"%{b.name}" in "".join(e.itertext())  # the tooltip
        # room for "%name" (the printed sizes are rounded to 0.01): it is written
        if w >= (len(b.name) + 1) * CHAR_W + 4.01 and h >= 12.01:
            assert f"%{b.name}" in texts(root, "label")


@settings(max_examples=80, deadline=None)
@given(reports())
def test_fill_is_a_function_of_the_op_kind_and_the_legend_explains_it(rep) -> None:
    root = ET.fromstring(function_svg(rep))
    fills: dict[str, set[str]] = {}
    for e in buffer_rects(root).values():
        fills.setdefault(e.get("data-op"), set()).add(e.get("fill"))
    assert all(len(f) == 1 for f in fills.values())
    swatches = {
        s.get("data-op"): s.get("fill")
        for s in root.iter(f"{NS}rect")
        if s.get("class") == "swatch" and s.get("data-op") is not None
    }
    for op, f in fills.items():
        assert swatches[op or NO_KERNEL] == next(iter(f))


def _report() -> FunctionReport:
    rep = FunctionReport("main", True, 40, arena_bytes=3 * 1024 * 1024, lower_bound=3 << 20)
    rep.arenas = [
        {"name": "arena", "scope": "global", "bytes": 3 << 20, "align": 64, "proven_bound": 0}
    ]
    rep.buffers = [
        BufferRow("big", (1, 64, 112, 112), "f32", 2 << 20, 0, 0, 20, "arena", "conv2d", 7),
        BufferRow("next", (1, 64, 56, 56), "f32", 1 << 20, 2 << 20, 10, 30, "arena", "relu", 9),
        BufferRow("late", (1, 64, 56, 56), "f32", 1 << 20, 0, 21, 39, "arena", "add", 12),
    ]
    rep.point_lines = [k // 3 + 1 for k in range(40)]
    return rep


def test_names_ticks_axes_peak_and_legend() -> None:
    origins = Origins("net.rx", {7: "'stem' (Conv)"})
    root = ET.fromstring(function_svg(_report(), origins))
    labels = texts(root, "label")
    assert {"%big", "%next", "%late"} <= set(labels) and "2 MiB" in labels
    ticks = texts(root, "tick")
    assert {"0 B", "1 MiB", "2 MiB", "3 MiB"} <= set(ticks)  # offsets, in bytes
    assert {"0", "10", "21", "31", "40"} <= set(ticks)  # program points where buffers change
    axes = texts(root, "axis")
    assert any(a.startswith("offset") for a in axes) and any("program point" in a for a in axes)
    assert "live bytes" in axes
    note = texts(root, "peaknote")[0]
    assert note.startswith("peak: 3 MiB live at program point 10") and "'stem' (Conv)" not in note
    legend = " ".join(texts(root, "legend") + texts(root, "sub") + texts(root, "head"))
    assert "conv2d: 1 buffer, 2 MiB" in legend
    assert "1 %big (1, 64, 112, 112) 2 MiB, points 0..20" in legend
    assert "net.rx:7, onnx 'stem' (Conv)" in legend  # the source line and the ONNX node
    assert "live at the peak (2 buffers)" in legend
    assert "arena = lower bound = 3 MiB" in texts(root, "note")
    peak = [e for e in buffer_rects(root).values() if e.get("stroke") == "#111"]
    assert sorted(e.get("data-i") for e in peak) == ["0", "1"]  # outlined: live at the peak


def test_the_svg_is_byte_identical_and_stacks_functions() -> None:
    a, b = _report(), _report()
    b.name = "second"
    one = report_svg([a, b])
    assert one == report_svg([a, b])
    root = ET.fromstring(one)
    assert len(root.findall(f"{NS}g")) == 2
    assert "no planned memory" in report_svg([FunctionReport("main", True, 3)])


def test_kernel_scratch_has_a_colour_of_its_own() -> None:
    from relaxc.cli.report.picture.colours import SCRATCH, family, op_colour

    assert op_colour("conv2d scratch") == op_colour("max_pool2d scratch") == SCRATCH
    assert family("dense scratch") == "kernel scratch"
    assert SCRATCH not in {op_colour(op) for op in ("conv2d", "relu", "max_pool2d", "add", "")}

"""Random memory plans as FunctionReports, for the pictures' properties."""

from __future__ import annotations

from hypothesis import strategies as st

from relaxc.cli.report.analysis import BufferRow, FunctionReport

OPS = ("conv2d", "relu", "add", "concat", "batch_norm", "max_pool2d", "dense", "")


def first_fit(lives: list[tuple[int, int, int]], align: int) -> list[int]:
    """Offsets for (first, last, bytes) such that buffers live at once never share a byte."""
    placed: list[tuple[int, int, int, int]] = []  # first, last, offset, end
    out = []
    for first, last, size in lives:
        size = -(-size // align) * align
        offset = 0
        for f, lst, o, e in sorted(placed, key=lambda p: p[2]):
            if f <= last and first <= lst and o < offset + size and offset < e:
                offset = -(-e // align) * align
        placed.append((first, last, offset, offset + size))
        out.append(offset)
    return out


@st.composite
def reports(draw, valid: bool = True, max_buffers: int = 24) -> FunctionReport:
    """A report with one arena; ``valid`` plans never overlap, others may."""
    points = draw(st.integers(1, 60))
    n = draw(st.integers(1, max_buffers))
    align = draw(st.sampled_from([1, 8, 64]))
    lives = []
    for _ in range(n):
        first = draw(st.integers(0, points - 1))
        last = draw(st.integers(first, points - 1))
        lives.append((first, last, draw(st.integers(1, 5000))))
    if valid:
        offsets = first_fit(lives, align)
    else:
        offsets = [draw(st.integers(0, 8000)) // align * align for _ in lives]
    rows = [
        BufferRow(
            f"t{k}",
            (size // 4,),
            "f32",
            size,
            off,
            first,
            last,
            "arena",
            draw(st.sampled_from(OPS)),
        )
        for k, ((first, last, size), off) in enumerate(zip(lives, offsets))
    ]
    arena = max(-(-(r.offset + r.bytes) // align) * align for r in rows)
    rep = FunctionReport("main", True, points, arena_bytes=arena)
    rep.arenas = [
        {"name": "arena", "scope": "global", "bytes": arena, "align": align, "proven_bound": 0}
    ]
    rep.buffers = rows
    rep.point_lines = list(range(1, points + 1))
    return rep


def aligned(rep: FunctionReport, b: BufferRow) -> int:
    align = int(rep.arenas[0]["align"])
    return -(-b.bytes // align) * align


def live_at(rep: FunctionReport, point: int) -> int:
    """Aligned bytes of the buffers live at ``point``, counted directly."""
    return sum(aligned(rep, b) for b in rep.buffers if b.first <= point <= b.last)

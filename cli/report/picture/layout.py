"""What the pictures of one function's memory show, computed once for every renderer.

The time axis is **compressed without loss**: the set of live buffers changes only at a
program point where some buffer starts (its ``first``) or ends (after its ``last``), so the
axis keeps only those points, as *segments* ``[cuts[k], cuts[k + 1])`` of equal width. A
buffer covers whole segments, the live bytes are constant within one, and an axis tick names
the program point where its segment starts. On resnet50 this turns 795 program points into
about a hundred segments, and rectangles become wide enough to name.

The y axis is the offset in bytes; several arenas are stacked, each at the sum of the sizes
before it. Live bytes count each buffer at its arena's alignment, as the lower bound does, so
the curve's maximum is the report's lower bound.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from relaxc.ir.sizes import round_up

from ..analysis import BufferRow, FunctionReport

from .colours import op_colour

MARKS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
"""Glyphs of the terminal map; a glyph is reused only by a buffer that is never live at the
same time as another one bearing it."""

NO_KERNEL = "(no kernel: an input, or a copy)"
"""The legend's name for buffers no kernel writes (an input planned into the arena)."""

TOP_N = 10
"""How many of the largest buffers the legend names."""


@dataclass(frozen=True)
class Rect:
    """One placed buffer as the pictures draw it."""

    index: int  # position in FunctionReport.buffers
    row: BufferRow
    y: int  # offset in the stacked arenas (the arena's base + the buffer's offset)
    seg0: int  # first segment it covers
    seg1: int  # one past the last segment it covers
    colour: str
    mark: str  # its glyph in the terminal map
    rank: int  # 1..TOP_N: its number in the legend of the largest buffers; 0 otherwise

    @property
    def label(self) -> str:
        return f"%{self.row.name}"


@dataclass(frozen=True)
class OpKind:
    """A legend entry: an op, its colour, how many buffers it wrote and their bytes."""

    op: str
    colour: str
    count: int
    bytes: int


@dataclass(frozen=True)
class Layout:
    name: str
    points: int  # program points of the function
    cuts: tuple[int, ...]  # segment k is the program points [cuts[k], cuts[k + 1])
    height: int  # bytes on the y axis (all arenas)
    arenas: tuple[tuple[str, int, int], ...]  # (name, base, bytes)
    rects: tuple[Rect, ...]
    live: tuple[int, ...]  # per segment: bytes of the buffers live in it (aligned)
    peak: int  # the first segment where ``live`` is largest (-1: nothing placed)
    at_peak: tuple[int, ...]  # rects live at the peak, largest first
    named: tuple[int, ...]  # rects named in the legend, largest first
    ops: tuple[OpKind, ...]  # legend of colours, most bytes first
    lower_bound: int
    arena_bytes: int

    @property
    def segments(self) -> int:
        return len(self.cuts) - 1

    def segment_of(self, point: int) -> int:
        """The segment holding program point ``point``."""
        return min(max(bisect.bisect_right(self.cuts, point) - 1, 0), self.segments - 1)

    def segment_points(self, seg: int) -> tuple[int, int]:
        """The first and last program point of segment ``seg``."""
        return self.cuts[seg], self.cuts[seg + 1] - 1


def _marks(spans: list[tuple[int, int]]) -> list[str]:
    """A glyph per span (seg0, seg1) such that spans sharing a segment get different glyphs
    (interval colouring, first come first served), preferring one not in use in the segment
    before; '?' once all 62 are in use at once."""
    order = sorted(range(len(spans)), key=lambda i: (spans[i][0], i))
    free_at: dict[str, int] = {}  # glyph -> the segment from which it is free again
    out = [""] * len(spans)
    for i in order:
        s0, s1 = spans[i]
        # a glyph free for a while first, so that a buffer does not seem to go on in the
        # next one's glyph
        mark = next(
            (m for m in MARKS if free_at.get(m, -1) < s0),
            next((m for m in MARKS if free_at.get(m, -1) <= s0), "?"),
        )
        if mark != "?":
            free_at[mark] = s1
        out[i] = mark
    return out


def layout(rep: FunctionReport, top_n: int = TOP_N) -> Layout:
    """The pictures' geometry for ``rep``."""
    points = max(rep.program_points, 1)
    bases: dict[str, tuple[int, int]] = {}  # arena -> (base, align)
    arenas = []
    base = 0
    for a in rep.arenas:
        bases[a["name"]] = (base, int(a["align"]))
        arenas.append((str(a["name"]), base, int(a["bytes"])))
        base += int(a["bytes"])
    bufs = list(rep.buffers)
    cut_set = {0, points}
    for b in bufs:
        cut_set.add(min(max(b.first, 0), points))
        cut_set.add(min(max(b.last + 1, 0), points))
    cuts = tuple(sorted(cut_set))
    nseg = len(cuts) - 1

    def seg(point: int) -> int:
        return min(max(bisect.bisect_right(cuts, point) - 1, 0), nseg - 1)

    spans = [(seg(b.first), seg(max(b.last, b.first)) + 1) for b in bufs]
    marks = _marks(spans)
    diff = [0] * (nseg + 1)
    for b, (s0, s1) in zip(bufs, spans):
        size = round_up(b.bytes, bases.get(b.arena, (0, 1))[1])
        diff[s0] += size
        diff[s1] -= size
    live, run = [], 0
    for k in range(nseg):
        run += diff[k]
        live.append(run)
    peak = max(range(nseg), key=lambda k: (live[k], -k)) if bufs else -1
    by_size = sorted(range(len(bufs)), key=lambda i: (-bufs[i].bytes, bufs[i].first, i))
    named = tuple(i for i in by_size if bufs[i].bytes > 0)[:top_n]
    rank = {i: k + 1 for k, i in enumerate(named)}
    rects = tuple(
        Rect(
            i,
            b,
            bases.get(b.arena, (0, 1))[0] + b.offset,
            spans[i][0],
            spans[i][1],
            op_colour(b.op),
            marks[i],
            rank.get(i, 0),
        )
        for i, b in enumerate(bufs)
    )
    at_peak = tuple(i for i in by_size if spans[i][0] <= peak < spans[i][1])
    kinds: dict[str, list[int]] = {}
    for b in bufs:
        k = kinds.setdefault(b.op, [0, 0])
        k[0] += 1
        k[1] += b.bytes
    ops = tuple(
        OpKind(op or NO_KERNEL, op_colour(op), c, n)
        for op, (c, n) in sorted(kinds.items(), key=lambda kv: (-kv[1][1], kv[0]))
    )
    return Layout(
        rep.name,
        points,
        cuts,
        max(base, max((r.y + r.row.bytes for r in rects), default=0), 1),
        tuple(arenas),
        rects,
        tuple(live),
        peak,
        at_peak,
        named,
        ops,
        rep.lower_bound,
        rep.arena_bytes,
    )


def byte_ticks(top: int, count: int = 6) -> list[int]:
    """Tick values from 0 up to ``top`` in steps of a power of two (bytes read best in binary:
    256 KiB, 512 KiB, 1 MiB ...), about ``count`` of them."""
    if top <= 0:
        return [0]
    step = 1
    while step * count < top:
        step *= 2
    if top // step <= count // 2 and step > 1:
        step //= 2
    return list(range(0, top + 1, step))


def segment_ticks(segments: int, count: int = 12) -> list[int]:
    """About ``count`` segment boundaries (0 and ``segments`` included), evenly spread."""
    if segments <= count:
        return list(range(segments + 1))
    return sorted({round(k * segments / count) for k in range(count + 1)})

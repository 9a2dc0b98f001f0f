"""An independent plan checker: it shares no code with the planners.

A plan is valid when every offset is non-negative and aligned, every buffer fits in the
arena, and no two buffers that are live at the same time overlap in memory. The check
sweeps over time with the set of live buffers sorted by offset, so it runs in
O(n log n) (plus list moves) rather than comparing every pair.

Why comparing a new buffer with its neighbours in the live set suffices: as long as no
problem has been found, the live buffers are pairwise disjoint in memory, so sorted by
offset they are sorted by end too; a new buffer overlaps one of them iff it overlaps the
last one starting below it or one starting inside it. So the first overlap is always
found (later ones may be missed once the live set holds an overlap: the checker reports
problems, at least one whenever there is one, not necessarily all).
"""

from __future__ import annotations

import bisect
from typing import Sequence

from .model import Buffer


def check_plan(
    buffers: Sequence[Buffer], offsets: Sequence[int], arena_size: int, limit: int = 10
) -> list[str]:
    """Every problem found (at most ``limit``), as sentences; empty when the plan is valid."""
    problems: list[str] = []

    def name(i: int) -> str:
        return buffers[i].name or f"buffer {i}"

    if len(offsets) != len(buffers):
        return [f"{len(offsets)} offsets for {len(buffers)} buffers"]
    for i, (b, off) in enumerate(zip(buffers, offsets)):
        if off < 0:
            problems.append(f"{name(i)} has a negative offset {off}")
        if b.align > 1 and off % b.align:
            problems.append(f"{name(i)} at offset {off} is not aligned to {b.align}")
        if off + b.size > arena_size:
            problems.append(
                f"{name(i)} ends at {off + b.size}, past the arena of {arena_size} bytes"
            )
    # Sweep: at each start time, compare the new buffer with live buffers around its offset.
    order = sorted(
        (i for i, b in enumerate(buffers) if b.size > 0 and b.start < b.end),
        key=lambda i: (buffers[i].start, i),
    )
    ends = sorted((buffers[i].end, i) for i in order)
    live_offsets: list[tuple[int, int]] = []  # (offset, index), sorted by offset
    e = 0
    for i in order:
        b = buffers[i]
        while e < len(ends) and ends[e][0] <= b.start:
            j = ends[e][1]
            k = bisect.bisect_left(live_offsets, (offsets[j], j))
            if k < len(live_offsets) and live_offsets[k] == (offsets[j], j):
                live_offsets.pop(k)
            e += 1
        lo, hi = offsets[i], offsets[i] + b.size
        k = bisect.bisect_left(live_offsets, (lo, -1))
        # Any live buffer starting below hi may overlap: check neighbours on both sides.
        if k > 0:
            j = live_offsets[k - 1][1]
            if offsets[j] + buffers[j].size > lo:
                problems.append(_overlap(name(i), name(j), b, buffers[j], lo, offsets[j]))
        while k < len(live_offsets) and live_offsets[k][0] < hi:
            j = live_offsets[k][1]
            problems.append(_overlap(name(i), name(j), b, buffers[j], lo, offsets[j]))
            k += 1
            if len(problems) >= limit:
                return problems
        bisect.insort(live_offsets, (lo, i))
        if len(problems) >= limit:
            return problems
    return problems


def _overlap(a: str, b: str, ba: Buffer, bb: Buffer, oa: int, ob: int) -> str:
    return (
        f"{a} [{oa}, {oa + ba.size}) and {b} [{ob}, {ob + bb.size}) overlap in memory "
        f"while both are live (times [{ba.start}, {ba.end}) and [{bb.start}, {bb.end}))"
    )

"""The planning problem: buffers, their lifetimes, sizes and alignments."""

from __future__ import annotations

from dataclasses import dataclass
from operator import add, attrgetter
from typing import Sequence


@dataclass(frozen=True, slots=True)
class Buffer:
    """A buffer live over the half-open interval ``[start, end)`` of program points.

    Two buffers conflict (may not overlap in memory) iff their intervals intersect.
    ``align`` is the required alignment of its offset (a power of two).
    """

    start: int
    end: int
    size: int
    align: int = 1
    name: str = ""

    def overlaps_in_time(self, other: "Buffer") -> bool:
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class Plan:
    """Offsets for a list of buffers (same order) and the arena size they need.

    ``proven_bound`` is the best lower bound on the arena the planner proved: at least the
    most bytes live at once, more when the exact search showed lower capacities
    infeasible. ``optimal`` says ``size == proven_bound``: no plan is smaller.
    ``stopped_by_clock`` says the safety clock (far past the work budget) ended a search,
    so this plan may differ from run to run; otherwise it depends on the input and the
    options only.
    """

    offsets: tuple[int, ...]
    size: int
    algorithm: str
    proven_bound: int = 0
    optimal: bool = False
    stopped_by_clock: bool = False

    @staticmethod
    def from_offsets(
        buffers: Sequence[Buffer],
        offsets: Sequence[int],
        algorithm: str,
        *,
        proven_bound: int = 0,
        stopped_by_clock: bool = False,
    ) -> "Plan":
        size = max(map(add, offsets, map(attrgetter("size"), buffers)), default=0)
        return Plan(
            tuple(offsets), size, algorithm, proven_bound, size <= proven_bound, stopped_by_clock
        )


def lower_bound(buffers: Sequence[Buffer]) -> int:
    """The most bytes live at any program point: no plan can use less."""
    events: list[tuple[int, int]] = []
    for b in buffers:
        if b.size and b.start < b.end:
            events.append((b.start, b.size))
            events.append((b.end, -b.size))
    events.sort()  # at equal times, frees (negative) come first: half-open intervals
    live = best = 0
    for _, delta in events:
        live += delta
        best = max(best, live)
    return best


def naive_total(buffers: Sequence[Buffer]) -> int:
    """Bytes without any reuse: every buffer its own (aligned) block."""
    total = 0
    for b in buffers:
        total = -(-total // b.align) * b.align + b.size
    return total

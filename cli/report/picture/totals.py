"""The totals a deployer needs, in words every picture and the report's table share: RAM
(what a call holds at the most, in its parts) and ROM (the constants), and the saving
against one buffer per tensor."""

from __future__ import annotations

from ...units import format_bytes, short_bytes
from ..analysis import FunctionReport


def ram_parts(rep: FunctionReport) -> list[tuple[str, int | None]]:
    """The parts of the RAM total that are not zero (the arena always)."""
    parts: list[tuple[str, int | None]] = [("arena", rep.arena_bytes)]
    if rep.unplanned_static_bytes:
        parts.append(("unplanned", rep.unplanned_static_bytes))
    if rep.calls:
        parts.append(("callees", rep.callee_bytes if rep.callees_bounded else None))
    if rep.ram_inputs != 0:
        parts.append(("inputs", rep.ram_inputs))
    if rep.ram_outputs != 0:
        parts.append(("outputs", rep.ram_outputs))
    if rep.dynamic:
        parts.append(("dynamic", None))
    return parts


def ram_text(rep: FunctionReport) -> str:
    """``10.3 KiB (10,560 B)  (arena 8 KiB, inputs 2 KiB, outputs 320 B)``."""
    total = rep.ram_bytes
    parts = ", ".join(
        f"{k} {short_bytes(v) if v is not None else 'unbounded'}" for k, v in ram_parts(rep)
    )
    head = format_bytes(total) if total is not None else "unbounded"
    return f"{head}  ({parts})"


def footprint_line(rep: FunctionReport) -> str:
    """One line: ``RAM 10.3 KiB (arena 8 KiB, inputs 2 KiB, outputs 320 B); ROM 102 KiB
    (constants); 50% less than one buffer per tensor (16.6 KiB)``."""
    total = rep.ram_bytes
    parts = ", ".join(
        f"{k} {short_bytes(v) if v is not None else 'unbounded'}" for k, v in ram_parts(rep)
    )
    ram = short_bytes(total) if total is not None else "unbounded"
    text = f"RAM {ram} ({parts}); ROM {short_bytes(rep.rom_bytes)} (constants)"
    if rep.saving is not None and rep.baseline_bytes is not None:
        text += (
            f"; {rep.saving:.0%} less than one buffer per tensor "
            f"({short_bytes(rep.baseline_bytes)})"
        )
    return text

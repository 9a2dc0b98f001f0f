"""Byte sizes written by people: ``256KiB``, ``1.5MB``, ``4096``."""

from __future__ import annotations

import re
from fractions import Fraction

import click

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "ki": 1024,
    "mi": 1024**2,
    "gi": 1024**3,
}


def parse_bytes(text: str) -> int:
    """``"256KiB"`` → 262144; raises ValueError with a sentence for anything else."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"'{text}' is not a size (examples: 4096, 256KiB, 1.5MB, 2GiB)")
    try:
        value = (
            Fraction(m.group(1)) * _UNITS[m.group(2).lower()]
        )  # exact: no rounding, no overflow to inf
    except ValueError:  # more digits than Python converts
        raise ValueError(
            f"'{text[:40]}...' is not a size relaxc can use (too many digits)"
        ) from None
    if value.denominator != 1:
        raise ValueError(f"'{text}' is not a whole number of bytes")
    return int(value)


def format_bytes(n: int) -> str:
    """``262144`` → ``256.0 KiB (262,144 B)``; small sizes in bytes only."""
    if n < 1024:
        return f"{n:,} B"
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit} ({n:,} B)"
    return f"{n:,} B"  # pragma: no cover


def short_bytes(n: int) -> str:
    """``7225344`` -> ``6.9 MiB``: the short spelling of ticks and labels."""
    if n < 1024:
        return f"{n} B"
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n} B"  # pragma: no cover


class ByteSize(click.ParamType):
    """A click parameter type for sizes with units."""

    name = "BYTES"

    def convert(self, value, param, ctx):  # type: ignore[override]
        if isinstance(value, int):
            return value
        try:
            return parse_bytes(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)

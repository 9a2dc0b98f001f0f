"""A MiniMalloc benchmark instance written as an .rx program (issue 17's "program encoding").

Each buffer ``(lower, upper, size)`` becomes ``%b = zeros((size / 4,), f32)`` at time
``lower`` and is folded into a running 0-d accumulator at time ``upper`` (``sum`` then
``add``), so the program's planned buffers are the instance's, with a few small tensors
mixed in as in any real model.
"""

from __future__ import annotations

import csv
from pathlib import Path

DATA = Path(__file__).resolve().parents[2].parent / "shared/benchmarks/minimalloc/challenging"


def read_instance(name: str) -> list[tuple[int, int, int]]:
    path = next(DATA.glob(f"{name}.*.csv"))
    with path.open() as f:
        return [(int(r["lower"]), int(r["upper"]), int(r["size"])) for r in csv.DictReader(f)]


def program(name: str) -> str:
    buffers = read_instance(name)
    events: list[tuple[int, int, int]] = []  # (time, 0 = free first / 1 = alloc, buffer)
    for i, (lo, hi, _size) in enumerate(buffers):
        events.append((lo, 1, i))
        events.append((hi, 0, i))
    events.sort()
    lines = ["fn @main(%x: Tensor[(), f32]) -> Tensor[(), f32] {"]
    acc = "x"
    for k, (_t, kind, i) in enumerate(events):
        if kind == 1:
            lines.append(f"  %b{i} = zeros(({buffers[i][2] // 4},), f32)")
        else:
            lines.append(f"  %s{i} = sum(%b{i})")
            lines.append(f"  %a{k} = add(%{acc}, %s{i})")
            acc = f"a{k}"
    lines.append(f"  return %{acc}")
    lines.append("}")
    return "\n".join(lines) + "\n"

"""Instances for the memory-planner benchmark: MiniMalloc's files, their program
encodings, and random interval sets.

* :func:`read_instance` reads a MiniMalloc CSV (header ``id,lower,upper,size``, lifetimes
  half-open ``[lower, upper)``).
* :func:`program_encoding` writes an instance the way a ``.rx`` program holds it (issue
  17): every buffer a ``zeros`` of its size, born at its start and, at its end, reduced
  (``sum``, a one-element tensor) and folded into a one-element accumulator (``add``). Time
  becomes program points (one per statement; at equal times the folds come before the
  births, so buffers that touch in time still do not conflict), sizes are rounded up to
  the alignment (64), and the small tensors join the large ones: per buffer a 64-byte
  ``sum`` result live for two statements and a 64-byte accumulator live from one fold to
  the next. The last accumulator is the program's result and is not planned.
* :func:`random_intervals` draws ``n`` buffers with about ``live`` of them live at a
  time: starts uniform over ``[0, n)``, lifetimes uniform in ``[1, 2 * live]``, sizes
  log-uniform between 64 bytes and 64 KiB in multiples of 64, aligned to 64.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from relaxc.passes.planning.model import Buffer


def _find_data() -> Path:
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared/benchmarks/minimalloc"
        if candidate.is_dir():
            return candidate
    return Path("/work/shared/benchmarks/minimalloc")


DATA = _find_data()
SMALL = 64  # bytes of a one-element tensor after rounding to the alignment


def read_instance(path: Path) -> list[Buffer]:
    with path.open(newline="") as f:
        return [
            Buffer(int(row["lower"]), int(row["upper"]), int(row["size"]), 1, row["id"])
            for row in csv.DictReader(f)
        ]


def minimalloc_instances() -> list[tuple[str, Path]]:
    """(name, path) of the challenging instances A-K and the example input.12."""
    files = sorted((DATA / "challenging").glob("*.csv")) + [DATA / "examples" / "input.12.csv"]
    # "A.1048576.csv" -> "A"; "input.12.csv" -> "input.12"
    return [
        (p.name.split(".")[0] if p.parent.name == "challenging" else p.stem, p)
        for p in files
        if p.exists()
    ]


def program_encoding(buffers: list[Buffer], align: int = 64) -> list[Buffer]:
    """The buffers PlanMemory sees for the ``.rx`` encoding of an instance (see above)."""
    # Events in program order: at equal times folds (ends) before births (starts).
    events = sorted(
        [(b.start, 1, i) for i, b in enumerate(buffers)]
        + [(b.end, 0, i) for i, b in enumerate(buffers)]
    )
    point = 1  # point 0 defines the first accumulator
    born: dict[int, int] = {}
    out: list[Buffer] = []
    acc_def, acc_name = 0, "acc0"
    folds = 0
    for _, kind, i in events:
        b = buffers[i]
        if kind == 1:
            born[i] = point
            point += 1
            continue
        # %r = sum(%b) at `point`; %acc' = add(%acc, %r) at point + 1.
        size = -(-b.size // align) * align
        out.append(Buffer(born[i], point + 1, size, align, b.name or f"b{i}"))
        out.append(Buffer(point, point + 2, SMALL, align, f"r{i}"))
        out.append(Buffer(acc_def, point + 2, SMALL, align, acc_name))
        folds += 1
        acc_def, acc_name = point + 1, f"acc{folds}"
        point += 2
    return out


def random_intervals(n: int, live: int, seed: int = 0, align: int = 64) -> list[Buffer]:
    """``n`` buffers with about ``live`` live at a time (see the module docstring)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        s = rng.randrange(n)
        length = 1 + rng.randrange(2 * live)
        size = max(align, int(2 ** rng.uniform(6, 16)) // align * align)
        out.append(Buffer(s, s + length, size, align, f"b{i}"))
    return out

"""MiniMalloc, the peer, run side by side with relaxc's planner (optional).

MiniMalloc (M. D. Moffitt, ASPLOS 2023; github.com/google/minimalloc) answers one
question: do these buffers fit in a given capacity? Its solver is a C++ program that this
repository does not ship or build; ``benchmarks/planners.py --minimalloc PATH`` runs a
binary built from its sources on the same buffers (``--capacity``, ``--input``,
``--output``, ``--timeout``; CSV with half-open lifetimes and an alignment column) and
checks what it returns with relaxc's independent plan checker.
"""

from __future__ import annotations

import csv
import os
import resource
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.model import Buffer


@dataclass(frozen=True)
class PeerRun:
    """One MiniMalloc run: ``found`` (a valid plan within the capacity, of ``height``),
    ``infeasible`` (its search proved none), ``none`` (minimizing, it found none in time),
    ``timeout``, ``invalid`` (its plan failed the checker) or an error; its CPU seconds."""

    status: str
    height: int | None
    seconds: float


def usable(binary: Path) -> str | None:
    """Why ``binary`` cannot be run, or None."""
    if not binary.is_file():
        return f"{binary} is not a file"
    if not os.access(binary, os.X_OK):
        return f"{binary} is not executable"
    return None


def write_csv(buffers: list[Buffer], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "lower", "upper", "size", "alignment"])
        for i, b in enumerate(buffers):
            w.writerow([i, b.start, b.end, b.size, b.align])


def read_offsets(path: Path, n: int) -> list[int] | None:
    """The offsets MiniMalloc wrote (by buffer id), or None if any is missing."""
    offsets: list[int | None] = [None] * n
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            i = int(row["id"])
            if 0 <= i < n:
                offsets[i] = int(row["offset"])
    if any(o is None for o in offsets):
        return None
    return [o for o in offsets if o is not None]


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def solve(
    binary: Path, buffers: list[Buffer], capacity: int, timeout: float, minimize: bool = False
) -> PeerRun:
    """Run MiniMalloc on ``buffers`` at ``capacity`` with its own ``--timeout``; the CPU
    time is the child's (user + system). ``minimize``: its ``--minimize_capacity`` mode
    (a bisection over [0, capacity], every decision under the one timeout), which returns
    the lowest plan it found."""
    with tempfile.TemporaryDirectory(prefix="relaxc-minimalloc-") as tmp:
        inp, out = Path(tmp) / "in.csv", Path(tmp) / "out.csv"
        write_csv(buffers, inp)
        cmd = [
            str(binary),
            f"--capacity={capacity}",
            f"--input={inp}",
            f"--output={out}",
            f"--timeout={timeout:g}s",
        ]
        if minimize:
            cmd.append("--minimize_capacity")
        before = _child_cpu()
        try:
            proc = subprocess.run(
                cmd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                timeout=2 * timeout + 30,
            )
        except subprocess.TimeoutExpired:  # its own clock did not stop it
            return PeerRun("timeout", None, _child_cpu() - before)
        seconds = _child_cpu() - before
        err = proc.stderr or ""
        if proc.returncode == 0 and out.exists():
            offsets = read_offsets(out, len(buffers))
            if offsets is None:
                return PeerRun("error: offsets missing", None, seconds)
            height = max((o + b.size for o, b in zip(offsets, buffers)), default=0)
            if check_plan(buffers, offsets, capacity) or height > capacity:
                return PeerRun("invalid", height, seconds)
            return PeerRun("found", height, seconds)
        if "NOT_FOUND" in err:
            # Minimizing, it means that no capacity it tried succeeded in time: no proof.
            return PeerRun("none" if minimize else "infeasible", None, seconds)
        if "DEADLINE_EXCEEDED" in err:
            return PeerRun("timeout", None, seconds)
        tail = err.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return PeerRun(f"error: {tail[0][:60]}", None, seconds)

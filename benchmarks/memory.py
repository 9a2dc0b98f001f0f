"""Planned memory of the samples and generated models, per planner.

For each program: ManifestAlloc + PlanMemory{planner=P} for every planner; reports the
arena (summed over functions), the lower bound (most bytes live at once), the naive total
(no reuse), arena / lower bound, and the time PlanMemory took.

    python benchmarks/memory.py [--time-limit 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import layered_program  # noqa: E402
from models import SAMPLES, decoder  # noqa: E402

from relaxc.frontend.parser import parse_module  # noqa: E402
from relaxc.passes.manifest_alloc import ManifestAlloc  # noqa: E402
from relaxc.cli.report.analysis import memory_report  # noqa: E402
from relaxc.passes.plan_memory import PlanMemory  # noqa: E402
from relaxc.passes.planning.planners import PLANNERS  # noqa: E402


def programs() -> list[tuple[str, str]]:
    out = [(p.name, p.read_text()) for p in sorted(SAMPLES.glob("*.rx"))]
    out.append(("decoder, 8 layers (n <= 128)", decoder(8, bounded=True)))
    out.append(("generated, 2,000 bindings", layered_program(2000)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--time-limit", type=float, default=2.0, help="time budget of the 'best' planner (s)"
    )
    args = ap.parse_args()
    table = Table(title="planned memory per planner (bytes)")
    for col in ("program", "planner", "arena", "lower bound", "ratio", "naive", "saving", "plan s"):
        table.add_column(col, justify="left" if col in ("program", "planner") else "right")
    for name, text in programs():
        explicit = ManifestAlloc()(parse_module(text, name))
        for planner in PLANNERS:
            t0 = time.perf_counter()
            planned = PlanMemory(planner=planner, time_limit=args.time_limit, check=True)(explicit)
            secs = time.perf_counter() - t0
            reps = memory_report(planned)
            arena = sum(r.arena_bytes for r in reps)
            lb = sum(r.lower_bound for r in reps)
            naive = sum(r.naive_bytes for r in reps)
            if planner == "none":  # nothing placed: the arena is every storage on its own
                arena = naive = sum(r.unplanned_static_bytes for r in reps)
                lb = sum(
                    r.lower_bound
                    for r in memory_report(PlanMemory(planner="greedy-size")(explicit))
                )
            ratio = f"{arena / lb:.3f}" if lb else "-"
            saving = f"{1 - arena / naive:.0%}" if naive else "-"
            table.add_row(
                name, planner, f"{arena:,}", f"{lb:,}", ratio, f"{naive:,}", saving, f"{secs:.2f}"
            )
        table.add_section()
    Console(width=140).print(table)


if __name__ == "__main__":
    main()

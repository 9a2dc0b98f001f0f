"""How far the program encodings' plans are from a plan known to exist.

A challenging instance written as an ``.rx`` program (``planning_instances.program_text``)
keeps its lifetimes' order when ReorderForMemory leaves the written order alone (H-K): the
program's large buffers then conflict exactly as the raw instance's do, only their times
are program points instead of the raw times. So any plan of the raw instance, offset by
offset, is a plan of the program's large buffers. ``best`` finds raw plans that the
program's own search, without the raw time widths, does not: this command maps ``best``'s
raw plan onto the program's large buffers, checks it with the independent checker (a
plan is "known" only when it passes), and prints it beside what PlanMemory plans for the
program (all its buffers, small ones included), both over the large buffers' max-live.

Usage::

    python benchmarks/known_plans.py                  # H, I, J, K
    python benchmarks/known_plans.py --only I,J --time-limit 5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planners import run_program  # noqa: E402
from planning_instances import (  # noqa: E402
    SMALL,
    minimalloc_instances,
    planned_buffers,
    program_module,
    read_instance,
)

from relaxc.passes.planning.checker import check_plan  # noqa: E402
from relaxc.passes.planning.model import Buffer, lower_bound  # noqa: E402
from relaxc.passes.planning.planners import plan_buffers  # noqa: E402


def transferred(raw: list[Buffer], program: list[Buffer], offsets: list[int]) -> list[int] | None:
    """``offsets`` of ``raw`` for the large buffers of ``program`` (named ``b{i}_storage``
    after raw buffer ``i``), or None when some raw buffer has no program buffer."""
    by_name = {f"b{i}_storage": o for i, o in enumerate(offsets)}
    large = [b for b in program if b.size > SMALL]
    if len(large) != len(raw) or any(b.name not in by_name for b in large):
        return None
    return [by_name[b.name] for b in large]


def row(name: str, path: Path, time_limit: float) -> list[str]:
    raw = read_instance(path)
    t0 = time.process_time()
    plan = plan_buffers(raw, "best", time_limit=time_limit)
    raw_s = time.process_time() - t0
    raw_height = max(o + b.size for o, b in zip(plan.offsets, raw))
    module = program_module(raw, f"{name}.rx")
    program = planned_buffers(module)
    large = [b for b in program if b.size > SMALL]
    lb = lower_bound(large)
    mapped = transferred(raw, program, list(plan.offsets))
    if mapped is None:
        known = "reordered"
    else:
        height = max((o + b.size for o, b in zip(mapped, large)), default=0)
        problems = check_plan(large, mapped, height)
        known = f"{height / lb:.4f}" if not problems else "INVALID"
    rx = run_program(module, "best", time_limit)
    return [
        name,
        f"{len(large):,}",
        f"{lb:,}",
        f"{raw_height / lb:.4f}{'*' if plan.optimal else ''}",
        f"{raw_s:.2f}",
        known,
        f"{rx.size / lb:.4f}{'*' if rx.optimal else ''}" if rx.valid else "FAIL",
        f"{rx.seconds:.2f}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="H,I,J,K", help="instances, comma-separated")
    parser.add_argument("--time-limit", type=float, default=2.0, help="best's time limit (s)")
    args = parser.parse_args(argv)
    if args.time_limit < 0:
        parser.error("--time-limit must not be negative")
    paths = dict(minimalloc_instances())
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in paths]
    if unknown:
        parser.error(f"unknown instance {', '.join(unknown)}; expected some of {', '.join(paths)}")
    table = Table(
        title=f"Program encodings against a known plan (best: {args.time_limit:g} s; "
        "over the large buffers' max-live, * proven optimal; CPU s)"
    )
    for col in (
        "instance",
        "large buffers",
        "max-live",
        "best, raw",
        "s",
        "raw plan on .rx",
        "best, .rx",
        "s",
    ):
        table.add_column(col, justify="left" if col == "instance" else "right")
    failed = False
    for name in names:
        cells = row(name, paths[name], args.time_limit)
        failed = failed or "INVALID" in cells or "FAIL" in cells
        table.add_row(*cells)
    Console(width=120).print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

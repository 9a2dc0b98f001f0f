"""Benchmark of the memory planners on MiniMalloc's instances and a synthetic chain.

For every instance in ``shared/benchmarks/minimalloc`` (``challenging/*.csv`` and
``examples/input.12.csv``; CSV header ``id,lower,upper,size``, lifetimes half-open
``[lower, upper)``) it runs every planner and prints the arena, the arena relative to the
lower bound (the most bytes live at once) and the wall-clock seconds. Every plan is
validated with the independent checker; an invalid one prints FAIL and the command
exits with status 1.

A synthetic chain-like program of 100,000 buffers (each live for a few steps, so each
conflicts with a handful of others) times the greedy planners at scale (the bar for
greedy-size is under 5 s).

Usage::

    python benchmarks/planners.py [--time-limit 10] [--only A,B] [--planners best]
                                  [--seed 0] [--chain 100000] [--verbose]
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.model import Buffer, lower_bound
from relaxc.passes.planning.planners import PLANNERS, plan_best, plan_buffers

def _find_data() -> Path:
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared/benchmarks/minimalloc"
        if candidate.is_dir():
            return candidate
    return Path("/work/shared/benchmarks/minimalloc")


DATA = _find_data()


def read_instance(path: Path) -> list[Buffer]:
    with path.open(newline="") as f:
        return [Buffer(int(row["lower"]), int(row["upper"]), int(row["size"]), 1, row["id"])
                for row in csv.DictReader(f)]


def instances() -> list[tuple[str, Path]]:
    files = sorted((DATA / "challenging").glob("*.csv")) + [DATA / "examples" / "input.12.csv"]
    # "A.1048576.csv" -> "A"; "input.12.csv" -> "input.12"
    return [(p.name.split(".")[0] if p.parent.name == "challenging" else p.stem, p) for p in files]


def chain(n: int, seed: int = 0) -> list[Buffer]:
    """A chain-like program: buffer i is defined at step i and dies a few steps later;
    sizes of a few kinds, aligned to 64; one in a hundred lives ten times longer."""
    rng = random.Random(seed)
    sizes = [64 * k for k in (1, 2, 4, 16, 64, 256, 1024)]
    out = []
    for i in range(n):
        life = 1 + rng.randrange(4) if rng.random() > 0.01 else 10 + rng.randrange(30)
        out.append(Buffer(i, i + life, rng.choice(sizes) + rng.randrange(4) * 64, 64, f"t{i}"))
    return out


def run(buffers: list[Buffer], planner: str, time_limit: float, seed: int,
        trace: list[str] | None) -> tuple[int, float, str, bool]:
    t = time.perf_counter()
    if planner == "best":
        plan = plan_best(buffers, time_limit=time_limit, seed=seed, trace=trace)
    else:
        plan = plan_buffers(buffers, planner, time_limit=time_limit, seed=seed)
    seconds = time.perf_counter() - t
    problems = check_plan(buffers, plan.offsets, plan.size)
    return plan.size, seconds, plan.algorithm, not problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds for 'best' per instance")
    ap.add_argument("--only", default="", help="comma-separated instance names (A..K, input.12, chain)")
    ap.add_argument("--planners", default=",".join(PLANNERS), help="comma-separated planners")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chain", type=int, default=100_000, help="buffers in the synthetic chain (0: skip)")
    ap.add_argument("--verbose", action="store_true", help="print what 'best' did")
    args = ap.parse_args(argv)
    planners = [p for p in args.planners.split(",") if p]
    for p in planners:
        if p not in PLANNERS:
            ap.error(f"unknown planner {p!r}")
    only = {x for x in args.only.split(",") if x}
    cases: list[tuple[str, list[Buffer]]] = []
    for name, path in instances():
        if not only or name in only:
            cases.append((name, read_instance(path)))
    if args.chain and (not only or "chain" in only):
        cases.append((f"chain-{args.chain // 1000}k", chain(args.chain, args.seed)))

    console = Console()
    table = Table(title=f"Memory planners (best: time limit {args.time_limit:g} s, seed {args.seed})")
    table.add_column("instance")
    table.add_column("buffers", justify="right")
    table.add_column("lower bound", justify="right")
    for p in planners:
        table.add_column(f"{p}\narena", justify="right")
        table.add_column("xLB", justify="right")
        table.add_column("s", justify="right")
    failures = 0
    at_bound: list[str] = []
    winners: list[str] = []
    for name, buffers in cases:
        lb = lower_bound(buffers)
        row = [name, str(len(buffers)), str(lb)]
        for p in planners:
            trace: list[str] | None = [] if args.verbose and p == "best" else None
            arena, seconds, algorithm, ok = run(buffers, p, args.time_limit, args.seed, trace)
            if trace:
                console.print(f"[bold]{name}[/bold] best:", *trace, sep="\n  ")
            ratio = arena / lb if lb else 1.0
            row += [str(arena) if ok else f"[red]FAIL[/red] {arena}", f"{ratio:.3f}", f"{seconds:.2f}"]
            failures += not ok
            if p == "best":
                winners.append(f"{name}: {algorithm}")
                if arena == lb:
                    at_bound.append(name)
        table.add_row(*row)
        Console(stderr=True).print(f"{name}: done", style="dim")
    Console(width=max(console.width, 44 + 27 * len(planners))).print(table)
    if "best" in planners:
        print("best reaches the lower bound on: " + (", ".join(at_bound) or "none"))
        print("best's winning method: " + "; ".join(winners))
    if failures:
        print(f"FAIL: {failures} invalid plan(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

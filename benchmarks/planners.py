"""Benchmark of the memory planners: MiniMalloc's instances, raw and as programs, and
random interval sets from 10^4 to 10^6 buffers at three densities.

For every instance it runs every planner and prints the arena relative to the lower bound
(the most bytes live at once), whether the plan is proven optimal (``*``), and the CPU
seconds (``time.process_time``; the machine may be shared, and CPU time is what the
planners' budgets stand for). For ``best`` it also prints the proven lower bound
relative to max-live when the search raised it, and ``clock`` if the safety clock (not the
work budget) stopped it. Every plan is validated with the independent checker; an invalid
one prints FAIL and the command exits with status 1.

Instances (see ``benchmarks/planning_instances.py``):

* ``A`` .. ``K``, ``input.12``: ``shared/benchmarks/minimalloc`` (CSV, half-open lifetimes);
* ``A.rx`` .. ``K.rx``: the same written as ``.rx`` programs (each buffer a ``zeros``
  folded at its end into a one-element accumulator: 64-byte tensors mixed in);
* ``rand-10k-d100`` etc.: random interval sets (n buffers, about d live at a time, sizes
  log-uniform 64 B..64 KiB, aligned to 64).

``--cpsat SECONDS`` adds OR-Tools CP-SAT (optional: ``pip install relaxc[cpsat]``) on the
MiniMalloc instances, warm-started from best's plan: its status, arena and proven bound.

Usage::

    python benchmarks/planners.py                      # everything (takes a while)
    python benchmarks/planners.py --quick              # random sets of 10^4 and 10^5 only
    python benchmarks/planners.py --sizes 4 --densities 100   # fewer random sets
    python benchmarks/planners.py --only A,B,A.rx --planners best --verbose
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planning_instances import (
    minimalloc_instances,
    program_encoding,
    random_intervals,
    read_instance,
)  # noqa: E402

from relaxc.passes.planning import cpsat  # noqa: E402
from relaxc.passes.planning.checker import check_plan  # noqa: E402
from relaxc.passes.planning.model import Buffer, Plan, lower_bound  # noqa: E402
from relaxc.passes.planning.planners import PLANNERS, plan_best, plan_buffers  # noqa: E402


def run(
    buffers: list[Buffer], planner: str, time_limit: float, seed: int, trace: list[str] | None
) -> tuple[Plan, float, bool]:
    t = time.process_time()
    if planner == "best":
        plan = plan_best(buffers, time_limit=time_limit, seed=seed, trace=trace)
    else:
        plan = plan_buffers(buffers, planner, time_limit=time_limit, seed=seed)
    seconds = time.process_time() - t
    return plan, seconds, not check_plan(buffers, plan.offsets, plan.size)


def cases(args: argparse.Namespace) -> list[tuple[str, object]]:
    """(name, a function making the buffers), in table order, filtered by --only."""
    only = {x for x in args.only.split(",") if x}
    out: list[tuple[str, object]] = []
    files = minimalloc_instances()
    if not args.no_raw:
        out += [(name, (lambda p=p: read_instance(p))) for name, p in files]
    if not args.no_programs:
        out += [
            (f"{name}.rx", (lambda p=p: program_encoding(read_instance(p))))
            for name, p in files
            if not name.startswith("input")
        ]
    for e in (int(x) for x in args.sizes.split(",") if x):
        for d in (int(x) for x in args.densities.split(",") if x):
            n = 10**e
            out.append(
                (f"rand-{n // 1000}k-d{d}", (lambda n=n, d=d: random_intervals(n, d, args.seed)))
            )
    return [(name, make) for name, make in out if not only or name in only]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--time-limit",
        type=float,
        default=2.0,
        help="seconds for 'best' (its work budget; default: PlanMemory's default)",
    )
    ap.add_argument(
        "--only", default="", help="comma-separated instance names (A, A.rx, rand-10k-d100, ...)"
    )
    ap.add_argument("--planners", default=",".join(PLANNERS), help="comma-separated planners")
    ap.add_argument(
        "--sizes",
        default="4,5,6",
        help="random sets: powers of ten of the buffer count ('' for none)",
    )
    ap.add_argument(
        "--densities", default="10,100,2500", help="random sets: buffers live at a time"
    )
    ap.add_argument(
        "--quick", action="store_true", help="random sets of 10^4 and 10^5 buffers only"
    )
    ap.add_argument("--no-raw", action="store_true", help="skip the MiniMalloc files as given")
    ap.add_argument("--no-programs", action="store_true", help="skip their program encodings")
    ap.add_argument(
        "--cpsat",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="also run CP-SAT on the MiniMalloc instances for this long (0: skip)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="print what 'best' did")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes = ",".join(x for x in args.sizes.split(",") if x and int(x) <= 5)
    planners = [p for p in args.planners.split(",") if p]
    for p in planners:
        if p not in PLANNERS:
            ap.error(f"unknown planner {p!r}")
    if args.cpsat and not cpsat.available():
        ap.error("--cpsat needs ortools (pip install relaxc[cpsat])")

    console = Console()
    err = Console(stderr=True)
    table = Table(
        title=f"Memory planners (best: time limit {args.time_limit:g} s, seed {args.seed}; "
        f"arena / max-live, * = proven optimal, CPU s)"
    )
    table.add_column("instance")
    table.add_column("buffers", justify="right")
    table.add_column("max-live", justify="right")
    for p in planners:
        table.add_column(f"{p}\n/LB", justify="right")
        table.add_column("s", justify="right")
    if "best" in planners:
        table.add_column("best\nbound/LB", justify="right")
    if args.cpsat:
        table.add_column("CP-SAT\n/LB", justify="right")
        table.add_column("bound\n/LB", justify="right")
        table.add_column("s", justify="right")
    failures = 0
    summary: list[str] = []
    for name, make in cases(args):
        buffers = make()
        lb = lower_bound(buffers)
        row = [name, f"{len(buffers):,}", f"{lb:,}"]
        best_plan: Plan | None = None
        for p in planners:
            trace: list[str] | None = [] if args.verbose and p == "best" else None
            plan, seconds, ok = run(buffers, p, args.time_limit, args.seed, trace)
            if trace:
                err.print(f"[bold]{name}[/bold] best:", *trace, sep="\n  ")
            ratio = plan.size / lb if lb else 1.0
            cell = f"{ratio:.4f}{'*' if plan.optimal else ' '}"
            if plan.stopped_by_clock:
                cell += " clock"
            row += [cell if ok else f"[red]FAIL[/red] {plan.size}", f"{seconds:.2f}"]
            failures += not ok
            if p == "best":
                best_plan = plan
                summary.append(
                    f"{name}: {plan.size:,} {plan.algorithm}{' optimal' if plan.optimal else ''}"
                )
        if best_plan is not None:
            row.append(f"{best_plan.proven_bound / lb:.4f}" if lb else "-")
        if args.cpsat:
            if name[0].isupper() or name.startswith("input"):
                ref = cpsat.solve(
                    buffers,
                    time_limit=args.cpsat,
                    upper=best_plan.size if best_plan else None,
                    hint=best_plan.offsets if best_plan else None,
                )
                good = ref.offsets is not None and not check_plan(buffers, ref.offsets, ref.size)
                row += [
                    f"{ref.size / lb:.4f}{'*' if ref.status == 'OPTIMAL' else ' '}"
                    if good
                    else ref.status,
                    f"{ref.bound / lb:.4f}",
                    f"{ref.seconds:.1f}",
                ]
            else:
                row += ["-", "-", "-"]
        table.add_row(*row)
        err.print(" | ".join(row), style="dim")  # as it goes: the table comes at the end
    Console(
        width=max(console.width, 40 + 18 * len(planners) + 12 + (30 if args.cpsat else 0))
    ).print(table)
    if summary:
        print("best: " + "; ".join(summary))
    if failures:
        print(f"FAIL: {failures} invalid plan(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

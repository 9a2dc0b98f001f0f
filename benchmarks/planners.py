"""Benchmark of the memory planners: MiniMalloc's instances, raw and as programs, and
random interval sets from 10^4 to 10^6 buffers at three densities.

For every instance it runs every planner and prints the arena relative to the lower bound
(the most bytes live at once), whether the plan is proven optimal (``*``), and the CPU
seconds (``time.process_time``; the machine may be shared, and CPU time is what the
planners' budgets stand for). For ``best`` it also prints the proven lower bound
relative to max-live when the search raised it, and ``clock`` if the safety clock (not the
work budget) stopped it. The peer, side by side: MiniMalloc (Moffitt, ASPLOS 2023) fits
every challenging instance in the capacity its file name gives (1,048,576 bytes), so its
columns show that capacity over the lower bound and ``best``'s arena over it (below 1:
``best`` needs less; for the ``.rx`` encodings, whose arena holds 64 bytes of accumulator
more, against the raw instance's capacity; where ReorderForMemory reorders a program, A-G,
its max-live drops and so does the ratio: MiniMalloc keeps the order). Every plan is
validated with the independent checker; an invalid one prints FAIL and the command exits
with status 1.

Instances (see ``benchmarks/planning_instances.py``):

* ``A`` .. ``K``, ``input.12``: ``shared/benchmarks/minimalloc`` (CSV, half-open lifetimes);
* ``A.rx`` .. ``K.rx``: the same written as ``.rx`` programs (each buffer a ``zeros``
  folded at its end into a 0-d accumulator: 64-byte tensors mixed in), parsed and run
  through the default ``vm`` pipeline: the figures are PlanMemory's as ``relaxc report``
  gives them (its arena, lower bound and proven bound; the time is the pass's, liveness
  included; its ``check`` validates the plan);
* ``rand-10k-d100`` etc.: random interval sets (n buffers, about d live at a time, sizes
  log-uniform 64 B..64 KiB, aligned to 64).

A second table asks MiniMalloc's own question of ``best``: each challenging instance (and
its ``.rx``, 64 bytes more for the accumulator) given its capacity, as ``relaxc build
--max-arena`` gives it (``PlanMemory.capacity``): fits or not, the arena, the time.

``--minimalloc BINARY`` runs the peer itself (a solver built from
github.com/google/minimalloc; see ``minimalloc_peer.py``), its plans checked by the
independent checker: in the first table minimizing (its ``--minimize_capacity``
bisection from greedy-size's height, under the same time limit as ``best``), in the
second at each capacity with ``--minimalloc-timeout`` seconds (default 10).

``--cpsat SECONDS`` adds OR-Tools CP-SAT (optional: ``pip install relaxc[cpsat]``) on the
MiniMalloc instances, warm-started from best's plan: its status, arena and proven bound.

Usage::

    python benchmarks/planners.py                      # everything (takes a while)
    python benchmarks/planners.py --quick              # random sets of 10^4 and 10^5 only
    python benchmarks/planners.py --sizes 4 --densities 100   # fewer random sets
    python benchmarks/planners.py --only A,B,A.rx --planners best --verbose
    python benchmarks/planners.py --planners best --sizes '' --minimalloc ../minimalloc
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from minimalloc_peer import PeerRun, solve, usable  # noqa: E402
from planning_instances import (
    SMALL,
    minimalloc_instances,
    plan_memory_pass,
    planned_buffers,
    program_module,
    random_intervals,
    read_instance,
)  # noqa: E402

from relaxc.ir.diagnostics import InternalError  # noqa: E402
from relaxc.ir.nodes import Module  # noqa: E402
from relaxc.cli.report.analysis import memory_report  # noqa: E402
from relaxc.passes.planning import cpsat  # noqa: E402
from relaxc.passes.planning.checker import check_plan  # noqa: E402
from relaxc.passes.planning.model import Buffer, Plan, lower_bound  # noqa: E402
from relaxc.passes.planning.planners import PLANNERS, plan_best, plan_buffers  # noqa: E402


def run(
    buffers: list[Buffer],
    planner: str,
    time_limit: float,
    seed: int,
    trace: list[str] | None,
    capacity: int = 0,
) -> tuple[Plan, float, bool]:
    t = time.process_time()
    if planner == "best":
        plan = plan_best(buffers, time_limit=time_limit, seed=seed, trace=trace, capacity=capacity)
    else:
        plan = plan_buffers(buffers, planner, time_limit=time_limit, seed=seed)
    seconds = time.process_time() - t
    return plan, seconds, not check_plan(buffers, plan.offsets, plan.size)


@dataclass(frozen=True)
class Result:
    """What one planner gave on one instance."""

    size: int
    lower_bound: int
    proven_bound: int
    optimal: bool
    stopped_by_clock: bool
    seconds: float
    valid: bool
    algorithm: str = ""
    plan: Plan | None = None  # the plan of raw buffers (None for programs)


def run_raw(
    buffers: list[Buffer],
    planner: str,
    time_limit: float,
    seed: int,
    trace: list[str] | None,
    capacity: int = 0,
) -> Result:
    plan, seconds, ok = run(buffers, planner, time_limit, seed, trace, capacity)
    lb = lower_bound(buffers)
    return Result(
        plan.size,
        lb,
        plan.proven_bound,
        plan.optimal,
        plan.stopped_by_clock,
        seconds,
        ok,
        plan.algorithm,
        plan,
    )


def run_program(module: Module, planner: str, time_limit: float, capacity: int = 0) -> Result:
    """PlanMemory on ``module`` (see :func:`planning_instances.program_module`), read off
    the memory report as ``relaxc report`` prints it (``capacity``: as ``--max-arena``
    sets it)."""
    t = time.process_time()
    try:
        planned = plan_memory_pass(planner, time_limit, capacity).run(module)
    except InternalError:  # PlanMemory's check found the plan invalid
        return Result(0, 0, 0, False, False, time.process_time() - t, False)
    seconds = time.process_time() - t
    rep = next(r for r in memory_report(planned) if r.name == "main")
    return Result(
        rep.arena_bytes,
        rep.lower_bound,
        rep.proven_bound,
        rep.optimal,
        rep.clock_stopped,
        seconds,
        True,
        planner,
    )


def minimalloc_capacities() -> dict[str, int]:
    """MiniMalloc's capacity for each challenging instance, from its file name
    (``A.1048576.csv``): the arena MiniMalloc fits it in."""
    out = {}
    for name, path in minimalloc_instances():
        parts = path.name.split(".")
        if path.parent.name == "challenging" and len(parts) == 3 and parts[1].isdigit():
            out[name] = int(parts[1])
    return out


def capacity_table(args: argparse.Namespace) -> Table | None:
    """The second table: MiniMalloc's own question, asked of both (None: --no-capacity)."""
    if args.no_capacity:
        return None
    t = Table(
        title=f"Given the capacity, as MiniMalloc is (best: time limit {args.time_limit:g} s, "
        "PlanMemory.capacity / --max-arena; CPU s)"
    )
    for col in ("instance", "capacity", "best arena", "fits", "s"):
        t.add_column(col, justify="left" if col == "instance" else "right")
    if args.minimalloc is not None:
        t.add_column(f"MiniMalloc\n(timeout {args.minimalloc_timeout:g} s)", justify="right")
        t.add_column("s", justify="right")
        t.add_column("best s /\nMiniMalloc s", justify="right")
    return t


def minimized_cells(mm: PeerRun, best: Result, lb: int) -> list[str]:
    """MiniMalloc's minimized height over max-live, its seconds, and best's over it."""
    if mm.status != "found" or mm.height is None:
        return [mm.status, f"{mm.seconds:.2f}", "-"]
    ratio = f"{best.size / mm.height:.4f}" if best.valid else "-"
    return [f"{mm.height / lb:.4f}" if lb else "-", f"{mm.seconds:.2f}", ratio]


def capacity_row(name: str, cap: int, res: Result, mm: PeerRun | None) -> list[str]:
    fits = res.valid and res.size <= cap
    row = [
        name,
        f"{cap:,}",
        f"{res.size:,}" if res.valid else f"[red]FAIL[/red] {res.size}",
        "yes" if fits else f"no ({res.size / cap:.4f})",
        f"{res.seconds:.2f}",
    ]
    if mm is not None:
        status = {"found": "yes", "infeasible": "no (proven)"}.get(mm.status, mm.status)
        both = fits and mm.status == "found" and mm.seconds > 0
        row += [status, f"{mm.seconds:.2f}", f"{res.seconds / mm.seconds:.2f}" if both else "-"]
    return row


def cases(args: argparse.Namespace) -> list[tuple[str, object]]:
    """(name, a function making the buffers), in table order, filtered by --only."""
    only = {x for x in args.only.split(",") if x}
    out: list[tuple[str, object]] = []
    files = minimalloc_instances()
    if not args.no_raw:
        out += [(name, (lambda p=p: read_instance(p))) for name, p in files]
    if not args.no_programs:
        out += [
            (f"{name}.rx", (lambda p=p, n=name: program_module(read_instance(p), f"{n}.rx")))
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
    ap.add_argument(
        "--no-capacity",
        action="store_true",
        help="skip the second table: best given MiniMalloc's capacity, as MiniMalloc is",
    )
    ap.add_argument(
        "--minimalloc",
        type=Path,
        metavar="BINARY",
        help="MiniMalloc's solver (built from github.com/google/minimalloc): run it side by "
        "side, minimizing under the same time limit, and at the capacities of the second table",
    )
    ap.add_argument(
        "--minimalloc-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="MiniMalloc's --timeout at each capacity of the second table (default 10)",
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
    if args.minimalloc is not None:
        why = usable(args.minimalloc)
        if why:
            ap.error(f"--minimalloc: {why}")
    if not args.minimalloc_timeout > 0:
        ap.error("--minimalloc-timeout must be a positive number of seconds")

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
        # The peer: MiniMalloc's capacity for the challenging instances (in their file
        # names, 1,048,576: it fits every one in it), and best's arena over it.
        table.add_column("MiniMalloc\n/LB", justify="right")
        table.add_column("best /\nMiniMalloc", justify="right")
        if args.minimalloc is not None:
            # The peer minimizing: its own bisection under the same time limit, from
            # greedy-size's height (a capacity that holds a plan).
            table.add_column("MiniMalloc\nminimized\n/LB", justify="right")
            table.add_column("s", justify="right")
            table.add_column("best /\nminimized", justify="right")
    capacities = minimalloc_capacities()
    if args.cpsat:
        table.add_column("CP-SAT\n/LB", justify="right")
        table.add_column("bound\n/LB", justify="right")
        table.add_column("s", justify="right")
    at_capacity = capacity_table(args)
    failures = 0
    summary: list[str] = []
    for name, make in cases(args):
        made = make()
        program = isinstance(made, Module)
        buffers = planned_buffers(made) if program else made
        lb = lower_bound(buffers)
        row = [name, f"{len(buffers):,}", f"{lb:,}"]
        best: Result | None = None
        for p in planners:
            trace: list[str] | None = [] if args.verbose and p == "best" else None
            if program:
                res = run_program(made, p, args.time_limit)
                if trace is not None:  # the same buffers, the same plan: only for the trace
                    plan_best(buffers, time_limit=args.time_limit, seed=args.seed, trace=trace)
            else:
                res = run_raw(buffers, p, args.time_limit, args.seed, trace)
            if trace:
                err.print(f"[bold]{name}[/bold] best:", *trace, sep="\n  ")
            ratio = res.size / res.lower_bound if res.lower_bound else 1.0
            cell = f"{ratio:.4f}{'*' if res.optimal else ' '}"
            if res.stopped_by_clock:
                cell += " clock"
            row += [cell if res.valid else f"[red]FAIL[/red] {res.size}", f"{res.seconds:.2f}"]
            failures += not res.valid
            if p == "best":
                best = res
                summary.append(
                    f"{name}: {res.size:,} {res.algorithm}{' optimal' if res.optimal else ''}"
                )
        peer = capacities.get(name.removesuffix(".rx"))  # MiniMalloc's capacity, if any
        if best is not None:
            row.append(f"{best.proven_bound / best.lower_bound:.4f}" if best.lower_bound else "-")
            if peer and best.lower_bound and best.valid:
                row += [f"{peer / best.lower_bound:.4f}", f"{best.size / peer:.4f}"]
            else:
                row += ["-", "-"]
            if args.minimalloc is not None:
                if peer:
                    upper = plan_buffers(buffers, "greedy-size").size
                    mm = solve(args.minimalloc, buffers, upper, args.time_limit, minimize=True)
                    failures += mm.status == "invalid"
                    row += minimized_cells(mm, best, lb)
                else:
                    row += ["-", "-", "-"]
        if args.cpsat:
            if name[0].isupper() or name.startswith("input"):
                hint = best.plan if best is not None and best.plan is not None else None
                ref = cpsat.solve(
                    buffers,
                    time_limit=args.cpsat,
                    upper=best.size if best else None,
                    hint=hint.offsets if hint else None,
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
        if at_capacity is not None and "best" in planners and peer:
            cap = peer + (SMALL if program else 0)  # a program's arena holds its accumulator
            if program:
                res = run_program(made, "best", args.time_limit, cap)
            else:
                res = run_raw(buffers, "best", args.time_limit, args.seed, None, cap)
            failures += not res.valid
            mm = (
                solve(args.minimalloc, buffers, cap, args.minimalloc_timeout)
                if args.minimalloc
                else None
            )
            failures += mm is not None and mm.status == "invalid"
            cells = capacity_row(name, cap, res, mm)
            at_capacity.add_row(*cells)
            err.print(" | ".join(cells), style="dim")
    Console(
        width=max(
            console.width,
            40
            + 18 * len(planners)
            + 36
            + (30 if args.cpsat else 0)
            + (36 if args.minimalloc else 0),
        )
    ).print(table)
    if at_capacity is not None and at_capacity.row_count:
        Console(width=max(console.width, 100)).print(at_capacity)
    if summary:
        print("best: " + "; ".join(summary))
    if failures:
        print(f"FAIL: {failures} invalid plan(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

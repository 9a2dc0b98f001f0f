"""How the compiler's time and memory grow with the program: peak RSS of ``relaxc build``,
and the time of every step and pass at growing sizes.

Two tables:

1. **relaxc build** of the generated modules of ``generate.layered_program(N)`` (10k, 30k
   and 100k bindings by default): the command as a user runs it (``relaxc build FILE -o
   FILE.rxb -q``, one subprocess each), its wall time and its peak resident memory (the
   child's own ``ru_maxrss``, from ``os.wait4``), and both per binding relative to the
   smallest size (1.00: linear).
2. **Each step** (parse, verify, every pass of the vm pipeline, each followed by the
   verifier as ``relaxc build`` runs it, the row "+ verify", then the report and the VM
   code) on ``chain_program(N)`` (a chain of
   in-place ops, the shape that showed ComputeInPlace quadratic) and ``layered_program(N)``
   at 1k, 4k and 16k statements by default: seconds at each size, and the growth: time at
   the largest size over time at the smallest, divided by the ratio of the sizes (1.0:
   linear; 4.0 at 1k -> 16k would be quadratic). Each size runs in a fresh subprocess.

Usage::

    python benchmarks/build_scale.py [--sizes 10000,30000,100000] [--steps 1000,4000,16000]
                                     [--skip-build] [--skip-steps]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent


def _generators() -> dict[str, Callable[[int], str]]:
    spec = importlib.util.spec_from_file_location("_relaxc_bench_generate", HERE / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"chain": module.chain_program, "layered": module.layered_program}


def _wait_peak(cmd: list[str]) -> tuple[float, int, bytes]:
    """Run ``cmd``; its wall time, its own peak RSS (bytes) and its stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout is not None else b""
    err = proc.stderr.read() if proc.stderr is not None else b""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err.decode()}")
    return wall, usage.ru_maxrss * 1024, out


def build_rows(sizes: list[int], folder: Path) -> list[dict]:
    gen = _generators()["layered"]
    relaxc = [sys.executable, "-m", "relaxc.cli.main"]
    rows = []
    for n in sizes:
        src = folder / f"layered{n}.rx"
        src.write_text(gen(n), encoding="utf-8")
        wall, peak, _ = _wait_peak([*relaxc, "build", str(src), "-o", str(src) + "b", "-q"])
        rows.append({"bindings": n, "wall": wall, "peak": peak})
    return rows


def _child(path: str) -> None:
    """The steps of ``relaxc build`` on one file, each timed; JSON on stdout."""
    import resource

    from relaxc.backend.vm import compile_module
    from relaxc.cli.gc_pause import gc_paused
    from relaxc.frontend.parser import parse_module
    from relaxc.ir.verifier import verify_module
    from relaxc.passes.assemble import assemble_pipeline
    from relaxc.cli.report.analysis import memory_report

    text = Path(path).read_text(encoding="utf-8")
    parse_module("")  # the parser's tables, outside the timings
    steps: list[tuple[str, float, int]] = []

    def timed(name: str, fn: Callable):
        t0 = time.perf_counter()
        out = fn()
        high = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        steps.append((name, time.perf_counter() - t0, high))
        return out

    with gc_paused():
        module = timed("parse", lambda: parse_module(text, path))
        types = timed("verify", lambda: verify_module(module))
        for p in assemble_pipeline("vm", None, (), ()):
            module = timed(p.name, lambda: p.run(module, types))
            types = timed("  + verify", lambda: verify_module(module))
    timed("report", lambda: memory_report(module))
    with gc_paused():
        timed("VM code", lambda: compile_module(module, {}, types))
    print(json.dumps(steps))


def step_rows(kind: str, sizes: list[int], folder: Path) -> dict[int, list]:
    gen = _generators()[kind]
    out = {}
    for n in sizes:
        src = folder / f"{kind}{n}.rx"
        src.write_text(gen(n), encoding="utf-8")
        _, _, stdout = _wait_peak([sys.executable, __file__, "--child", str(src)])
        out[n] = json.loads(stdout)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,30000,100000", help="bindings, for relaxc build")
    ap.add_argument("--steps", default="1000,4000,16000", help="statements, for the steps")
    ap.add_argument("--skip-build", action="store_true", help="leave out table 1")
    ap.add_argument("--skip-steps", action="store_true", help="leave out table 2")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    steps = sorted({int(s) for s in args.steps.split(",") if s.strip()})
    if not sizes or not steps or min(sizes + steps) < 10:
        ap.error("need sizes of at least 10")

    from rich.console import Console
    from rich.table import Table

    console = Console()
    with tempfile.TemporaryDirectory(prefix="relaxc-scale-") as tmp:
        folder = Path(tmp)
        if not args.skip_build:
            rows = build_rows(sizes, folder)
            t = Table(title="relaxc build of layered_program(N): wall time and peak RSS")
            for col in ("bindings", "wall s", "peak RSS MiB", "time/binding", "RSS/binding"):
                t.add_column(col, justify="right")
            b = rows[0]
            for r in rows:
                t.add_row(
                    f"{r['bindings']:,}",
                    f"{r['wall']:.1f}",
                    f"{r['peak'] / 2**20:,.0f}",
                    f"{(r['wall'] / r['bindings']) / (b['wall'] / b['bindings']):.2f}",
                    f"{(r['peak'] / r['bindings']) / (b['peak'] / b['bindings']):.2f}",
                )
            console.print(t)
        if not args.skip_steps:
            for kind in ("chain", "layered"):
                data = step_rows(kind, steps, folder)
                t = Table(title=f"each step on {kind}_program(N): seconds, and growth")
                t.add_column("step")
                for n in steps:
                    t.add_column(f"{n:,}", justify="right")
                t.add_column(f"growth {steps[0]:,}->{steps[-1]:,}", justify="right")
                t.add_column("peak RSS MiB", justify="right")
                names = [name for name, _, _ in data[steps[0]]]
                scale = steps[-1] / steps[0]
                for k, name in enumerate(names):
                    secs = [data[n][k][1] for n in steps]
                    growth = (secs[-1] / secs[0]) / scale if secs[0] > 1e-4 else float("nan")
                    t.add_row(
                        name,
                        *(f"{s:.3f}" for s in secs),
                        "-" if growth != growth else f"{growth:.2f}",
                        f"{data[steps[-1]][k][2] / 2**20:,.0f}",
                    )
                totals = [sum(s for _, s, _ in data[n]) for n in steps]
                t.add_row(
                    "total",
                    *(f"{s:.3f}" for s in totals),
                    f"{(totals[-1] / totals[0]) / scale:.2f}",
                    "",
                )
                console.print(t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

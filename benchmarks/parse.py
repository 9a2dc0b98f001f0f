"""Benchmark of the front end: parse, verify and print of large generated modules.

For each size N (bindings in @main, from ``generate.layered_program(N)``) it times, best of
``--repeat`` runs with :func:`time.perf_counter` (the runs go round-robin over the sizes):

* parse   -- ``parse_module(text)``: lexing, LALR parsing and building the IR nodes;
* verify  -- ``verify_module(module)``: every check, and type inference of every value;
* print   -- ``print_module(module)``: the canonical text.

and reports parse+verify throughput in bindings per second, plus a linearity column: the
parse+verify time per binding relative to the smallest size (1.00 means perfectly linear
growth; 1.10 means a binding costs 10% more in the bigger module). Generating the text and
building the parser's tables (once per process) are not timed.

Usage::

    python benchmarks/parse.py [--sizes 10000,30000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import time
from pathlib import Path
from typing import Any, Callable


def _load_generator() -> Callable[[int], str]:
    """``layered_program`` from the sibling generate.py (benchmarks/ is not a package)."""
    path = Path(__file__).resolve().with_name("generate.py")
    spec = importlib.util.spec_from_file_location("_relaxc_bench_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.layered_program


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall time of one call of ``fn`` (after a full garbage collection), and its result."""
    gc.collect()
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def measure(
    sizes: list[int], repeat: int, generate: Callable[[int], str]
) -> list[dict[str, float]]:
    """Best-of-``repeat`` times of parse, verify and print of each generated module.

    The runs go round-robin over the sizes (all sizes once, ``repeat`` times), so that a
    burst of load on the machine hits every size alike rather than skewing one of them.
    """
    from relaxc.frontend.parser import parse_module
    from relaxc.frontend.printer import print_module
    from relaxc.ir.verifier import verify_module

    texts = {n: generate(n) for n in sizes}
    parse_module("")  # builds the LALR tables (once per process) outside the timings
    best: dict[tuple[int, str], float] = {}
    bindings: dict[int, int] = {}
    for _ in range(repeat):
        for n in sizes:
            module = out = None
            times = {}
            times["parse"], module = _timed(lambda: parse_module(texts[n], "<bench>"))
            times["verify"], _ = _timed(lambda: verify_module(module))
            times["print"], out = _timed(lambda: print_module(module))
            if n not in bindings:
                bindings[n] = sum(len(f.body) for f in module.functions)
                if parse_module(out, "<bench>") != module:  # a sanity check, not timed
                    raise SystemExit(
                        f"size {n}: the printed module does not parse back to the same module"
                    )
            for phase, t in times.items():
                best[n, phase] = min(best.get((n, phase), float("inf")), t)
            module = out = None
    rows = []
    for n in sizes:
        row = {
            "size": n,
            "bindings": bindings[n],
            **{p: best[n, p] for p in ("parse", "verify", "print")},
        }
        row["rate"] = row["bindings"] / (row["parse"] + row["verify"])
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,30000,100000", help="comma-separated binding counts")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is kept")
    args = ap.parse_args(argv)
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    if not sizes or args.repeat < 1:
        ap.error("need at least one size and --repeat >= 1")

    rows = measure(sizes, args.repeat, _load_generator())
    base = (rows[0]["parse"] + rows[0]["verify"]) / rows[0]["bindings"]

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"parse / verify / print (best of {args.repeat})")
    for col in (
        "bindings",
        "parse s",
        "verify s",
        "print s",
        "parse+verify bindings/s",
        "linearity",
    ):
        table.add_column(col, justify="right")
    for r in rows:
        per = (r["parse"] + r["verify"]) / r["bindings"]
        table.add_row(
            f"{r['bindings']:,}",
            f"{r['parse']:.3f}",
            f"{r['verify']:.3f}",
            f"{r['print']:.3f}",
            f"{r['rate']:,.0f}",
            f"{per / base:.2f}",
        )
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

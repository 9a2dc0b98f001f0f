"""Peak memory with and without KillAfterLastUse on dynamic-shape models.

For the transformer sample with an unbounded sequence length and for generated decoders of
8 and 16 layers (every allocation dynamic), the program is compiled three ways and run by
the reference interpreter, whose allocator counts the bytes it holds (kernel-internal
temporaries of primitive functions are not counted):

* ManifestAlloc only: every value its own storage, nothing freed before the return;
* ManifestAlloc + PlanMemory: dynamic storages of provably equal size are reused;
* ManifestAlloc + PlanMemory + KillAfterLastUse (the vm pipeline): freed at the last use.

"truly live" is the most bytes of storage live at any program point of the final program,
by alias-aware liveness: what an ideal allocator needs.

    python benchmarks/kills.py [--n 16,64,256]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import SAMPLES, decoder, unbounded_transformer  # noqa: E402

from relaxc.backend.interpreter import Interpreter  # noqa: E402
from relaxc.frontend.parser import parse_module  # noqa: E402
from relaxc.frontend.weights import load_npz  # noqa: E402
from relaxc.ir import dims as D  # noqa: E402
from relaxc.ir.alias import analyze_aliases, buffer_liveness  # noqa: E402
from relaxc.passes.kill_after_last_use import KillAfterLastUse  # noqa: E402
from relaxc.passes.manifest_alloc import ManifestAlloc  # noqa: E402
from relaxc.passes.pipeline import Pipeline  # noqa: E402
from relaxc.passes.candidates import storages  # noqa: E402
from relaxc.passes.plan_memory import PlanMemory  # noqa: E402


def truly_live(module, n: int) -> int:
    """Most bytes of storage live at once in @main, by alias-aware liveness."""
    fn = module.get("main")
    live = buffer_liveness(fn, analyze_aliases(fn, module))
    events = []
    for s in storages(fn):
        size = s.size if isinstance(s.size, int) else D.evaluate(s.size, {"n": n})
        events.append((live.defined[s.name], size))
        events.append((live.last_use.get(s.name, live.defined[s.name]) + 0.5, -size))
    peak = cur = 0
    for _, delta in sorted(events):
        cur += delta
        peak = max(peak, cur)
    return peak


def measure(name: str, text: str, ns: list[int], weights: dict) -> list[tuple]:
    before = parse_module(text, name)
    configs = [
        Pipeline([ManifestAlloc()]).run(before),
        Pipeline([ManifestAlloc(), PlanMemory()]).run(before),
        Pipeline([ManifestAlloc(), PlanMemory(), KillAfterLastUse()]).run(before),
    ]
    rows = []
    for n in ns:
        x = np.random.default_rng(n).normal(size=(n, 64)).astype(np.float32)
        peaks = []
        results = []
        for module in configs:
            interp = Interpreter(module, weights)
            results.append(interp.run("main", [x]))
            peaks.append(interp.stats.peak)
        for r in results[1:]:
            np.testing.assert_array_equal(results[0], r)
        rows.append((name, n, *peaks, truly_live(configs[-1], n)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="16,64,256", help="sequence lengths to run")
    args = ap.parse_args()
    ns = [int(v) for v in args.n.split(",")]
    weights = load_npz(SAMPLES / "transformer.npz")
    rows = []
    rows += measure("transformer (n unbounded)", unbounded_transformer(), ns, weights)
    for layers in (8, 16):
        rows += measure(f"decoder, {layers} layers", decoder(layers), ns, weights)
    table = Table(title="peak bytes held by the interpreter (all allocations dynamic)")
    for col in ("model", "n", "ManifestAlloc", "+ PlanMemory", "+ KillAfterLastUse", "truly live"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for name, n, manifest, planned, killed, ideal in rows:
        table.add_row(name, str(n), f"{manifest:,}", f"{planned:,}", f"{killed:,}", f"{ideal:,}")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()

"""Memory below the fixed-order bound: the arena after each pass that changes what is live
(issue 15), beside TVM fused, IREE and TFLite Micro (benchmarks/peer_memory.py).

Used by benchmarks/plans.py (its second table); on its own:

    python benchmarks/below_bound.py                  # the nine model-zoo architectures
    python benchmarks/below_bound.py a.onnx b.rx
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from peer_memory import PEERS, RELAXC_BEFORE_ISSUE_15  # noqa: E402

from relaxc.ir.nodes import Module  # noqa: E402
from relaxc.ir.sizes import tensor_nbytes  # noqa: E402
from relaxc.ir.types import TensorType  # noqa: E402
from relaxc.passes.base import Pass  # noqa: E402
from relaxc.cli.report.analysis import memory_report  # noqa: E402
from relaxc.passes.pipeline import Pipeline  # noqa: E402
from relaxc.passes.registry import PASSES  # noqa: E402


def _pass(name: str, **options) -> Pass | None:
    cls = PASSES.get(name)
    if cls is None:
        return None
    known = {f.name for f in fields(cls)}
    if not set(options) <= known:
        return None
    return cls(**options)


def stages() -> dict[str, list[Pass] | None]:
    """Stage name -> its pass list (None: this build of relaxc lacks a pass it needs)."""

    def seq(*names: str, plan: dict | None = None) -> list[Pass] | None:
        passes = [_pass(n) for n in names] + [_pass("PlanMemory", check=True, **(plan or {}))]
        return None if any(p is None for p in passes) else passes  # type: ignore[return-value]

    base = ("ManifestAlloc", "PlanWorkspace")
    return {
        "written": seq(*base),
        "+concat": seq(*base, "ElideConcatSplit"),
        "+in-place": seq(*base, "ComputeInPlace"),
        "+reorder": seq("ReorderForMemory", *base),
        "all": seq("ReorderForMemory", *base, "ElideConcatSplit", "ComputeInPlace"),
        "all, IO in arena": seq(
            "ReorderForMemory",
            *base,
            "ElideConcatSplit",
            "ComputeInPlace",
            plan={"io_in_arena": True},
        ),
    }


@dataclass
class StageRow:
    name: str
    io_bytes: int = 0  # the entry function's inputs and outputs
    arenas: dict[str, int] = field(default_factory=dict)
    bounds: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def io_bytes(module: Module) -> int:
    fn = module.get("main") or module.functions[0]
    total = 0
    for t in [p.type for p in fn.params] + [fn.ret_type]:
        leaves = getattr(t, "fields", None) or [t]
        for leaf in leaves:
            if isinstance(leaf, TensorType) and leaf.is_static():
                n = tensor_nbytes(leaf)
                total += n if isinstance(n, int) else 0
    return total


def measure_stages(name: str, module: Module, clock: Callable[[], float] = time.process_time):
    row = StageRow(name, io_bytes(module))
    for stage, passes in stages().items():
        if passes is None:
            continue
        t = clock()
        planned = Pipeline(passes).run(module)
        row.seconds[stage] = clock() - t
        reports = memory_report(planned)
        row.arenas[stage] = sum(r.arena_bytes for r in reports)
        row.bounds[stage] = sum(r.lower_bound for r in reports)
    return row


def _b(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def render_stages(rows: list[StageRow]) -> Table:
    present = [s for s, p in stages().items() if p is not None]
    table = Table(title="memory below the fixed-order bound: arena bytes (lower bound) per stage")
    cols = ["model", *present, "all + IO", "TVM fused", "IREE", "TFLM head", "vs best peer"]
    for c in [*cols, "passes s"]:
        table.add_column(c, justify="left" if c == "model" else "right")
    for r in rows:
        cells = [r.name]
        for s in present:
            a, lb = r.arenas[s], r.bounds[s]
            cells.append(_b(a) if a == lb else f"{_b(a)} ({_b(lb)})")
        final = "all" if "all" in r.arenas else max(present, key=lambda s: -r.arenas[s])
        best = min(r.arenas.get(s, 1 << 62) for s in present if s != "all, IO in arena")
        with_io = best + r.io_bytes
        if "all, IO in arena" in r.arenas:
            with_io = min(with_io, r.arenas["all, IO in arena"])
        cells.append(_b(with_io))
        peer = PEERS.get(r.name)
        if peer is None:
            cells += ["-", "-", "-", "-"]
        else:
            ratios = [best / peer.best_arena()]
            if peer.tflm_head:
                ratios.append(with_io / peer.tflm_head)
            cells += [_b(peer.tvm_fused), _b(peer.iree), _b(peer.tflm_head), f"{max(ratios):.3f}x"]
        del final
        cells.append(f"{max(r.seconds.values()):.2f}")
        table.add_row(*cells)
    return table


def footnote() -> str:
    return (
        "'vs best peer': relaxc's smallest arena over min(TVM fused, IREE), and its arena with "
        "inputs and outputs (planned in the arena, or added) over TFLite Micro's head, which "
        "counts them; the larger ratio (<= 1.000: relaxc needs no more than any peer). "
        "'passes s': CPU seconds of the slowest stage's whole pass list, planning included. "
        "Peer figures are constants measured outside this repository "
        "(benchmarks/peer_memory.py, docs/benchmarks-memory.md). "
        f"Before issue 15 relaxc's arena was {RELAXC_BEFORE_ISSUE_15['squeezenet']:,} B on "
        "squeezenet."
    )


def main() -> None:
    import argparse

    from model_files import default_files, load

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        files = args.files or [p for p in default_files(Path(tmp)) if p.suffix == ".onnx"]
        rows = []
        for path in files:
            print(f"measuring {path.name} ...", file=sys.stderr)
            module, _, _ = load(path, {"seq": 128})
            rows.append(measure_stages(path.stem.removeprefix("light_"), module))
    Console(width=200).print(render_stages(rows))
    print(footnote())


if __name__ == "__main__":
    main()

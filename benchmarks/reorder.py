"""ReorderForMemory on real models: the cost model's peak as written and as reordered, and the
arena today's vm pipeline plans for each order.

For each model: the peak of live bytes under the pass's model without the anticipated
rewrites (``inplace=false concat=false split=false``: the pipeline without in-place or
elision, whose lower bound it equals) and with them (the defaults), each as written and as
reordered; the arena of the vm pipeline for the written order and for each reordered one;
and the pass's time (its run, with the verifier's types given, as in a pipeline).

    python benchmarks/reorder.py                 # the nine model-zoo architectures
    python benchmarks/reorder.py a.onnx b.rx
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from relaxc.frontend.parser import parse_module  # noqa: E402
from relaxc.ir.verifier import verify_module  # noqa: E402
from relaxc.passes.assemble import assemble_pipeline  # noqa: E402
from relaxc.cli.report.analysis import memory_report  # noqa: E402
from relaxc.passes.pipeline import Pipeline  # noqa: E402
from relaxc.passes.reorder_for_memory import (  # noqa: E402
    CHOSEN_ATTR,
    WRITTEN_ATTR,
    ReorderForMemory,
)


def zoo() -> list[Path]:
    import onnx

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return sorted(light.glob("light_*.onnx"))


def load(path: Path):
    if path.suffix == ".onnx":
        from relaxc.frontend.onnx import import_onnx

        return import_onnx(path).module
    return parse_module(path.read_text(), str(path))


def arena(module) -> int:
    return sum(r.arena_bytes for r in memory_report(Pipeline(assemble_pipeline("vm")).run(module)))


def peaks(module) -> tuple[int, int]:
    fns = [f for f in module.functions if f.attr(CHOSEN_ATTR) is not None]
    return sum(f.attr(WRITTEN_ATTR) for f in fns), sum(f.attr(CHOSEN_ATTR) for f in fns)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    table = Table(title="ReorderForMemory: bytes live at most, and the vm pipeline's arena")
    cols = [
        "model",
        "model as written",
        "model reordered",
        "full model as written",
        "full model reordered",
        "arena as written",
        "arena reordered",
        "arena reordered (full model)",
        "pass s",
    ]
    for c in cols:
        table.add_column(c, justify="left" if c == "model" else "right")
    for path in args.files or zoo():
        module = load(path)
        types = verify_module(module)
        plain_pass = ReorderForMemory(inplace=False, concat=False, split=False)
        t = time.perf_counter()
        plain = plain_pass.run(module, types)
        seconds = time.perf_counter() - t
        t = time.perf_counter()
        full = ReorderForMemory().run(module, types)
        seconds = max(seconds, time.perf_counter() - t)
        pw, pc = peaks(plain)
        fw, fc = peaks(full)
        table.add_row(
            path.stem.removeprefix("light_"),
            f"{pw:,}",
            f"{pc:,}",
            f"{fw:,}",
            f"{fc:,}",
            f"{arena(module):,}",
            f"{arena(plain):,}",
            f"{arena(full):,}",
            f"{seconds:.3f}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()

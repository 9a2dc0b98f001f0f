"""Planned memory of real models: ONNX files (imported) and .rx files, side by side with
Apache TVM's StaticPlanBlockMemory when the apache-tvm package is installed.

The first table, for each model: the naive bytes (one buffer per intermediate, no reuse),
the arena each PlanMemory planner finds and its ratio to the lower bound (the most bytes
live at once) in the order written, with no sharing (ManifestAlloc then PlanMemory), the
planning time, and the end-to-end build time (import or parse, the vm pipeline and the
bytecode with its constants, as ``relaxc build`` does, without writing the file).
Outputs, inputs and weights are not intermediates and are counted by neither tool.
The second table (benchmarks/below_bound.py): the arena after each pass that changes what
is live (concat elision, in-place execution, memory-aware order, inputs and outputs in the
arena) beside TVM fused, IREE and TFLite Micro's figures (benchmarks/peer_memory.py).

    python benchmarks/plans.py                      # the ONNX package's model zoo + samples
    python benchmarks/plans.py a.onnx b.rx --bound seq=128 --time-limit 10
    python benchmarks/plans.py --no-tvm             # skip TVM even when installed

With no files it runs the nine "light" model-zoo architectures (AlexNet, DenseNet-121,
Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512) that the onnx package
ships with its backend tests, the attention block of the importer tests, and samples/*.rx.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import tvm_plan  # noqa: E402  (imports tvm lazily)
from below_bound import footnote, measure_stages, render_stages  # noqa: E402
from model_files import default_files, load  # noqa: E402

from relaxc.backend.vm import compile_module  # noqa: E402
from relaxc.passes.assemble import assemble_pipeline  # noqa: E402
from relaxc.passes.manifest_alloc import ManifestAlloc  # noqa: E402
from relaxc.cli.report.analysis import memory_report  # noqa: E402
from relaxc.passes.pipeline import Pipeline  # noqa: E402
from relaxc.passes.plan_memory import PlanMemory  # noqa: E402

PLANNERS = ("greedy-size", "greedy-conflict", "best")


@dataclass
class Row:
    name: str
    kind: str
    bindings: int = 0
    naive: int = 0
    lower_bound: int = 0
    arenas: dict[str, int] = field(default_factory=dict)
    plan_seconds: dict[str, float] = field(default_factory=dict)
    build_seconds: float = 0.0
    tvm: dict[str, "tvm_plan.TvmPlan | str"] = field(default_factory=dict)


def measure(path: Path, bounds: dict[str, int], time_limit: float, with_tvm: bool) -> Row:
    t0 = time.perf_counter()
    module, weights, kind = load(path, bounds)
    lowered = Pipeline(assemble_pipeline("vm")).run(module)
    compile_module(lowered, weights)
    build = time.perf_counter() - t0
    row = Row(path.stem.removeprefix("light_"), kind, sum(len(f.body) for f in module.functions))
    row.build_seconds = build
    explicit = ManifestAlloc()(module)
    for planner in PLANNERS:
        t = time.perf_counter()
        planned = PlanMemory(planner=planner, time_limit=time_limit, check=True)(explicit)
        row.plan_seconds[planner] = time.perf_counter() - t
        reports = memory_report(planned)
        row.arenas[planner] = sum(r.arena_bytes for r in reports)
        row.lower_bound = sum(r.lower_bound for r in reports)
        row.naive = sum(r.naive_bytes for r in reports)
    if with_tvm and kind == "onnx":
        for fuse in (False, True):
            try:
                row.tvm["fused" if fuse else "unfused"] = tvm_plan.tvm_planned_bytes(
                    str(path), fuse=fuse, upper_bounds=bounds or None
                )
            except Exception as e:  # noqa: BLE001 - report TVM's failure in the table, go on
                row.tvm["fused" if fuse else "unfused"] = f"failed: {type(e).__name__}"
    return row


def mib(n: int) -> str:
    return f"{n / (1 << 20):,.2f}"


def render(rows: list[Row], with_tvm: bool, time_limit: float) -> Table:
    table = Table(
        title=f"planned intermediate memory, MiB (PlanMemory time limit {time_limit:g} s)"
    )
    cols = (
        ["model", "bindings", "naive", "lower bound"]
        + [f"{p}" for p in PLANNERS]
        + ["best / bound", "plan s (best)", "build s"]
    )
    if with_tvm:
        cols += ["TVM unfused", "TVM fused", "TVM s"]
    for c in cols:
        table.add_column(c, justify="left" if c == "model" else "right")
    for r in rows:
        lb = r.lower_bound
        cells = [f"{r.name} ({r.kind})", f"{r.bindings:,}", mib(r.naive), mib(lb)]
        cells += [
            f"{mib(r.arenas[p])} ({r.arenas[p] / lb:.2f}x)" if lb else mib(r.arenas[p])
            for p in PLANNERS
        ]
        cells += [
            f"{r.arenas['best'] / lb:.3f}" if lb else "-",
            f"{r.plan_seconds['best']:.2f}",
            f"{r.build_seconds:.2f}",
        ]
        if with_tvm:
            for key in ("unfused", "fused"):
                t = r.tvm.get(key)
                if t is None:
                    cells.append("-")
                elif isinstance(t, str):
                    cells.append(t)
                else:
                    extra = f" +{t.n_dynamic} dyn" if t.n_dynamic else ""
                    cells.append(f"{mib(t.storage_bytes)}{extra}")
            fused = r.tvm.get("fused")
            cells.append(
                f"{fused.seconds:.1f}" if fused is not None and not isinstance(fused, str) else "-"
            )
        table.add_row(*cells)
    return table


def parse_bounds(items: list[str]) -> dict[str, int]:
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name] = int(value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "files", nargs="*", type=Path, help=".onnx and .rx files (default: the model zoo + samples)"
    )
    ap.add_argument(
        "--time-limit", type=float, default=2.0, help="time budget of the 'best' planner (s)"
    )
    ap.add_argument(
        "--bound",
        action="append",
        default=[],
        metavar="NAME=N",
        help="upper bound of a symbolic dim of the ONNX models (default: seq=128)",
    )
    ap.add_argument(
        "--no-tvm", action="store_true", help="skip the TVM columns even if tvm is installed"
    )
    args = ap.parse_args()
    bounds = parse_bounds(args.bound) or {"seq": 128}
    with_tvm = not args.no_tvm and tvm_plan.available()
    if not args.no_tvm and not with_tvm:
        print(
            "apache-tvm is not installed: no TVM columns (see docs/benchmarks-tvm.md)",
            file=sys.stderr,
        )
    with tempfile.TemporaryDirectory() as tmp:
        files = args.files or default_files(Path(tmp))
        rows, stage_rows = [], []
        for path in files:
            print(f"measuring {path.name} ...", file=sys.stderr)
            rows.append(measure(path, bounds, args.time_limit, with_tvm))
            module, _, _ = load(path, bounds)
            stage_rows.append(measure_stages(path.stem.removeprefix("light_"), module))
    Console(width=220).print(render(rows, with_tvm, args.time_limit))
    Console(width=220).print(render_stages(stage_rows))
    print(footnote())
    if with_tvm:
        print(
            f"TVM {tvm_plan.tvm_version()}: StaticPlanBlockMemory storage after the "
            "default lowering (docs/benchmarks-tvm.md); 'fused' runs FuseOps/FuseTIR first, so "
            "fused intermediates need no memory at all, which relaxc (no fusion) cannot match."
        )


if __name__ == "__main__":
    main()

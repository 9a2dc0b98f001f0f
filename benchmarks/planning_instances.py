"""Instances for the memory-planner benchmark: MiniMalloc's files, their program
encodings, and random interval sets.

* :func:`read_instance` reads a MiniMalloc CSV (header ``id,lower,upper,size``, lifetimes
  half-open ``[lower, upper)``).
* :func:`program_text` writes an instance as a ``.rx`` program (issue 17): every buffer a
  ``zeros`` of its size, born at its start and, at its end, reduced (``sum``, a 0-d tensor)
  and folded into a running accumulator (``add``); at equal times the folds come first.
* :func:`program_module` parses that program and runs the default ``vm`` pipeline up to
  PlanMemory: what PlanMemory then plans is what a user of ``relaxc report`` or ``relaxc
  build`` gets (ReorderForMemory may reorder the statements, ManifestAlloc rounds sizes up
  to 64 bytes, the small tensors join the large ones). :func:`planned_buffers` lists the
  buffers PlanMemory places there (for traces and CP-SAT).
* :func:`program_encoding` only simulates that pipeline on the buffers (the program order
  as written, no reordering): kept for tests; its figures are not what a user gets.
* :func:`random_intervals` draws ``n`` buffers with about ``live`` of them live at a
  time: starts uniform over ``[0, n)``, lifetimes uniform in ``[1, 2 * live]``, sizes
  log-uniform between 64 bytes and 64 KiB in multiples of 64, aligned to 64.
"""

from __future__ import annotations

import csv
import dataclasses
import random
from pathlib import Path

from relaxc.frontend.parser import parse_module
from relaxc.ir.alias import analyze_aliases, buffer_liveness
from relaxc.ir.nodes import Module
from relaxc.passes.assemble import assemble_pipeline
from relaxc.passes.pipeline import Pipeline
from relaxc.passes.candidates import planning_candidates
from relaxc.passes.plan_memory import PlanMemory
from relaxc.passes.planning.model import Buffer


def _find_data() -> Path:
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared/benchmarks/minimalloc"
        if candidate.is_dir():
            return candidate
    return Path("/work/shared/benchmarks/minimalloc")


DATA = _find_data()
SMALL = 64  # bytes of a one-element tensor after rounding to the alignment


def read_instance(path: Path) -> list[Buffer]:
    with path.open(newline="") as f:
        return [
            Buffer(int(row["lower"]), int(row["upper"]), int(row["size"]), 1, row["id"])
            for row in csv.DictReader(f)
        ]


def minimalloc_instances() -> list[tuple[str, Path]]:
    """(name, path) of the challenging instances A-K and the example input.12."""
    files = sorted((DATA / "challenging").glob("*.csv")) + [DATA / "examples" / "input.12.csv"]
    # "A.1048576.csv" -> "A"; "input.12.csv" -> "input.12"
    return [
        (p.name.split(".")[0] if p.parent.name == "challenging" else p.stem, p)
        for p in files
        if p.exists()
    ]


def program_encoding(buffers: list[Buffer], align: int = 64) -> list[Buffer]:
    """The buffers PlanMemory sees for the ``.rx`` encoding of an instance (see above)."""
    # Events in program order: at equal times folds (ends) before births (starts).
    events = sorted(
        [(b.start, 1, i) for i, b in enumerate(buffers)]
        + [(b.end, 0, i) for i, b in enumerate(buffers)]
    )
    point = 1  # point 0 defines the first accumulator
    born: dict[int, int] = {}
    out: list[Buffer] = []
    acc_def, acc_name = 0, "acc0"
    folds = 0
    for _, kind, i in events:
        b = buffers[i]
        if kind == 1:
            born[i] = point
            point += 1
            continue
        # %r = sum(%b) at `point`; %acc' = add(%acc, %r) at point + 1.
        size = -(-b.size // align) * align
        out.append(Buffer(born[i], point + 1, size, align, b.name or f"b{i}"))
        out.append(Buffer(point, point + 2, SMALL, align, f"r{i}"))
        out.append(Buffer(acc_def, point + 2, SMALL, align, acc_name))
        folds += 1
        acc_def, acc_name = point + 1, f"acc{folds}"
        point += 2
    return out


def program_text(buffers: list[Buffer]) -> str:
    """The ``.rx`` program of an instance (see the module docstring); sizes in bytes become
    ``f32`` elements (rounded up)."""
    events = sorted(
        [(b.start, 1, i) for i, b in enumerate(buffers)]
        + [(b.end, 0, i) for i, b in enumerate(buffers)]
    )
    lines = ["fn @main(%x: Tensor[(), f32]) -> Tensor[(), f32] {"]
    acc = "x"
    for k, (_, kind, i) in enumerate(events):
        if kind == 1:
            lines.append(f"  %b{i} = zeros(({max(1, -(-buffers[i].size // 4))},), f32)")
        else:
            lines.append(f"  %s{i} = sum(%b{i})")
            lines.append(f"  %a{k} = add(%{acc}, %s{i})")
            acc = f"a{k}"
    lines += [f"  return %{acc}", "}"]
    return "\n".join(lines) + "\n"


def program_module(buffers: list[Buffer], name: str = "instance.rx") -> Module:
    """The program of ``buffers`` after the default ``vm`` pipeline's passes before
    PlanMemory: the module PlanMemory plans in ``relaxc report``."""
    passes = assemble_pipeline("vm")
    k = next(i for i, p in enumerate(passes) if isinstance(p, PlanMemory))
    return Pipeline(passes[:k]).run(parse_module(program_text(buffers), name))


def plan_memory_pass(planner: str, time_limit: float, capacity: int = 0) -> PlanMemory:
    """The vm pipeline's PlanMemory with ``planner``, ``time_limit`` and ``capacity`` (as
    ``relaxc report --max-arena`` sets it), checking its plan with the independent checker."""
    pm = next(p for p in assemble_pipeline("vm") if isinstance(p, PlanMemory))
    return dataclasses.replace(
        pm, planner=planner, time_limit=time_limit, capacity=capacity, check=True
    )


def planned_buffers(module: Module) -> list[Buffer]:
    """The buffers PlanMemory places in ``main``'s global arena of ``module``."""
    fn = module.get("main")
    info = analyze_aliases(fn, module)
    by_scope, _ = planning_candidates(fn, info, buffer_liveness(fn, info))
    return [b for _, b in by_scope.get("global", [])]


def random_intervals(n: int, live: int, seed: int = 0, align: int = 64) -> list[Buffer]:
    """``n`` buffers with about ``live`` live at a time (see the module docstring)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        s = rng.randrange(n)
        length = 1 + rng.randrange(2 * live)
        size = max(align, int(2 ** rng.uniform(6, 16)) // align * align)
        out.append(Buffer(s, s + length, size, align, f"b{i}"))
    return out

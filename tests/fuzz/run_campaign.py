"""Differential fuzzing campaigns: many generated programs through every pipeline, planner
and backend (see tests/fuzz/harness.py for what is checked, docs/fuzzing.md for how to run).

    python -m tests.fuzz.run_campaign --seed 0 --count 5000 [--jobs 2] [--full] [--minimize]

Program ``k`` of a campaign is ``program_from_seed(seed + k)``, so any program is replayed
with ``--seed S --count 1``. The work is split into chunks run by worker processes; each
chunk checks its programs on the VM, then builds the C models of its programs as one batch
(strict, and sanitized for the programs chosen for it) and runs them. Exit status 1 when
anything mismatched; ``--minimize`` shrinks each failing program and prints it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .gen import FUZZED_OPS, GenProgram, program_from_seed
from .harness import CBatch, FAST, Mismatch, c_variants, check_program, emit_variants


@dataclass
class Found:
    """One mismatch, as plain data (it crosses process boundaries)."""

    label: str  # "seed 123" or "legacy 4"
    where: str
    symptom: str
    text: str
    seed: int | None

    def __str__(self) -> str:
        return f"[{self.label}] {self.where}: {self.symptom}\n--- program ---\n{self.text}"


@dataclass
class Report:
    programs: int = 0
    c_programs: int = 0
    vm_variants: int = 0  # compiled forms run on the VM (two input sets each)
    c_models: int = 0  # C builds run (strict)
    san_programs: int = 0
    san_models: int = 0  # C builds run under ASan and UBSan
    refused: Counter = field(default_factory=Counter)  # C variants refused by design
    ops: Counter = field(default_factory=Counter)
    # What the sharing passes (and ReorderForMemory) did (harness.sharing_changes): in how
    # many programs, and how many times in all.
    changed: Counter = field(default_factory=Counter)
    changes: Counter = field(default_factory=Counter)
    found: list[Found] = field(default_factory=list)
    seconds: Counter = field(default_factory=Counter)

    def merge(self, other: "Report") -> None:
        for k in (
            "programs",
            "c_programs",
            "vm_variants",
            "c_models",
            "san_programs",
            "san_models",
        ):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.refused.update(other.refused)
        self.ops.update(other.ops)
        self.changed.update(other.changed)
        self.changes.update(other.changes)
        self.found += other.found
        self.seconds.update(other.seconds)

    def summary(self) -> str:
        never = sorted(op.name for op in FUZZED_OPS if op.name not in self.ops)
        lines = [
            f"{self.programs} programs ({self.c_programs} also for the C target), "
            f"{self.vm_variants} VM runs x 2 input sets, {self.c_models} C builds, "
            f"{self.san_models} sanitized C builds of {self.san_programs} programs",
            f"ops: {len(self.ops)} of {len(FUZZED_OPS)} fuzzed ops used, "
            f"{sum(self.ops.values())} times" + (f"; never: {', '.join(never)}" if never else ""),
            "sharing: "
            + (
                ", ".join(
                    f"{k} in {self.changed[k]} programs ({self.changes[k]} times)"
                    for k in sorted(self.changed)
                )
                or "nothing"
            ),
            "seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(self.seconds.items())),
            f"mismatches: {len(self.found)}",
        ]
        if self.refused:
            lines.insert(
                1,
                "C variants refused by design: "
                + ", ".join(f"{k} {v}" for k, v in self.refused.items()),
            )
        return "\n".join(lines)


def _found(label: str, seed: int | None, m: Mismatch) -> Found:
    return Found(label, m.where, m.symptom, m.prog.text, seed)


def run_chunk(
    items: Sequence[tuple[str, int | None, GenProgram | None, bool]],
    folder: str,
    full: bool = False,
    c_flags: Sequence[str] | None = None,
) -> Report:
    """Check ``items`` (label, seed, program or None for ``program_from_seed(seed)``, sanitize?)."""
    rep = Report()
    strict = CBatch(Path(folder) / "strict", flags=c_flags or FAST, jobs=1)
    san = CBatch(Path(folder) / "san", sanitize=True, jobs=1)
    t0 = time.perf_counter()
    by_text: dict[str, tuple[str, int | None]] = {}
    for k, (label, seed, prog, sanitize) in enumerate(items):
        prog = prog if prog is not None else program_from_seed(seed)  # type: ignore[arg-type]
        rep.programs += 1
        rep.ops.update(prog.ops)
        try:
            case, compiled = check_program(prog, thorough=full)
        except Mismatch as m:
            rep.found.append(_found(label, seed, m))
            continue
        except Exception as e:  # noqa: BLE001 - the harness itself failed: report, do not stop
            rep.found.append(
                Found(
                    label,
                    "harness",
                    f"{type(e).__name__}: {e}\n{traceback.format_exc()}",
                    prog.text,
                    seed,
                )
            )
            continue
        rep.vm_variants += len(compiled.vm)
        rep.changes.update(compiled.changes)
        rep.changed.update(compiled.changes.keys())
        rep.refused.update(v.split("/")[0] for v in compiled.refused)
        if not prog.c_ok:
            continue
        rep.c_programs += 1
        rotate = None if full else (seed if seed is not None else k)
        prefix = f"fz{seed}" if seed is not None else f"fzl{k}"  # build errors name the seed
        try:
            models = emit_variants(case, compiled, prefix, k, c_variants(compiled, rotate))
        except Mismatch as m:
            rep.found.append(_found(label, seed, m))
            continue
        by_text[prog.text] = (label, seed)
        strict.add(models)
        if sanitize and models:
            rep.san_programs += 1
            # Sanitized: the c pipeline as built (packed) and one other build of the program.
            pick = [models[0]] + [m for m in models[1:] if not m.variant.startswith("c/")][:1]
            san.add(pick)
    rep.seconds["vm"] += time.perf_counter() - t0
    for batch, what in ((strict, "c"), (san, "c-sanitized")):
        if not batch.models:
            continue
        t0 = time.perf_counter()
        try:
            result = batch.run()
        except AssertionError as e:  # a build failure: every program of the batch is suspect
            rep.found.append(Found("batch", what, str(e), "", None))
            continue
        finally:
            rep.seconds[what] += time.perf_counter() - t0
        if batch.sanitize:
            rep.san_models += len(batch.models)
        else:
            rep.c_models += len(batch.models)
        for m in result.mismatches:
            label, seed = by_text.get(m.prog.text, ("?", None))
            rep.found.append(_found(label, seed, m))
    return rep


def _run_chunk_args(args: tuple) -> Report:
    items, full, c_flags = args
    with tempfile.TemporaryDirectory(prefix="relaxc-fuzz-") as d:
        return run_chunk(items, d, full, c_flags)


def run_campaign(
    items: Sequence[tuple[str, int | None, GenProgram | None, bool]],
    jobs: int | None = None,
    full: bool = False,
    c_flags: Sequence[str] | None = None,
    chunk: int = 0,
) -> Report:
    """Run ``items`` split into chunks over ``jobs`` worker processes (the default: one per
    core)."""
    jobs = jobs or max(1, min(os.cpu_count() or 1, 8))
    size = chunk or max(1, -(-len(items) // jobs))
    chunks = [list(items[i : i + size]) for i in range(0, len(items), size)]
    report = Report()
    t0 = time.perf_counter()
    if jobs == 1 or len(chunks) == 1:
        for c in chunks:
            report.merge(_run_chunk_args((c, full, c_flags)))
    else:
        with ProcessPoolExecutor(jobs) as pool:
            for r in pool.map(_run_chunk_args, [(c, full, c_flags) for c in chunks]):
                report.merge(r)
    report.seconds["wall"] = time.perf_counter() - t0
    return report


def seed_items(
    seed: int, count: int, sanitize_every: int = 0
) -> list[tuple[str, int | None, None, bool]]:
    """Programs ``seed ... seed + count - 1``; every ``sanitize_every``-th is also sanitized."""
    return [
        (f"seed {s}", s, None, bool(sanitize_every) and s % sanitize_every == 0)
        for s in range(seed, seed + count)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.fuzz.run_campaign", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--seed", type=int, default=0, help="the first program's seed (default 0)")
    ap.add_argument("--count", type=int, default=1000, help="how many programs (default 1000)")
    ap.add_argument("--jobs", type=int, default=0, help="worker processes (default: one per core)")
    ap.add_argument("--chunk", type=int, default=200, help="programs per chunk (one C batch each)")
    ap.add_argument(
        "--sanitize-every", type=int, default=5, help="sanitize every k-th program (0: none)"
    )
    ap.add_argument(
        "--full",
        action="store_true",
        help="every C variant of every program, and the IR between passes on the VM",
    )
    ap.add_argument(
        "-O", dest="opt", default="2", help="C optimization level of the strict builds (default 2)"
    )
    ap.add_argument(
        "--minimize", action="store_true", help="shrink each failing program and print it"
    )
    args = ap.parse_args(argv)
    flags = [f if not f.startswith("-O") else f"-O{args.opt}" for f in FAST]
    items = seed_items(args.seed, args.count, args.sanitize_every)
    report = run_campaign(items, args.jobs or None, args.full, flags, args.chunk)
    print(report.summary())
    seen = set()
    for f in report.found:
        print("\n" + "=" * 100)
        print(f)
        if args.minimize and f.seed is not None and f.seed not in seen:
            from .minimize import fails_like, minimize, mismatches, signature

            seen.add(f.seed)
            prog = program_from_seed(f.seed)
            ms = mismatches(prog)
            if ms:
                small = minimize(prog, fails_like(signature(ms[0])))
                print(f"--- minimized (seed {f.seed}) ---")
                print(small)
                print(mismatches(small)[0])
    return 1 if report.found else 0


if __name__ == "__main__":
    sys.exit(main())

"""Differential fuzzing of every pipeline, planner and backend (issue 9, parts 1 and 3;
issue 15 for the memory-sharing passes).

The fixed-seed run (part of ``pytest -q``): programs ``program_from_seed(0 ... 499)`` of
tests/fuzz/gen.py and 50 programs of tests/strategies.py's ``programs()`` (drawn by
hypothesis, derandomized, no database) go through the passes of the vm pipeline before
PlanMemory (ReorderForMemory, ManifestAlloc, PlanWorkspace, ElideConcatSplit,
ComputeInPlace), PlanMemory with every planner (each plan checked by the independent
checker, on the planner's buffers and again on the output IR), KillAfterLastUse and
LegalizePackedCalls; the VM runs the source, the IR after ReorderForMemory and after each
sharing pass that changed it, and every vm pipeline output, with
poisoning; the C target builds the c pipeline of every distinct plan, and the unpacked and
vm pipeline builds of one planner per program (in turn); every fifth program's C also runs
under AddressSanitizer and UndefinedBehaviorSanitizer. Everything must equal the reference
interpreter (the VM bit for bit, C within tests/backend/c's tolerance, C variants of one
program bit for bit), and ReorderForMemory and the sharing passes must have acted on a
good share of the programs.

The samples run sanitized with every planner and pipeline (tests/backend/c/test_samples.py
covers the default plan). Longer campaigns: ``pytest -m fuzz`` and
``python -m tests.fuzz.run_campaign``; see docs/fuzzing.md.
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import default_weights_path, load_npz
from tests.backend.c.cbuild import needs_cc

from .gen import FUZZED_OPS, GenProgram, fuzz_programs, legacy_programs
from .harness import CBatch, check_program, emit_variants
from .run_campaign import Found, Report, run_campaign, seed_items

FIXED_SEEDS = 300
LEGACY = 30
SANITIZE_EVERY = 4
"""Every 4th program is also built sanitized (when it is built for C): at every 5th, the
50 sanitized programs the run checks for were the expected count, met or missed by chance
(49 once issue 30's ops changed the draws)."""

pytestmark = needs_cc


def legacy_items(count: int) -> list[tuple[str, None, GenProgram, bool]]:
    """``count`` programs of tests/strategies.py's ``programs()``, the same ones every run."""
    progs: list[GenProgram] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(legacy_programs())
    def collect(p: GenProgram) -> None:
        progs.append(p)

    collect()
    return [(f"legacy {i}", None, p, i % SANITIZE_EVERY == 0) for i, p in enumerate(progs[:count])]


@pytest.fixture(scope="module")
def fixed_run() -> Report:
    items = seed_items(0, FIXED_SEEDS, SANITIZE_EVERY) + legacy_items(LEGACY)
    report = run_campaign(items)
    print("\n" + report.summary())
    return report


def _show(report: Report, limit: int = 3) -> str:
    return (
        f"{len(report.found)} mismatch(es); replay one with python -m "
        f"tests.fuzz.run_campaign --seed S --count 1 --minimize\n\n"
        + "\n\n".join(str(f) for f in report.found[:limit])
    )


KNOWN_BUGS: dict[str, str] = {
    # A regex on "where: symptom" of a mismatch -> where the bug is recorded: the
    # xfail(strict=True) regression of tests/fuzz/test_regressions.py holding its minimized
    # program (or, until it is minimized, its entry in docs/fuzzing.md). The fixed-seed run
    # reports these as warnings instead of failing; when the bug is fixed, its regression
    # XPASSes (a failure) and the entry goes with the mark.
    r"^VM vm/greedy-size, input set 0 \(dims \{[^}]*\}\): working peak \d+ is below the "
    r"promise \d+$": "docs/fuzzing.md, Not fixed yet: seed 263 of the fixed-seed run (seeds 19 "
    "and 37 once bitcast and det joined the ops)",
}


def _known(f: Found) -> str | None:
    text = f"{f.where}: {f.symptom}"
    return next((t for r, t in KNOWN_BUGS.items() if re.search(r, text)), None)


def test_fixed_seed_programs_agree_everywhere(fixed_run: Report) -> None:
    known = [(f, _known(f)) for f in fixed_run.found]
    for f, test in known:
        if test is not None:
            warnings.warn(f"[{f.label}] known bug ({test}): {f.where}")
    unknown = dataclasses.replace(fixed_run, found=[f for f, t in known if t is None])
    assert not unknown.found, _show(unknown)


def test_fixed_seed_run_reaches_every_backend_and_op(fixed_run: Report) -> None:
    r = fixed_run
    assert r.programs == FIXED_SEEDS + LEGACY
    assert r.c_programs >= 0.6 * r.programs
    assert r.san_programs >= 50
    assert r.c_models >= r.c_programs
    # An op of the registry the generator never manages to use needs a recipe in gen.py.
    missing = sorted(op.name for op in FUZZED_OPS if r.ops[op.name] < 5)
    assert not missing, (
        "ops the fuzzer (almost) never generates; give them a recipe in "
        f"tests/fuzz/gen.py: {missing}"
    )


def test_fixed_seed_run_exercises_the_sharing_passes(fixed_run: Report) -> None:
    """The generator's patterns (gen.py, "Patterns of the memory-sharing passes") make
    ReorderForMemory and the sharing passes act on many of the fixed-seed programs.
    Measured when this was written, of the 550 programs (and, in brackets, with the pattern
    that aims at each replaced by random ops): ReorderForMemory put 153 in another order
    (72 without fans); ComputeInPlace made a view of an allocation in 312 (247 without
    chains, 73 without any pattern), in 239 of them into a fixed place, an output or a
    concat's slice (189, 38); ElideConcatSplit removed a concat in 88 and a split in 68 (0
    and 5 without joins and cuts). Of today's 330 programs: 81 (25%), 193 (58%), 146 (44%),
    48 (15%) and 44 (13%). Each floor is below the measured share and above the
    share without its pattern: it fails when the generator stops producing the pattern (or
    the pass stops acting on it: look before lowering a floor)."""
    r = fixed_run
    floors = {
        "ReorderForMemory": 0.20,
        "ComputeInPlace": 0.48,
        "ComputeInPlace/into-place": 0.38,
        "ElideConcatSplit/concat": 0.10,
        "ElideConcatSplit/split": 0.08,
    }
    low = {k: r.changed[k] for k, f in floors.items() if r.changed[k] < f * r.programs}
    assert not low, f"the passes changed too few of {r.programs} programs: {low}"


SAMPLES = Path(__file__).resolve().parents[2] / "samples"
SAMPLE_DIMS = {"transformer": {"n": 7}, "relay_memory": {"n": 3}}


def test_samples_run_sanitized_with_every_planner_and_pipeline(tmp_path: Path) -> None:
    """Every sample with its weights: each distinct plan through the c pipeline (packed and
    unpacked) and the vm pipeline, under ASan and UBSan, at the given dims and at the upper
    bounds, against the interpreter (and the VM runs every vm pipeline output)."""
    batch = CBatch(tmp_path, sanitize=True)
    for k, path in enumerate(sorted(SAMPLES.glob("*.rx"))):
        wpath = default_weights_path(path)
        weights = load_npz(wpath, "weights") if wpath else {}
        text = path.read_text()
        prog = GenProgram(
            parse_module(text, path.name),
            text,
            dict(weights),
            SAMPLE_DIMS.get(path.stem, {}),
            True,
            (),
            path.stem,
        )
        case, compiled = check_program(prog, thorough=False)
        # The c pipeline with the default planner is tests/backend/c/test_samples.py's.
        skip = {f"c/{compiled.canonical['best']}", f"c-unpacked/{compiled.canonical['best']}"}
        batch.add(
            emit_variants(case, compiled, f"s{k}", k, [v for v in compiled.c if v not in skip])
        )
    assert len(batch.models) >= 8
    result = batch.run()
    assert not result.mismatches, "\n\n".join(str(m) for m in result.mismatches[:3])


# ---------------------------------------------------------------------------------------
# Long campaigns: pytest -m fuzz


@pytest.mark.fuzz
def test_long_campaign() -> None:
    """RELAXC_FUZZ_COUNT programs (default 5000) from RELAXC_FUZZ_SEED (default 100000)."""
    count = int(os.environ.get("RELAXC_FUZZ_COUNT", "5000"))
    seed = int(os.environ.get("RELAXC_FUZZ_SEED", "100000"))
    report = run_campaign(seed_items(seed, count, 5), chunk=200)
    print("\n" + report.summary())
    unknown = dataclasses.replace(report, found=[f for f in report.found if not _known(f)])
    assert not unknown.found, _show(unknown)


@pytest.mark.fuzz
@settings(
    max_examples=int(os.environ.get("RELAXC_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(fuzz_programs(shrinkable=True))
def test_shrinkable_programs_on_the_vm(prog: GenProgram) -> None:
    """Programs whose every choice is a hypothesis draw, so that hypothesis shrinks a failure
    itself (VM and passes only: a C build per example would be slow)."""
    check_program(prog)

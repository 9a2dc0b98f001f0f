"""Hundreds of grammar-aware mutations of the sample programs, through the whole CLI.

The seeds are the four samples, two of them after the vm pipeline (every allocation, arena,
invoke and kill written out) and the VM tests' kitchen sink (every instruction). Each is
mutated at token level with a fixed seed (see :mod:`.mutate`) and cut before, inside and
after a token of every kind. Every mutant goes through ``relaxc check`` in-process; a
subset also through ``build`` (vm and C), ``run``, ``fmt`` and ``report``, with the output
folder compared before and after; a few through a real subprocess.

A mutant may well be a valid program: then relaxc must accept it (and its canonical form
must check again). Otherwise it must say what is wrong, at the right line and column, with
exit status 1. Never an internal error, a traceback or a hang.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.vm import load_file
from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.ir.verifier import verify_module
from relaxc.passes.assemble import assemble_pipeline
from relaxc.passes.pipeline import Pipeline

from .harness import (
    SAMPLES,
    changed,
    check_problems,
    crash_problems,
    error_problems,
    invoke,
    leftovers,
    report,
    run_subprocesses,
    snapshot,
)
from .mutate import mutants, truncations
from ..backend.vm.util import KITCHEN_SINK, KITCHEN_WEIGHTS


def _lowered(stem: str) -> str:
    module = parse_module((SAMPLES / f"{stem}.rx").read_text(), f"{stem}.rx")
    return print_module(
        Pipeline(assemble_pipeline("vm", None, (), ())).run(module, verify_module(module))
    )


# name -> (text, weights .npz to put beside it or None, mutants to make, seed)
SEEDS = {
    "relay_memory": ((SAMPLES / "relay_memory.rx").read_text(), None, 90, 1),
    "mlp": ((SAMPLES / "mlp.rx").read_text(), SAMPLES / "mlp.npz", 90, 2),
    "transformer": ((SAMPLES / "transformer.rx").read_text(), SAMPLES / "transformer.npz", 100, 3),
    "cnn": ((SAMPLES / "cnn.rx").read_text(), SAMPLES / "cnn.npz", 70, 4),
    "mlp_lowered": (_lowered("mlp"), SAMPLES / "mlp.npz", 70, 5),
    "relay_memory_lowered": (_lowered("relay_memory"), None, 70, 6),
    "kitchen_sink": (KITCHEN_SINK, "kitchen", 90, 7),
}
CORPUS = {name: mutants(text, seed, count) for name, (text, _, count, seed) in SEEDS.items()}
CUTS = {
    name: list(truncations(SEEDS[name][0]))
    for name in ("transformer", "mlp_lowered", "kitchen_sink")
}


def test_corpus_size() -> None:
    """The corpus is several hundred distinct cases, the same on every run."""
    assert sum(len(v) for v in CORPUS.values()) >= 550
    assert sum(len(v) for v in CUTS.values()) >= 120
    assert CORPUS["mlp"] == mutants(SEEDS["mlp"][0], 2, 90)
    for name, cases in CORPUS.items():
        kinds = {n.split("@")[0] for n, _ in cases}
        assert len(kinds) >= 12, (name, kinds)


def _place(folder: Path, name: str, text: str) -> Path:
    """Write the mutant as ``folder/NAME.rx`` with its seed's weights beside it."""
    path = folder / f"{name}.rx"
    path.write_text(text, encoding="utf-8")
    weights = SEEDS[name][1]
    if weights == "kitchen":
        np.savez(folder / f"{name}.npz", **KITCHEN_WEIGHTS)
    elif weights is not None and not (folder / f"{name}.npz").exists():
        shutil.copy(weights, folder / f"{name}.npz")
    return path


@pytest.mark.parametrize("name", list(SEEDS))
def test_every_mutant_checks_cleanly(tmp_path: Path, name: str) -> None:
    """``relaxc check`` on every mutant and cut: ok, or one error at the right place."""
    failures = []
    cases = CORPUS[name] + CUTS.get(name, [])
    for label, text in cases:
        path = _place(tmp_path, name, text)
        o = invoke("check", path)
        problems = check_problems(o, path, text)
        if problems:
            failures.append(f"[{name} {label}] " + "; ".join(problems) + f"\n{o}")
    report(failures, f"mutants of {name}")


def _canonical_checks(folder: Path, name: str, text: str) -> list[str]:
    """A program that checks: its canonical form (fmt --stdout) checks as well."""
    path = _place(folder, name, text)
    fmt = invoke("fmt", "--stdout", path)
    problems = crash_problems(fmt, codes=(0,))
    if problems:
        return problems
    again = folder / f"{name}.canonical.rx"
    again.write_text(fmt.stdout, encoding="utf-8")
    if (folder / f"{name}.npz").exists():
        shutil.copy(folder / f"{name}.npz", folder / f"{name}.canonical.npz")
    o = invoke("check", again)
    return [f"its canonical form does not check: {o}"] if o.code != 0 else []


@pytest.mark.parametrize(
    "name", ["relay_memory", "mlp", "transformer", "mlp_lowered", "kitchen_sink"]
)
def test_mutants_build_run_and_format_cleanly(tmp_path: Path, name: str) -> None:
    """Every third mutant through build (vm), run, fmt --check and report: a clean success or a
    clean error, and the output folder holds the complete new output or exactly what it held
    before (a stale output from an earlier run is left alone by a failed one)."""
    failures = []
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    for label, text in CORPUS[name][::3]:
        path = _place(work, name, text)
        checked = invoke("check", path)
        problems = []
        (out / "prog.rxb").write_bytes(b"stale output of an earlier build")
        (out / "y.npz").write_bytes(b"stale outputs of an earlier run")
        before = snapshot(out)
        built = invoke("build", path, "-o", out / "prog.rxb", "-q")
        problems += [f"build: {p}" for p in crash_problems(built)]
        if built.code == 1:
            problems += [f"build: {p}" for p in error_problems(built.stderr, path, text)]
            if changed(before, snapshot(out)):
                problems.append(
                    "a failed build changed the output folder: "
                    f"{sorted(changed(before, snapshot(out)))}"
                )
        elif built.code == 0:
            if changed(before, snapshot(out)) != {"prog.rxb"}:
                problems.append(f"build changed {sorted(changed(before, snapshot(out)))}")
            try:
                load_file(out / "prog.rxb")
            except Exception as e:  # noqa: BLE001
                problems.append(f"build wrote an .rxb its loader refuses: {e}")
            if checked.code != 0:
                problems.append("build accepted a program that check refuses")
        ran = invoke("run", path, "-o", out / "y.npz", "--seed", "1")
        problems += [f"run: {p}" for p in crash_problems(ran)]
        if ran.code == 0:
            with np.load(out / "y.npz", allow_pickle=False) as z:
                if not z.files:
                    problems.append("run wrote an empty .npz")
        elif ran.code == 1 and (out / "y.npz").read_bytes() != b"stale outputs of an earlier run":
            problems.append("a failed run changed its -o file")
        before_fmt = path.read_bytes()
        fmt = invoke("fmt", "--check", path)
        problems += [f"fmt --check: {p}" for p in crash_problems(fmt)]
        if path.read_bytes() != before_fmt:
            problems.append("fmt --check changed the file")
        rep = invoke("report", path, "--json")
        problems += [f"report: {p}" for p in crash_problems(rep)]
        if checked.code == 0:
            problems += _canonical_checks(work, name, text)
        problems += [f"temporary file left: {t}" for t in leftovers(tmp_path)]
        if problems:
            failures.append(f"[{name} {label}] " + "; ".join(problems))
    report(failures, f"mutants of {name} (build/run/fmt/report)")


@pytest.mark.parametrize("name", ["relay_memory", "mlp", "kitchen_sink"])
def test_mutants_through_the_c_target(tmp_path: Path, name: str) -> None:
    """Every fifth mutant through ``build -t c``: both files or neither, never a crash."""
    failures = []
    work, out = tmp_path / "work", tmp_path / "c"
    work.mkdir()
    out.mkdir()
    for label, text in CORPUS[name][1::5]:
        path = _place(work, name, text)
        before = snapshot(out)
        o = invoke("build", path, "-t", "c", "-o", out, "--prefix", "m", "-q")
        problems = crash_problems(o)
        after = snapshot(out)
        if o.code == 1:
            problems += error_problems(o.stderr, path, text)
            if changed(before, after):
                problems.append(
                    f"a failed build changed the folder: {sorted(changed(before, after))}"
                )
        elif o.code == 0 and not {"m.c", "m.h"} <= set(after):
            problems.append(f"build -t c succeeded without writing m.c and m.h: {sorted(after)}")
        if problems:
            failures.append(f"[{name} {label}] " + "; ".join(problems))
    report(failures, f"mutants of {name} (C target)")


def test_mutants_in_a_real_process(tmp_path: Path) -> None:
    """A few mutants through ``python -m relaxc.cli.main``: the real exit status, stderr in
    the documented form, no traceback."""
    picked = []
    for name in ("mlp", "transformer", "kitchen_sink", "relay_memory_lowered"):
        picked += [(name, label, text) for label, text in CORPUS[name][:1]]
    commands, paths = [], []
    for i, (name, label, text) in enumerate(picked):
        folder = tmp_path / f"case{i}"
        folder.mkdir()
        path = _place(folder, name, text)
        paths.append((path, text, name, label))
        commands.append(("check", path))
    failures = []
    for (path, text, name, label), o in zip(paths, run_subprocesses(commands)):
        problems = check_problems(o, path, text)
        if problems:
            failures.append(f"[{name} {label}] " + "; ".join(problems) + f"\n{o}")
    report(failures, "mutants in a subprocess")
    assert len(picked) == 4

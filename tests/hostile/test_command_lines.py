"""Bad command lines for every command: unknown options, bad values for every option,
missing files, folders where files are expected, outputs that are inputs (under another
spelling, through a link), outputs in folders that do not exist or cannot be written.

Each case states the exit status (2 for a usage error, 1 for an input or file error) and a
phrase of the message. The working folder is compared before and after: a failed command
writes nothing and changes no input.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from .harness import SAMPLES, changed, crash_problems, invoke, report, run_subprocesses, snapshot

# (arguments, exit status, phrase). In the arguments, {m} is mlp.rx (weights mlp.npz beside
# it), {w} its weights, {b} mlp.rxb, {r} relay_memory.rx (n <= 64), {d} a folder, {x} a path
# that does not exist, {l} a symbolic link to {m}, {i} an inputs file for mlp.
USAGE, FAIL = 2, 1
CASES: list[tuple[tuple[str, ...], int, str]] = [
    # relaxc itself
    (("--bogus",), USAGE, "No such option"),
    (("bogus",), USAGE, "No such command"),
    (("--debug", "bogus"), USAGE, "No such command"),
    # check
    (("check",), USAGE, "Missing argument"),
    (("check", "--no-such-option", "{m}"), USAGE, "No such option"),
    (("check", "{m}", "--params"), USAGE, "requires an argument"),
    (("check", "--quiet=yes", "{m}"), USAGE, "does not take a value"),
    (("check", "{x}"), FAIL, "does not exist"),
    (("check", "{d}"), FAIL, "is a directory"),
    (("check", ""), FAIL, "is a directory"),
    (("check", "{w}"), FAIL, "is a binary file"),
    (("check", "{b}"), FAIL, "is a binary file"),
    (("check", "{m}", "--params", "{x}"), FAIL, "does not exist"),
    (("check", "{m}", "--params", "{d}"), FAIL, "is a directory"),
    (("check", "{m}", "--params", "{m}"), FAIL, "is not a readable .npz archive"),
    (("check", "{m}", "--params", "{i}"), FAIL, "weight 'fc1.weight' is not in"),
    # fmt
    (("fmt",), USAGE, "Missing argument"),
    (("fmt", "--diff=1", "{m}"), USAGE, "does not take a value"),
    (("fmt", "--in-place", "{m}"), USAGE, "No such option"),
    (("fmt", "{x}"), FAIL, "does not exist"),
    (("fmt", "{d}"), FAIL, "is a directory"),
    (("fmt", "{w}"), FAIL, "is a binary file"),
    # run
    (("run",), USAGE, "Missing argument"),
    (("run", "{m}", "{m}"), USAGE, "unexpected extra argument"),
    (("run", "{m}", "--seed", "abc"), USAGE, "'abc' is not a valid integer"),
    (("run", "{m}", "--seed", "-1"), USAGE, "-1 is not in the range x>=0"),
    (("run", "{m}", "--seed", "1e3"), USAGE, "is not a valid integer"),
    (("run", "{m}", "--seed", ""), USAGE, "is not a valid integer"),
    (("run", "{m}", "--seed", "1.5"), USAGE, "is not a valid integer"),
    (("run", "{m}", "--seed"), USAGE, "requires an argument"),
    (("run", "{r}", "--dim", "n"), USAGE, "is not NAME=VALUE"),
    (("run", "{r}", "--dim", "=3"), USAGE, "is not NAME=VALUE"),
    (("run", "{r}", "--dim", "1n=3"), USAGE, "is not NAME=VALUE"),
    (("run", "{r}", "--dim", "n=abc"), USAGE, "is not an integer"),
    (("run", "{r}", "--dim", "n=1.5"), USAGE, "is not an integer"),
    (("run", "{r}", "--dim", "n=-1"), USAGE, "cannot be negative"),
    (("run", "{r}", "--dim", "n=" + "9" * 5000), USAGE, "is not an integer"),
    (("run", "{r}", "--dim", "n=3", "--dim", "n=4"), USAGE, "given twice"),
    (("run", "{m}", "--inputs"), USAGE, "requires an argument"),
    (("run", "{m}", "--stats=1"), USAGE, "does not take a value"),
    (("run", "{b}", "--params", "{w}"), USAGE, "an .rxb holds its own"),
    (("run", "{m}", "--source", "{m}"), USAGE, "--source needs an .rxb FILE and --check"),
    (("run", "{b}", "--source", "{m}"), USAGE, "--source needs an .rxb FILE and --check"),
    (("run", "{x}"), FAIL, "does not exist"),
    (("run", "{d}"), FAIL, "is a directory"),
    (("run", ""), FAIL, "is a directory"),
    (("run", "{w}"), FAIL, "is a binary file"),
    (("run", "{m}", "--entry", ""), FAIL, "has no function @"),
    (("run", "{m}", "--entry", "nope"), FAIL, "has no function @nope (functions: @main)"),
    (("run", "{m}", "--entry", "@main"), FAIL, "has no function @@main"),
    (
        ("run", "{r}", "--entry", "fused_add_subtract"),
        FAIL,
        "has no upper bound; give its value with --dim n=N",
    ),
    (("run", "{r}", "--dim", "m=3"), FAIL, "has no symbolic dim 'm'"),
    (("run", "{r}", "--dim", "n=65"), FAIL, "larger than its upper bound 64"),
    (("run", "{r}", "--dim", "n=99999999999999999999"), FAIL, "larger than its upper bound 64"),
    (("run", "{m}", "--dim", "n=3"), FAIL, "has no symbolic dim 'n'"),
    (("run", "{m}", "--inputs", "{x}"), FAIL, "does not exist"),
    (("run", "{m}", "--inputs", "{d}"), FAIL, "is a directory"),
    (("run", "{m}", "--inputs", "{m}"), FAIL, "is not a readable .npz archive"),
    (("run", "{m}", "--inputs", "{w}"), FAIL, "does not match @main"),
    (("run", "{m}", "--params", "{x}"), FAIL, "does not exist"),
    (("run", "{m}", "-o", "{m}"), FAIL, "refusing to write"),
    (("run", "{m}", "-o", "{w}"), FAIL, "refusing to write"),
    (("run", "{m}", "-o", "{dd}/../mlp.npz"), FAIL, "refusing to write"),
    (("run", "{m}", "-o", "{l}"), FAIL, "refusing to write"),
    (("run", "{m}", "--inputs", "{i}", "-o", "{i}"), FAIL, "refusing to write"),
    (("run", "{b}", "-o", "{b}"), FAIL, "refusing to write"),
    (("run", "{b}", "--check", "--source", "{m}", "-o", "{w}"), FAIL, "refusing to write"),
    (("run", "{b}", "--check", "--source", "{x}"), FAIL, "does not exist"),
    (("run", "{m}", "-o", "{d}"), FAIL, "is a directory"),
    (("run", "{m}", "-o", "{x}/y.npz"), FAIL, "does not exist"),
    (("run", "{m}", "-o", "{m}/y.npz"), FAIL, "does not exist"),
    (("run", "{m}", "-o", ""), FAIL, "is a directory"),
    (("run", "{m}", "-o", "/proc/relaxc-y.npz"), FAIL, "cannot write"),
    # build
    (("build",), USAGE, "Missing argument"),
    (("build", "{m}", "-t", "wasm"), USAGE, "'wasm' is not one of 'vm', 'c', 'ir'"),
    (("build", "{m}", "-t", ""), USAGE, "is not one of"),
    (("build", "{m}", "-t", "VM"), USAGE, "is not one of"),
    (("build", "{m}", "--max-arena", "12 parsecs"), USAGE, "is not a size"),
    (("build", "{m}", "--max-arena", "-1"), USAGE, "is not a size"),
    (("build", "{m}", "--max-arena", "1e5"), USAGE, "is not a size"),
    (("build", "{m}", "--max-arena", "nan"), USAGE, "is not a size"),
    (("build", "{m}", "--max-arena", "inf"), USAGE, "is not a size"),
    (("build", "{m}", "--max-arena", ""), USAGE, "is not a size"),
    (("build", "{m}", "--max-arena", "0.5"), USAGE, "is not a whole number of bytes"),
    (("build", "{m}", "--max-arena", "1.0000001KiB"), USAGE, "is not a whole number of bytes"),
    (("build", "{m}", "--max-arena", "9" * 5000), USAGE, "too many digits"),
    (("build", "{m}", "--prefix", "x"), USAGE, "--prefix is only for --target c"),
    (("build", "{m}", "--unpacked"), USAGE, "--unpacked is only for --target c"),
    (("build", "{m}", "--emit-main", "-t", "ir"), USAGE, "--emit-main is only for --target c"),
    (("build", "{m}", "--json", "-t", "ir", "-o", "-"), USAGE, "cannot go there too"),
    (("build", "{x}"), FAIL, "does not exist"),
    (("build", "{d}"), FAIL, "is a directory"),
    (("build", "{m}", "--params", "{x}"), FAIL, "does not exist"),
    (("build", "{m}", "-o", "{m}"), FAIL, "refusing to write"),
    (("build", "{m}", "-o", "{w}"), FAIL, "refusing to write"),
    (("build", "{m}", "-o", "{l}"), FAIL, "refusing to write"),
    (("build", "{m}", "-t", "ir", "-o", "{dd}/../mlp.rx"), FAIL, "refusing to write"),
    (("build", "{m}", "-o", "{d}"), FAIL, "is a directory"),
    (("build", "{m}", "-o", ""), FAIL, "is a directory"),
    (("build", "{m}", "-o", "{x}/m.rxb"), FAIL, "does not exist"),
    (("build", "{m}", "-o", "{m}/m.rxb"), FAIL, "does not exist"),
    (("build", "{m}", "-o", "-"), FAIL, "bytecode is binary"),
    (("build", "{m}", "-o", "/proc/relaxc-m.rxb"), FAIL, "cannot write"),
    (("build", "{m}", "-t", "ir", "-o", "/proc/relaxc-m.rx"), FAIL, "cannot write"),
    (("build", "{m}", "--max-arena", "4KiB"), FAIL, "memory budget exceeded"),
    (("build", "{m}", "--max-arena", "0"), FAIL, "memory budget exceeded"),
    (("build", "{m}", "-t", "c", "-o", "{m}"), FAIL, "refusing to write"),
    (("build", "{m}", "-t", "c", "-o", "{i}"), FAIL, "writes into a folder, and this is a file"),
    (("build", "{m}", "-t", "c", "-o", "-"), FAIL, "give a folder"),
    (("build", "{m}", "-t", "c", "-o", "/proc/relaxc-c"), FAIL, "cannot create folder"),
    (("build", "{m}", "-t", "c", "-o", "{m}/c"), FAIL, "cannot create folder"),
    (
        ("build", "{m}", "-t", "c", "--prefix", "1bad"),
        FAIL,
        "is not usable as a C identifier prefix",
    ),
    (("build", "{m}", "-t", "c", "--prefix", ""), FAIL, "is not usable as a C identifier prefix"),
    (
        ("build", "{m}", "-t", "c", "--prefix", "int"),
        FAIL,
        "is not usable as a C identifier prefix",
    ),
    (
        ("build", "{m}", "-t", "c", "--prefix", "a" * 100),
        FAIL,
        "is not usable as a C identifier prefix",
    ),
    (
        ("build", "{m}", "-t", "c", "--prefix", "a__b"),
        FAIL,
        "is not usable as a C identifier prefix",
    ),
    # the pipeline options (build, passes, report)
    (("build", "{m}", "-p", "Bogus"), FAIL, "unknown pass 'Bogus'"),
    (("build", "{m}", "-p", "{{{"), FAIL, "unclosed '{'"),
    (("build", "{m}", "-p", "PlanMemory"), FAIL, "run ManifestAlloc before it"),
    (
        ("build", "{m}", "-p", "ManifestAlloc,PlanMemory{planner=}"),
        FAIL,
        "PlanMemory.planner must be one of",
    ),
    (("build", "{m}", "-p", ",,,"), FAIL, "error"),
    (("passes", "{m}", "--disable-pass", "Nope"), FAIL, "Nope"),
    (("passes", "{m}", "--disable-pass", "LegalizePackedCalls"), FAIL, "LegalizePackedCalls"),
    (("passes", "{m}", "--pass-config", "x"), FAIL, "is not NAME.KEY=VALUE"),
    (("passes", "{m}", "--pass-config", "PlanMemory.nope=1"), FAIL, "nope"),
    (("passes", "{m}", "--pass-config", "PlanMemory.planner=fast"), FAIL, "must be one of"),
    (
        ("passes", "{m}", "--pass-config", "ManifestAlloc.align=3"),
        FAIL,
        "is not a power of two from 1 to 4096",
    ),
    (("passes", "{m}", "--pass-config", "ManifestAlloc.align=" + "9" * 5000), FAIL, "align"),
    (
        ("passes", "{m}", "--pass-config", "PlanMemory.time_limit=1e400"),
        FAIL,
        "must be a finite number",
    ),
    (
        ("passes", "{m}", "--pass-config", "PlanMemory.time_limit=-1"),
        FAIL,
        "must be a finite number",
    ),
    (("passes", "{m}", "--pass-config", "Bogus.x=1"), FAIL, "Bogus"),
    (("passes", "{m}", "--dump-after", "Nope"), FAIL, "Nope"),
    (
        ("passes", "{m}", "--dump-before", "KillAfterLastUse", "-p", "ManifestAlloc"),
        FAIL,
        "KillAfterLastUse",
    ),
    (
        ("passes", "{m}", "--dump-dir", "{d}"),
        FAIL,
        "--dump-dir needs --dump-before or --dump-after",
    ),
    (
        ("passes", "{m}", "--dump-after", "all", "--dump-dir", "{m}"),
        FAIL,
        "it exists and is not a folder",
    ),
    (
        ("passes", "{m}", "--dump-after", "all", "--dump-dir", "/proc/relaxc-d"),
        FAIL,
        "cannot create it",
    ),
    (("passes", "{m}", "-t", "bogus"), USAGE, "is not one of"),
    (("passes", "{x}"), FAIL, "does not exist"),
    # report
    (("report", "{m}", "-t", "x"), USAGE, "is not one of"),
    (("report", "{m}", "--max-arena", "x"), USAGE, "is not a size"),
    (("report", "{m}", "--svg"), USAGE, "requires an argument"),
    (("report", "{x}"), FAIL, "does not exist"),
    (("report", "{m}", "--svg", "{m}"), FAIL, "refusing to write"),
    (("report", "{m}", "--html", "{w}"), FAIL, "refusing to write"),
    (("report", "{m}", "--svg", "{d}"), FAIL, "is a directory"),
    (("report", "{m}", "--svg", "/proc/relaxc.svg"), FAIL, "cannot write"),
    (("report", "{m}", "--html", "{x}/r.html"), FAIL, "does not exist"),
    # import (the ONNX importer; the cases that need no onnx package)
    (("import",), USAGE, "Missing argument"),
    (("import", "{o}", "--shape", "x"), USAGE, "is not NAME=D1,D2,..."),
    (("import", "{o}", "--shape", "x=1,-5"), USAGE, "cannot be negative"),
    (("import", "{o}", "--bound", "n"), USAGE, "is not NAME=VALUE"),
    (("import", "{o}", "--bound", "n=-1"), USAGE, "cannot be negative"),
    (("import", "{o}"), FAIL, "does not exist"),
    (("import", "{m}"), FAIL, "is not an ONNX model: it is text: an .rx program"),  # issue 18
    (("import", "{o}", "-o", "{d}/m.npz"), FAIL, "must end in .rx"),
    # disasm
    (("disasm",), USAGE, "Missing argument"),
    (("disasm", "{b}", "--ir=1"), USAGE, "does not take a value"),
    (("disasm", "{x}"), FAIL, "does not exist"),
    (("disasm", "{d}"), FAIL, "is a directory"),
    (("disasm", "{m}"), FAIL, "is not a relaxc bytecode file"),
    (("disasm", "{w}"), FAIL, "is not a relaxc bytecode file"),
]


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str]:
    """A folder with mlp.rx, its weights, mlp.rxb, relay_memory.rx, an inputs file, a link and a
    sub-folder; the keys are the placeholders of CASES."""
    root = tmp_path / "world"
    root.mkdir()
    for name in ("mlp.rx", "mlp.npz", "relay_memory.rx"):
        shutil.copy(SAMPLES / name, root / name)
    built = invoke("build", root / "mlp.rx", "-q")
    assert built.code == 0, built
    (root / "dir").mkdir()
    (root / "link.rx").symlink_to(root / "mlp.rx")
    np.savez(root / "in.npz", x=np.zeros((8, 64), np.float32))
    return {
        "m": str(root / "mlp.rx"),
        "w": str(root / "mlp.npz"),
        "b": str(root / "mlp.rxb"),
        "r": str(root / "relay_memory.rx"),
        "d": str(root / "dir"),
        "dd": str(root / "dir"),
        "x": str(root / "missing.rx"),
        "o": str(root / "missing.onnx"),
        "l": str(root / "link.rx"),
        "i": str(root / "in.npz"),
        "root": str(root),
    }


def _args(args: tuple[str, ...], world: dict[str, str]) -> list[str]:
    out = []
    for a in args:
        for key in ("dd", "m", "w", "b", "r", "d", "x", "o", "l", "i"):
            a = a.replace("{" + key + "}", world[key])
        out.append(a)
    return out


def _judge(o, code: int, needle: str, before: dict, after: dict) -> list[str]:
    problems = crash_problems(o, codes=(code,))
    if needle not in o.stderr:
        problems.append(f"{needle!r} is not in the message")
    if code == USAGE and not o.stderr.split("\n")[0].startswith(("Usage: relaxc", "Error: ")):
        problems.append("a usage error that does not start with the usage line or 'Error:'")
    if code == FAIL:
        first = [line for line in o.stderr.split("\n") if line and not line.startswith("@")][:1]
        if not first or not (first[0].startswith("error: ") or ": error: " in first[0]):
            problems.append(f"not 'error: ...': {o.stderr[:200]!r}")
    if changed(before, after):
        problems.append(f"the folder changed: {sorted(changed(before, after))}")
    return problems


@pytest.mark.parametrize("chunk", range(3))
def test_bad_command_lines(world: dict[str, str], chunk: int) -> None:
    root = Path(world["root"])
    failures = []
    for args, code, needle in CASES[chunk::3]:
        argv = _args(args, world)
        before = snapshot(root)
        o = invoke(*argv, timeout=60)
        failures += [f"{p}\n{o}" for p in _judge(o, code, needle, before, snapshot(root))]
    report(failures, "bad command lines")


def test_there_are_many_cases() -> None:
    assert len(CASES) >= 150
    for command in ("check", "fmt", "run", "build", "passes", "report", "disasm", "import"):
        assert sum(1 for a, _, _ in CASES if a and a[0] == command) >= 5, command


def test_bad_command_lines_in_a_real_process(world: dict[str, str]) -> None:
    """A few through ``python -m relaxc.cli.main``: the real exit status and stderr."""
    wanted = [
        ("run", "{m}", "--seed", "-1"),
        ("run", "{m}", "-o", "{w}"),
        ("build", "{m}", "-t", "wasm"),
        ("build", "{m}", "-o", "/proc/relaxc-m.rxb"),
        ("check", "{d}"),
    ]
    picked = [c for c in CASES if c[0] in wanted]
    assert len(picked) == len(wanted)
    root = Path(world["root"])
    before = snapshot(root)
    outcomes = run_subprocesses([_args(a, world) for a, _, _ in picked], cwd=root)
    failures = []
    for (args, code, needle), o in zip(picked, outcomes):
        failures += [f"{p}\n{o}" for p in _judge(o, code, needle, before, snapshot(root))]
    report(failures, "bad command lines in a subprocess")


def test_an_unwritable_folder(world: dict[str, str], tmp_path: Path) -> None:
    """A folder without write permission (meaningless for root, who may write anywhere)."""
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        for args in (
            ("build", world["m"], "-o", folder / "m.rxb"),
            ("run", world["m"], "-o", folder / "y.npz"),
            ("build", world["m"], "-t", "c", "-o", folder / "c"),
            ("fmt", folder / "x.rx"),
        ):
            o = invoke(*args)
            assert crash_problems(o, codes=(1,)) == [], o
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)

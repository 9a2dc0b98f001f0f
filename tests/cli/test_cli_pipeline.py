"""Behaviour of the pipeline commands of the relaxc command line: passes, build and report.

The CLI runs in-process through click's CliRunner (real exceptions propagate, so a crash is
never mistaken for an exit code); determinism is checked across two subprocesses with
different hash seeds. Programs are the shipped samples (copied into ``tmp_path`` so nothing
can write beside the originals) and small inline ones.

What a user should get is what is asserted; where relaxc does otherwise today the test is a
strict xfail naming the problem.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from click.testing import CliRunner

from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.cli.main import cli
from relaxc.cli.units import short_bytes
from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.frontend.weights import load_npz
from relaxc.ir.nodes import Module, Var
from relaxc.ir.verifier import ModuleTypes, verify_module
from relaxc.passes.base import Pass
from relaxc.passes.properties import PACKED_CALLS
from relaxc.passes.registry import PASSES, PIPELINES
from relaxc.passes.spec import describe_options, kebab

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "samples"
SAMPLES = ["relay_memory", "mlp", "cnn", "transformer"]
VM = list(PIPELINES["vm"])
IN_PLACE = "ElideConcatSplit,ComputeInPlace"  # to --disable-pass where a test is about reuse

# In place, each relu writes over its dense's output and the last dense into softmax's
# output (the result): only %h1 and %h2 are buffers, live together. Against one buffer per
# tensor (four (8, 128) f32 values and two (8, 10) ones: 17,024 B) the arena and the output
# (8,512 B) are half.
MLP_SUMMARY = (
    "@main: arena 8.0 KiB (8,192 B), 1.00x the lower bound 8.0 KiB (8,192 B), "
    "50% less than one buffer per tensor (16.6 KiB)"
)

# Two non-primitive functions: one summary line each.
TWO = """\
fn @helper(%x: Tensor[(16,), f32]) -> Tensor[(16,), f32] {
  %a = relu(%x)
  %b = exp(%a)
  %c = add(%a, %b)
  return %c
}

fn @main(%x: Tensor[(16,), f32]) -> Tensor[(16,), f32] {
  %y = call @helper(%x)
  %z = negative(%y)
  %w = exp(%z)
  return %w
}
"""

# An unbounded symbolic dim: nothing can be planned, the allocations stay dynamic.
DYNAMIC = """\
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  %a = relu(%x)
  %b = exp(%a)
  %c = negative(%b)
  %d = exp(%c)
  return %d
}
"""

# Buffers already wrapped into packed-call structs (what LegalizePackedCalls makes).
LEGALIZED = """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = memory.alloc_storage(64)
  %t = memory.alloc_tensor(%s, 0, (4,), f32)
  %h = tir.stack_alloca("array", 1)
  tir.struct_set(%h, 0, "data", %t)
  %r: Object = call_cpacked("exp", %x, %h)
  return %t
}
"""

BROKEN_SYNTAX = """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %a = relu(%x
  return %a
}
"""

HEADER = re.compile(r"^# ===== IR (before|after) (\w+) \(pass (\d+)\) =====$", re.M)


# ---------------------------------------------------------------------------------------
# Helpers


def invoke(*args: object, columns: int | None = None):
    env = {"RELAXC_DEBUG": None, "COLUMNS": str(columns) if columns else None}
    return CliRunner().invoke(
        cli, [str(a) for a in args], env=env, prog_name="relaxc", catch_exceptions=False
    )


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    """A copy of samples/ (models and weights) in a fresh folder."""
    folder = tmp_path / "samples"
    shutil.copytree(
        SAMPLES_DIR,
        folder,
        ignore=shutil.ignore_patterns("*.py", "__pycache__", "*.rxb", "*.lowered.rx"),
    )
    return folder


def assert_user_error(result, *needles: str) -> None:
    """Exit 1, each needle in stderr, no traceback and no 'internal error'."""
    assert result.exit_code == 1, f"exit {result.exit_code}:\n{result.output}"
    for n in needles:
        assert n in result.stderr, f"{n!r} not in:\n{result.stderr}"
    assert "Traceback" not in result.output
    assert "internal error" not in result.output


def assert_usage_error(result, *needles: str) -> None:
    assert result.exit_code == 2, f"exit {result.exit_code}:\n{result.output}"
    for n in needles:
        assert n in result.stderr, f"{n!r} not in:\n{result.stderr}"
    assert "Traceback" not in result.output


def parses(text: str, name: str = "dump.rx") -> Module:
    m = parse_module(text, name)
    verify_module(m)
    return m


def split_dumps(stdout: str) -> list[tuple[str, str, int, str]]:
    """(when, pass, pass number, text) of each dump section, in order; nothing before the first."""
    heads = list(HEADER.finditer(stdout))
    assert heads, f"no dump headers in:\n{stdout}"
    assert stdout[: heads[0].start()] == ""
    out = []
    for k, h in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(stdout)
        # (+1: the newline)
        out.append((h.group(1), h.group(2), int(h.group(3)), stdout[h.end() + 1 : end]))
    return out


def canonical(path: Path) -> str:
    return print_module(parse_module(path.read_text(), str(path)))


def weights_of(path: Path) -> dict[str, np.ndarray]:
    npz = path.with_suffix(".npz")
    return dict(load_npz(npz)) if npz.exists() else {}


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@dataclass(frozen=True)
class BreakTheIR(Pass):
    """A pass with a bug: @main returns an undefined value."""

    name: ClassVar[str] = "BreakTheIR"
    summary: ClassVar[str] = "test pass: produces invalid IR"

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        return Module(
            tuple(replace(f, ret=Var("nope")) if f.name == "main" else f for f in module.functions),
            module.loc,
        )


# ---------------------------------------------------------------------------------------
# relaxc passes (the listing)


def test_passes_lists_every_pass_with_summary_and_options() -> None:
    result = invoke("passes", columns=200)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for name, cls in PASSES.items():
        assert name in out
        assert f"({kebab(name)})" in out
        for word in cls.summary.split():
            assert word in out, f"{word!r} of {name}'s summary missing"
        for opt, typ, default in describe_options(cls):
            assert f"{opt} = {default}  ({typ.replace('|', ' | ')})" in out
    assert "planner = best  (none | greedy-size | greedy-conflict | best)" in out
    assert "needs explicit-memory" in out and "refuses packed-calls" in out
    assert (
        "explicit-memory: explicit memory (every computed value written into an allocated tensor)"
    ) in out


def test_passes_lists_the_named_pipelines() -> None:
    out = invoke("passes", columns=200).stdout
    assert "named pipelines (-p NAME)" in out
    for name, seq in PIPELINES.items():
        assert re.search(rf"│ {name} +│ {re.escape(', '.join(seq) or '(none)')} +│", out), name


def test_passes_listing_readable_at_80_columns() -> None:
    out = invoke("passes", columns=80).stdout
    assert "kill-after-last-use" in out
    assert "greedy-conflict" in out


def test_passes_help_names_every_pipeline_option() -> None:
    out = invoke("passes", "--help").stdout
    for opt in (
        "-p, --passes",
        "--disable-pass",
        "--pass-config",
        "--dump-before",
        "--dump-after",
        "--dump-dir",
        "--time-passes",
        "--no-verify",
        "-t, --target",
        "--params",
    ):
        assert opt in out


# ---------------------------------------------------------------------------------------
# relaxc passes FILE: the final IR and dumps


@pytest.mark.parametrize("stem", SAMPLES)
def test_passes_prints_final_ir_that_parses(samples: Path, stem: str) -> None:
    result = invoke("passes", samples / f"{stem}.rx")
    assert result.exit_code == 0, result.output
    m = parses(result.stdout)
    assert all(f.attr("planned") is True for f in m.functions if not f.is_primitive)
    assert print_module(m) == result.stdout  # canonical text


def test_dump_after_plan_memory(samples: Path) -> None:
    result = invoke("passes", samples / "mlp.rx", "--dump-after", "PlanMemory")
    assert result.exit_code == 0, result.output
    sections = split_dumps(result.stdout)
    assert [(w, p, n) for w, p, n, _ in sections] == [
        ("after", "PlanMemory", VM.index("PlanMemory") + 1)
    ]
    m = parses(sections[0][3])
    assert m.get("main").attr("planned") is True
    assert "arena=true" in sections[0][3]


@pytest.mark.parametrize("stem", SAMPLES)
@pytest.mark.parametrize(
    "flags",
    [
        ("--dump-after", "all"),
        ("--dump-before", "all"),
        ("--dump-before", "all", "--dump-after", "all"),
    ],
    ids=["after", "before", "both"],
)
def test_every_dump_section_parses_and_verifies(
    samples: Path, stem: str, flags: tuple[str, ...]
) -> None:
    path = samples / f"{stem}.rx"
    result = invoke("passes", path, *flags)
    assert result.exit_code == 0, result.output
    sections = split_dumps(result.stdout)
    whens = [w for w in ("before", "after") if f"--dump-{w}" in flags]
    assert [(w, p, n) for w, p, n, _ in sections] == [
        (w, p, i + 1) for i, p in enumerate(VM) for w in whens
    ]
    for when, name, _, text in sections:
        parses(text, f"{when}-{name}.rx")
    final = invoke("passes", path).stdout
    if "after" in whens:
        assert sections[-1][3].rstrip("\n") == final.rstrip("\n")  # the last dump is the result
    if "before" in whens:
        assert sections[0][3].rstrip("\n") == canonical(path).rstrip("\n")  # the first is the input


def test_dump_before_a_pass_is_the_dump_after_the_previous_one(samples: Path) -> None:
    out = invoke("passes", samples / "cnn.rx", "--dump-before", "all", "--dump-after", "all").stdout
    s = split_dumps(out)
    assert s[1][3] == s[2][3] and s[3][3] == s[4][3]


def test_dump_names_kebab_and_comma_lists(samples: Path) -> None:
    result = invoke(
        "passes",
        samples / "mlp.rx",
        "--dump-after",
        "manifest-alloc,kill-after-last-use",
        "--dump-before",
        "plan-memory",
    )
    assert result.exit_code == 0, result.output
    got = [(w, p) for w, p, _, _ in split_dumps(result.stdout)]
    assert got == [
        ("after", "ManifestAlloc"),
        ("before", "PlanMemory"),
        ("after", "KillAfterLastUse"),
    ]


@pytest.mark.parametrize("after", VM[:-1])
def test_dumps_fed_back_in_give_the_same_result(samples: Path, tmp_path: Path, after: str) -> None:
    # Every --dump-after output can be fed back in: the rest of the pipeline gives the same IR.
    path = samples / "transformer.rx"
    final = invoke("passes", path).stdout
    s = split_dumps(invoke("passes", path, "--dump-after", after).stdout)
    dumped = write(tmp_path / f"after_{after}.rx", s[0][3])
    rest = ",".join(VM[VM.index(after) + 1 :])
    result = invoke("passes", dumped, "--params", samples / "transformer.npz", "-p", rest)
    assert result.exit_code == 0, result.output
    assert result.stdout == final


@pytest.mark.parametrize("flag", ["--dump-after", "--dump-before"])
def test_dump_of_pass_not_in_pipeline(samples: Path, flag: str) -> None:
    result = invoke("passes", samples / "mlp.rx", "-p", "ManifestAlloc", flag, "PlanMemory")
    assert_user_error(
        result, f"{flag} PlanMemory: PlanMemory is not in the pipeline (ManifestAlloc)"
    )
    assert result.stdout == ""


def test_dump_of_unknown_pass(samples: Path) -> None:
    result = invoke("passes", samples / "mlp.rx", "--dump-after", "PlanMemroy")
    assert_user_error(
        result,
        "unknown pass 'PlanMemroy'; did you mean 'PlanMemory'?",
        "passes: " + ", ".join(sorted(PASSES)),
    )


def test_dump_dir_writes_numbered_files_that_parse(samples: Path, tmp_path: Path) -> None:
    dumps = tmp_path / "dumps" / "nested"
    result = invoke(
        "passes",
        samples / "transformer.rx",
        "--dump-before",
        "all",
        "--dump-after",
        "all",
        "--dump-dir",
        dumps,
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert f"wrote {2 * len(VM)} dump(s) to {dumps} (" in result.stderr
    want = [
        f"{k:03d}_{w}_{p}.rx"
        for k, (w, p) in enumerate([(w, p) for p in VM for w in ("before", "after")], start=1)
    ]
    assert files_in(dumps) == want
    for name in want:
        parses((dumps / name).read_text(), name)
    final = invoke("passes", samples / "transformer.rx").stdout
    assert (dumps / f"{2 * len(VM):03d}_after_KillAfterLastUse.rx").read_text() == final


def test_dump_dir_only_the_asked_passes(samples: Path, tmp_path: Path) -> None:
    result = invoke(
        "passes", samples / "mlp.rx", "--dump-after", "PlanMemory", "--dump-dir", tmp_path / "d"
    )
    assert result.exit_code == 0, result.output
    assert files_in(tmp_path / "d") == ["001_after_PlanMemory.rx"]


def test_dump_dir_alone_says_why_not(samples: Path, tmp_path: Path) -> None:
    result = invoke("passes", samples / "mlp.rx", "--dump-dir", tmp_path / "d")
    assert_user_error(result, "--dump-dir needs --dump-before or --dump-after")
    assert not (tmp_path / "d").exists()


def test_dump_dir_that_is_a_file(samples: Path, tmp_path: Path) -> None:
    target = write(tmp_path / "afile", "keep")
    result = invoke("passes", samples / "mlp.rx", "--dump-after", "all", "--dump-dir", target)
    assert_user_error(result, str(target))
    assert target.read_text() == "keep"


def test_parse_error_in_input(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.rx", BROKEN_SYNTAX)
    result = invoke("passes", path, "--dump-after", "all")
    assert_user_error(result, f"{path}:3:")
    assert result.stdout == ""


# ---------------------------------------------------------------------------------------
# --time-passes and --no-verify


@pytest.mark.parametrize("command", [("passes",), ("build", "-t", "ir", "-o", "-"), ("report",)])
def test_time_passes_table_on_stderr(samples: Path, command: tuple[str, ...]) -> None:
    result = invoke(*command, samples / "mlp.rx", "--time-passes")
    assert result.exit_code == 0, result.output
    err = result.stderr
    assert "times" in err and "seconds" in err and "total" in err
    rows = re.findall(r"^\s*(\d+)\s*│\s*(\w+)\s*│\s*([^│]*?)\s*│\s*([0-9.]+)\s*$", err, re.M)
    assert [int(i) for i, *_ in rows] == list(range(1, len(rows) + 1))
    steps = [(kind, name) for _, kind, name, _ in rows]
    assert [n for k, n in steps if k == "pass"] == list(VM)
    kinds = [k for k, _ in steps]
    assert kinds[:3] == ["parse", "verify", "weights"] and steps[0][1] == "mlp.rx"
    assert kinds.index("pass") == 3  # the passes run after loading ...
    if command[0] == "build":
        assert kinds[-1] == "codegen"  # ... and before code generation (-o -: nothing written)
    passes = sum(float(t) for _, k, _, t in rows if k == "pass")
    (subtotal,) = re.findall(r"│\s*passes\s*│\s*│\s*([0-9.]+)", err)
    assert abs(float(subtotal) - passes) < 1e-3 * len(VM)
    assert "times" not in result.stdout
    if command[0] == "passes":
        parses(result.stdout)


def test_time_passes_empty_pipeline(samples: Path) -> None:
    result = invoke("passes", samples / "mlp.rx", "-p", "none", "--time-passes")
    assert result.exit_code == 0, result.output
    assert "total" in result.stderr


def test_no_verify_same_result_for_correct_passes(samples: Path) -> None:
    path = samples / "transformer.rx"
    assert invoke("passes", path, "--no-verify").stdout == invoke("passes", path).stdout


def test_a_pass_that_breaks_the_ir_is_named(samples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PASSES, "BreakTheIR", BreakTheIR)
    result = invoke("passes", samples / "mlp.rx", "-p", "ManifestAlloc,BreakTheIR,PlanMemory")
    assert result.exit_code == 3, result.output
    assert "internal error" in result.stderr
    assert "pass BreakTheIR produced invalid IR" in result.stderr
    assert "%nope is not defined" in result.stderr
    assert "this is a bug in relaxc" in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_no_verify_lets_a_broken_pass_through(
    samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(PASSES, "BreakTheIR", BreakTheIR)
    result = invoke("passes", samples / "mlp.rx", "-p", "ManifestAlloc,BreakTheIR", "--no-verify")
    assert result.exit_code == 0, result.output
    assert "return %nope" in result.stdout


# ---------------------------------------------------------------------------------------
# -p, --disable-pass, --pass-config


def test_named_pipeline_vm_is_the_default(samples: Path) -> None:
    path = samples / "cnn.rx"
    assert invoke("passes", path, "-p", "vm").stdout == invoke("passes", path).stdout
    assert invoke("passes", path, "-t", "ir").stdout == invoke("passes", path).stdout


@pytest.mark.parametrize("spelling", ["none", "", " "])
def test_named_pipeline_none_prints_the_input(samples: Path, spelling: str) -> None:
    path = samples / "relay_memory.rx"
    result = invoke("passes", path, "-p", spelling)
    assert result.exit_code == 0, result.output
    assert result.stdout == canonical(path)


@pytest.mark.parametrize(
    "spec",
    [
        "ReorderForMemory,ManifestAlloc,ElideConcatSplit,ComputeInPlace,PlanMemory,KillAfterLastUse",
        "reorder-for-memory,manifest-alloc,elide-concat-split,compute-in-place,plan-memory,"
        "kill-after-last-use",
        "ReorderForMemory{inplace=true},ManifestAlloc{align=64},"
        "ElideConcatSplit{concat=true split=true},ComputeInPlace,"
        "PlanMemory{planner=best check=true},KillAfterLastUse",
    ],
)
def test_spec_equal_to_the_default(samples: Path, spec: str) -> None:
    path = samples / "mlp.rx"
    assert invoke("passes", path, "-p", spec).stdout == invoke("passes", path).stdout


def test_spec_manifest_alloc_only(samples: Path) -> None:
    result = invoke("passes", samples / "mlp.rx", "-p", "ManifestAlloc")
    assert result.exit_code == 0, result.output
    m = parses(result.stdout)
    assert m.get("main").attr("planned") is None
    assert "memory.alloc_storage(4096, align=64" in result.stdout and "arena" not in result.stdout


def test_spec_with_options(samples: Path) -> None:
    result = invoke(
        "passes", samples / "mlp.rx", "-p", "ManifestAlloc{align=16},PlanMemory{planner=none}"
    )
    assert result.exit_code == 0, result.output
    assert "align=16" in result.stdout and "align=64" not in result.stdout
    assert "arena" not in result.stdout  # planner=none places nothing
    assert parses(result.stdout).get("main").attr("planned") is True


def test_unknown_pass_names_alternatives(samples: Path) -> None:
    result = invoke("passes", samples / "mlp.rx", "-p", "ManifestAlloc,PlanMemoy")
    assert_user_error(
        result,
        "error: unknown pass 'PlanMemoy'; did you mean 'PlanMemory'?",
        "  ManifestAlloc,PlanMemoy\n                ^^^^^^^^^",
        "note: passes: " + ", ".join(sorted(PASSES)),
    )


@pytest.mark.parametrize(
    "spec, needles",
    [
        (
            "ManifestAlloc,,PlanMemory",
            (
                "error: malformed pass pipeline",
                "                ^\n",
                "note: write passes separated by commas",
            ),
        ),
        ("ManifestAlloc{align}", ("option 'align' of ManifestAlloc is not key=value",)),
        ("ManifestAlloc{alig=8}", ("ManifestAlloc has no option 'alig'; did you mean 'align'?",)),
        (
            "ManifestAlloc{align=3}",
            ("ManifestAlloc: align=3 is not a power of two from 1 to 4096",),
        ),
        (
            "ManifestAlloc,PlanMemory{planner=fast}",
            (
                "PlanMemory.planner must be one of none, greedy-size, greedy-conflict, best; "
                "got 'fast'",
            ),
        ),
        (
            "ManifestAlloc,PlanMemory{check=maybe}",
            ("PlanMemory.check must be true or false; got 'maybe'",),
        ),
        (
            "ManifestAlloc,PlanMemory{time_limit=-1}",
            ("PlanMemory: time_limit=-1.0 must be a finite number of seconds, 0 or more",),
        ),
    ],
)
def test_bad_spec(samples: Path, spec: str, needles: tuple[str, ...]) -> None:
    result = invoke("passes", samples / "mlp.rx", "-p", spec)
    assert_user_error(result, *needles, f"  {spec}\n")


def test_plan_memory_before_manifest_alloc(samples: Path) -> None:
    result = invoke("passes", samples / "mlp.rx", "-p", "PlanMemory,ManifestAlloc")
    assert_user_error(
        result,
        "error: PlanMemory needs explicit memory",
        "run ManifestAlloc before it",
        "note: in pass 1 of the pipeline (PlanMemory -> ManifestAlloc)",
    )


def test_planning_legalized_ir_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "legal.rx", LEGALIZED)
    result = invoke("passes", path, "-p", "PlanMemory")
    assert_user_error(
        result,
        "PlanMemory cannot run on IR with packed calls",
        "plan memory before LegalizePackedCalls",
    )
    result = invoke("build", path, "-t", "ir", "-o", tmp_path / "out.rx")
    first = next(PASSES[p] for p in VM if PACKED_CALLS in PASSES[p].forbids)  # the one to refuse
    assert_user_error(
        result, f"{first.name} cannot run on IR with packed calls", first.hints[PACKED_CALLS]
    )
    assert not (tmp_path / "out.rx").exists()


def test_disable_pass(tmp_path: Path) -> None:
    path = write(tmp_path / "dyn.rx", DYNAMIC)
    full = invoke("passes", path).stdout
    assert "memory.kill_storage(%a_storage)" in full  # KillAfterLastUse frees dynamic storage
    result = invoke("passes", path, "--disable-pass", "KillAfterLastUse")
    assert result.exit_code == 0, result.output
    assert "kill_storage" not in result.stdout
    parses(result.stdout)


@pytest.mark.parametrize(
    "disable", [("kill-after-last-use,plan-memory",), ("PlanMemory", "KillAfterLastUse")]
)
def test_disable_pass_lists(samples: Path, disable: tuple[str, ...]) -> None:
    args = [a for d in disable for a in ("--disable-pass", d)]
    result = invoke("passes", samples / "mlp.rx", *args)
    assert result.exit_code == 0, result.output
    rest = ",".join(p for p in VM if p not in ("PlanMemory", "KillAfterLastUse"))
    assert result.stdout == invoke("passes", samples / "mlp.rx", "-p", rest).stdout


@pytest.mark.parametrize(
    "args, needles",
    [
        (("--disable-pass", "ManifestAlloc"), ("run ManifestAlloc before it",)),
        (("--disable-pass", "Frobnicate"), ("unknown pass 'Frobnicate'", "note: passes: ")),
        (("--disable-pass", "KillAfterLastUs"), ("did you mean 'KillAfterLastUse'?",)),
        (
            ("-p", "none", "--disable-pass", "PlanMemory"),
            ("--disable-pass PlanMemory: PlanMemory is not in the pipeline (empty)",),
        ),
    ],
)
def test_disable_pass_errors(
    samples: Path, args: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    assert_user_error(invoke("passes", samples / "mlp.rx", *args), *needles)


@pytest.mark.parametrize(
    "config",
    [
        "PlanMemory.planner=greedy-size",
        "plan-memory.planner=greedy-conflict",
        "PlanMemory.check=true",
        "PlanMemory.time_limit=0",
    ],
)
def test_pass_config_same_plan_on_mlp(samples: Path, config: str) -> None:
    result = invoke("passes", samples / "mlp.rx", "--pass-config", config)
    assert result.exit_code == 0, result.output
    assert "memory.alloc_storage(8192, align=64" in result.stdout


def test_pass_config_changes_the_result(samples: Path) -> None:
    result = invoke(
        "passes",
        samples / "mlp.rx",
        "--pass-config",
        "PlanMemory.planner=none",
        "--pass-config",
        "ManifestAlloc.align=16",
    )
    assert result.exit_code == 0, result.output
    assert "arena" not in result.stdout and "align=16" in result.stdout


@pytest.mark.parametrize(
    "config, needle",
    [
        (
            "PlanMemory.planner=fast",
            "PlanMemory.planner must be one of none, greedy-size, greedy-conflict, "
            "best; got 'fast'",
        ),
        (
            "PlanMemory.plannr=best",
            "PlanMemory has no option 'plannr'; did you mean 'planner'? "
            "(options: planner, time_limit, check, io_in_arena, capacity)",
        ),
        ("PlanMemoy.planner=best", "unknown pass 'PlanMemoy'; did you mean 'PlanMemory'?"),
        (
            "PlanMemory=best",
            "--pass-config 'PlanMemory=best' is not NAME.KEY=VALUE "
            "(for example PlanMemory.planner=greedy-size)",
        ),
        ("planner", "is not NAME.KEY=VALUE"),
        ("ManifestAlloc.align=big", "ManifestAlloc.align must be an integer; got 'big'"),
        ("PlanMemory.check=perhaps", "PlanMemory.check must be true or false; got 'perhaps'"),
    ],
)
def test_bad_pass_config(samples: Path, config: str, needle: str) -> None:
    result = invoke("passes", samples / "mlp.rx", "--pass-config", config)
    assert_user_error(result, needle)
    assert result.stdout == ""


def test_pass_config_for_pass_not_in_pipeline(samples: Path) -> None:
    result = invoke(
        "passes",
        samples / "mlp.rx",
        "-p",
        "ManifestAlloc",
        "--pass-config",
        "PlanMemory.planner=best",
    )
    assert_user_error(
        result,
        "--pass-config 'PlanMemory.planner=best': PlanMemory is not in the "
        "pipeline (ManifestAlloc)",
    )


@pytest.mark.parametrize("config", ["ManifestAlloc.align=0", "PlanMemory.time_limit=-1"])
def test_pass_config_value_the_pass_refuses(samples: Path, config: str) -> None:
    assert_user_error(
        invoke("passes", samples / "mlp.rx", "--pass-config", config),
        config.split("=")[0].split(".")[1],
    )


@pytest.mark.parametrize(
    "args",
    [
        ("--pass-config", "PlanMemory.time_limit=inf"),
        ("--pass-config", "PlanMemory.time_limit=nan"),
        ("-p", "ManifestAlloc,PlanMemory{time_limit=inf}"),
    ],
)
def test_non_finite_time_limit(samples: Path, args: tuple[str, ...]) -> None:
    """PlanMemory refuses a time limit that is not a finite number (a search bounded by inf
    or nan would never stop): a user error naming the option, and no IR printed."""
    result = invoke("passes", samples / "transformer.rx", *args)
    value = "inf" if "inf" in "".join(args) else "nan"
    assert_user_error(
        result, f"PlanMemory: time_limit={value} must be a finite number of seconds, 0 or more"
    )
    assert result.stdout == ""


# ---------------------------------------------------------------------------------------
# relaxc build -t ir


def run_main(m: Module, weights: dict, dims: dict[str, int], seed: int = 0):
    fn = m.get("main")
    args = random_inputs(fn, resolve_dims(fn, dims), seed)
    interp = Interpreter(m, weights)
    return interp.run("main", args), interp.stats


@pytest.mark.parametrize("stem", SAMPLES)
def test_build_ir_same_results_as_the_input(samples: Path, tmp_path: Path, stem: str) -> None:
    path = samples / f"{stem}.rx"
    out = tmp_path / f"{stem}.out.rx"
    result = invoke("build", path, "-t", "ir", "-o", out)
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.stderr
    lowered = parses(out.read_text(), str(out))
    original = parses(path.read_text(), str(path))
    weights = weights_of(path)
    report = json.loads(invoke("report", out, "-p", "none", "--json").stdout)["functions"][-1]
    dims_cases = [{}] + ([{"n": 5}] if stem in ("transformer", "relay_memory") else [])
    for dims in dims_cases:
        a, stats_a = run_main(original, weights, dims)
        b, stats_b = run_main(lowered, weights, dims)
        np.testing.assert_array_equal(a, b)
        if not dims:  # at the upper bounds: the arena and the outputs are all the program holds
            assert report["arena_bytes"] <= stats_b.peak <= stats_a.peak


def test_build_ir_to_stdout(samples: Path) -> None:
    result = invoke("build", samples / "mlp.rx", "-t", "ir", "-o", "-")
    assert result.exit_code == 0, result.output
    parses(result.stdout)
    assert result.stdout == invoke("passes", samples / "mlp.rx").stdout
    assert result.stderr.strip() == MLP_SUMMARY  # the summary goes to stderr, nothing else


def test_build_ir_default_output_beside_the_input(samples: Path) -> None:
    result = invoke("build", samples / "mlp.rx", "-t", "ir")
    assert result.exit_code == 0, result.output
    out = samples / "mlp.lowered.rx"
    assert f"wrote {out}" in result.stderr
    parses(out.read_text())


@pytest.mark.parametrize("same", ["input", "dotted", "weights", "symlink"])
def test_build_refuses_to_overwrite_an_input(samples: Path, same: str) -> None:
    path = samples / "mlp.rx"
    target = {
        "input": path,
        "dotted": samples / "." / ".." / "samples" / "mlp.rx",
        "weights": samples / "mlp.npz",
        "symlink": samples / "link.rx",
    }[same]
    if same == "symlink":
        target.symlink_to(path)
    before = {p.name: p.read_bytes() for p in samples.iterdir() if p.is_file()}
    result = invoke("build", path, "-t", "ir", "-o", target)
    assert_user_error(result, f"refusing to write {target}: it is one of the inputs")
    assert {p.name: p.read_bytes() for p in samples.iterdir() if p.is_file()} == before


def test_build_output_folder_missing(samples: Path, tmp_path: Path) -> None:
    result = invoke("build", samples / "mlp.rx", "-t", "ir", "-o", tmp_path / "nope" / "out.rx")
    assert_user_error(
        result,
        f"cannot write {tmp_path / 'nope' / 'out.rx'}: folder {tmp_path / 'nope'} does not exist",
    )


def test_build_error_in_input_writes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.rx", BROKEN_SYNTAX)
    result = invoke("build", path, "-t", "ir", "-o", tmp_path / "out.rx")
    assert_user_error(result, f"{path}:3:")
    assert files_in(tmp_path) == ["bad.rx"]


def test_build_is_deterministic_across_processes(samples: Path, tmp_path: Path) -> None:
    outs = []
    for seed in ("1", "2"):
        env = {k: v for k, v in os.environ.items() if k != "RELAXC_DEBUG"}
        env["PYTHONHASHSEED"] = seed
        for stem in ("transformer", "cnn"):
            out = tmp_path / f"{stem}.{seed}.rx"
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "relaxc.cli.main",
                    "build",
                    samples / f"{stem}.rx",
                    "-t",
                    "ir",
                    "-q",
                    "-o",
                    out,
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            )
            assert proc.returncode == 0, proc.stderr
            outs.append(out.read_bytes())
    assert outs[0] == outs[2] and outs[1] == outs[3]


def test_build_is_deterministic_in_process(samples: Path) -> None:
    runs = [invoke("build", samples / "transformer.rx", "-t", "ir", "-o", "-") for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout and runs[0].stderr == runs[1].stderr


def test_build_is_idempotent(samples: Path, tmp_path: Path) -> None:
    once = tmp_path / "once.rx"
    twice = tmp_path / "twice.rx"
    assert invoke("build", samples / "cnn.rx", "-t", "ir", "-o", once).exit_code == 0
    result = invoke("build", once, "-t", "ir", "-o", twice, "--params", samples / "cnn.npz")
    assert result.exit_code == 0, result.output
    assert once.read_bytes() == twice.read_bytes()


# ---------------------------------------------------------------------------------------
# relaxc build: the memory summary, --json, --max-arena


def test_build_summary_line(samples: Path) -> None:
    result = invoke("build", samples / "mlp.rx", "-t", "ir", "-o", samples / "o.rx")
    assert result.exit_code == 0, result.output
    out = samples / "o.rx"
    assert result.stderr.splitlines() == [
        MLP_SUMMARY,
        f"wrote {out} ({short_bytes(out.stat().st_size)})",
    ]


def test_build_summary_one_line_per_function(tmp_path: Path) -> None:
    result = invoke("build", write(tmp_path / "two.rx", TWO), "-t", "ir", "-o", "-")
    assert result.exit_code == 0, result.output
    # In place, @helper's %a and @main's %z are views of their function's output: only
    # @helper's %b needs an arena.
    assert result.stderr.splitlines() == [
        "@helper: arena 64 B, 1.00x the lower bound 64 B, 33% less than one buffer per tensor "
        "(192 B)",
        "@main: no planned memory",
    ]


@pytest.mark.parametrize(
    "stem, line",
    [
        ("relay_memory", "@main: no planned memory"),
        (
            "cnn",
            "@main: arena 80.0 KiB (81,920 B), 1.00x the lower bound 80.0 KiB (81,920 B), "
            "74% less than one buffer per tensor (312.2 KiB)",
        ),
        (
            "transformer",
            "@main: arena 544.0 KiB (557,056 B), 1.00x the lower bound 544.0 KiB "
            "(557,056 B), 61% less than one buffer per tensor (1.4 MiB)",
        ),
    ],
)
def test_build_summary_of_samples(samples: Path, stem: str, line: str) -> None:
    result = invoke("build", samples / f"{stem}.rx", "-t", "ir", "-o", "-")
    assert result.stderr.splitlines() == [line]


def test_build_summary_dynamic(tmp_path: Path) -> None:
    src = write(tmp_path / "dyn.rx", DYNAMIC)
    result = invoke("build", src, "-t", "ir", "-o", "-", "--allow-unbounded")
    # %b and %c are views of %a (in place): %a's storage is the one sized at run time.
    assert result.exit_code == 0, result.output
    summary, warning = result.stderr.splitlines()
    assert summary == "@main: no planned memory; 1 dynamic allocation(s)"
    assert warning.startswith("warning: @main: the dim n (axis 0 of %x) has no upper bound")
    refused = invoke("build", src, "-t", "ir", "-o", "-")  # without the flag: an error
    assert refused.exit_code == 1 and refused.stdout == ""
    assert refused.stderr.splitlines()[0] == summary


def test_build_quiet(samples: Path) -> None:
    result = invoke("build", samples / "mlp.rx", "-t", "ir", "-o", "-", "-q")
    assert result.exit_code == 0 and result.stderr == ""


def test_build_json(samples: Path) -> None:
    out = samples / "o.rx"
    result = invoke("build", samples / "mlp.rx", "-t", "ir", "-o", out, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["file"] == str(samples / "mlp.rx")
    (fn,) = data["functions"]
    assert fn["name"] == "main"
    assert fn["arena_bytes"] == 8192 and fn["lower_bound"] == 8192 and fn["ratio"] == 1.0
    assert fn["baseline_bytes"] == 17024 and fn["saving"] == 0.5  # (see MLP_SUMMARY)
    assert [(b["name"], b["bytes"], b["offset"]) for b in fn["buffers"]] == [
        ("h1", 4096, 0),
        ("h2", 4096, 4096),
    ]
    assert (
        fn["dynamic"] == []
        and fn["output_bytes"]["bound"] == 320
        and fn["input_bytes"]["bound"] == 2048
    )
    assert MLP_SUMMARY not in result.stderr  # JSON instead of the summary
    assert out.exists()


@pytest.mark.parametrize("target", ["ir", "vm", "c"])
def test_build_json_and_ir_to_stdout_do_not_mix(samples: Path, target: str) -> None:
    """--json owns stdout, so -o - is refused as a usage error before anything runs: exit 2,
    the reason on stderr, nothing on stdout and no file written."""
    before = files_in(samples)
    result = invoke("build", samples / "mlp.rx", "-t", target, "-o", "-", "--json")
    assert_usage_error(
        result, "--json prints the report to stdout, so the program cannot go there too (-o -)"
    )
    assert result.stdout == ""
    assert files_in(samples) == before


def test_build_json_with_the_default_output_keeps_stdout_for_json(samples: Path) -> None:
    """Without -o the program goes to its default file and stdout holds only the JSON report."""
    before = files_in(samples)
    result = invoke("build", samples / "mlp.rx", "-t", "ir", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["functions"][0]["name"] == "main"
    (name,) = set(files_in(samples)) - set(before)
    parses((samples / name).read_text(), name)


@pytest.mark.parametrize("out", ["file", "default", "stdout"])
def test_max_arena_exceeded_writes_nothing(samples: Path, out: str) -> None:
    before = files_in(samples)
    dest = {"file": ["-o", samples / "out.rx"], "default": [], "stdout": ["-o", "-"]}[out]
    result = invoke("build", samples / "mlp.rx", "-t", "ir", *dest, "--max-arena", "1KiB")
    assert_user_error(
        result,
        "error: memory budget exceeded: @main needs 8.0 KiB (8,192 B); "
        "the budget (--max-arena) is 1.0 KiB (1,024 B)",
    )
    assert files_in(samples) == before
    assert result.stdout == ""


def test_max_arena_names_every_function_over_budget(tmp_path: Path) -> None:
    result = invoke(
        "build",
        write(tmp_path / "two.rx", TWO),
        "-t",
        "ir",
        "-o",
        tmp_path / "o.rx",
        "--max-arena",
        "100",
        "--disable-pass",  # (in place, @main would hold no arena to fit the budget)
        IN_PLACE,
    )
    assert_user_error(
        result, "memory budget exceeded: @helper needs 128 B; the budget (--max-arena) is 100 B"
    )
    assert "@main" not in result.stderr.splitlines()[-1]  # @main's 64 B fit
    assert not (tmp_path / "o.rx").exists()


@pytest.mark.parametrize(
    "budget", ["8192", "8KiB", "8 KiB", "8kib", "8.192kB", "0.0078125MiB", "1GB"]
)
def test_max_arena_met(samples: Path, budget: str) -> None:
    result = invoke(
        "build", samples / "mlp.rx", "-t", "ir", "-o", samples / "o.rx", "--max-arena", budget
    )
    assert result.exit_code == 0, result.output
    assert (samples / "o.rx").exists()


@pytest.mark.parametrize("budget", ["8191", "8kB"])
def test_max_arena_one_byte_short(samples: Path, budget: str) -> None:
    result = invoke(
        "build", samples / "mlp.rx", "-t", "ir", "-o", samples / "o.rx", "--max-arena", budget
    )
    assert_user_error(result, "memory budget exceeded")


@pytest.mark.parametrize(
    "budget, needle",
    [
        ("12 parsecs", "'12 parsecs' is not a size (examples: 4096, 256KiB, 1.5MB, 2GiB)"),
        ("-5", "'-5' is not a size"),
        ("", "'' is not a size"),
        ("1.5", "'1.5' is not a whole number of bytes"),
        ("KiB", "'KiB' is not a size"),
    ],
)
def test_max_arena_bad_value_is_a_usage_error(samples: Path, budget: str, needle: str) -> None:
    before = files_in(samples)
    result = invoke(
        "build", samples / "mlp.rx", "-t", "ir", "-o", samples / "o.rx", "--max-arena", budget
    )
    assert_usage_error(result, "Invalid value for '--max-arena'", needle)
    assert files_in(samples) == before


def test_max_arena_not_met_by_not_planning(samples: Path) -> None:
    result = invoke(
        "build",
        samples / "mlp.rx",
        "-t",
        "ir",
        "-o",
        samples / "o.rx",
        "--max-arena",
        "1KiB",
        "--pass-config",
        "PlanMemory.planner=none",
    )
    assert result.exit_code == 1
    assert not (samples / "o.rx").exists()


def test_summary_mentions_unplanned_memory(samples: Path) -> None:
    result = invoke(
        "build",
        samples / "mlp.rx",
        "-t",
        "ir",
        "-o",
        "-",
        "--pass-config",
        "PlanMemory.planner=none",
    )
    assert "8.0 KiB (8,192 B) in unplanned allocations" in result.stderr  # %h1 and %h2


# ---------------------------------------------------------------------------------------
# relaxc report


def test_report_tables_and_memory_map(samples: Path) -> None:
    # Without in-place execution, so that PlanMemory reuses bytes for the map to show.
    result = invoke("report", samples / "mlp.rx", "--disable-pass", IN_PLACE)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for needle in (
        "@main",
        "arena        8.0 KiB (8,192 B)",
        "lower bound  8.0 KiB (8,192 B)",
        "ratio        1.000",
        "baseline     16.6 KiB (17,024 B)",
        "saving       50.0%",
        "RAM          10.3 KiB (10,560 B)  (arena 8 KiB, inputs 2 KiB, outputs 320 B)",
        "inputs       2.0 KiB (2,048 B)",
        "outputs      320 B",
        "constants    102.0 KiB (104,488 B)",
        "placed buffers",
        "memory map (offset against program point)",
        # the peak, with the source line of the statement there (%a1 = relu(%h1))
        "peak 8 KiB live at program point 5 (mlp.rx:7); lower bound 8 KiB, arena 8",
    ):
        assert needle in out, needle
    for name, offset in (("h1", "0"), ("a1", "4,096"), ("logits", "0")):
        assert re.search(rf"│ {name} +│ .* │ +{offset} │", out), name
    # One row per stretch of program points: its first point, the cells, the live bytes and
    # the buffers that start there.
    rows = re.findall(r"^│ +(\d+) \|([^|]*)\| +([0-9.]+ [KMG]?i?B)(.*?)│$", out, re.M)
    assert [r[0] for r in rows] == ["0", "3", "5", "8", "10", "13", "16", "18", "21", "25"]
    assert all("#" not in r[1] for r in rows)  # no two live buffers drawn on the same cell
    assert rows[2][2] == "8 KiB" and "b=%a1" in rows[2][3] and "a=%h1" in rows[1][3]
    assert set(rows[2][1]) == {"a", "b"} and rows[0][1].strip() == ""
    assert "colour = the op that wrote the buffer: ■ dense, ■ relu" in out


def test_report_memory_map_uses_the_terminal_width(samples: Path) -> None:
    def cells(columns: int) -> int:
        out = invoke("report", samples / "mlp.rx", columns=columns).stdout
        widths = {len(line) for line in out.splitlines()}
        assert widths == {columns}, widths  # the panel spans the terminal, nothing wraps
        row = re.search(r"^│ +\d+ \|([^|]*)\|", out, re.M)
        assert row is not None
        return len(row.group(1))

    assert cells(80) < cells(160) < cells(240)


def test_report_nothing_placed(samples: Path) -> None:
    out = invoke("report", samples / "relay_memory.rx").stdout
    assert "arena        0 B" in out and "ratio        -" in out
    assert "placed buffers" not in out and "memory map" not in out


def test_report_dynamic(tmp_path: Path) -> None:
    out = invoke("report", write(tmp_path / "dyn.rx", DYNAMIC)).stdout
    assert "dynamic allocations (sized at run time)" in out
    assert "a_storage" in out and "64 * ((16 * n + 63) / 64)" in out
    assert "16 * n bytes" in out  # inputs and outputs of unbounded size


def test_report_svg_and_html(samples: Path, tmp_path: Path) -> None:
    svg, page = tmp_path / "map.svg", tmp_path / "report.html"
    result = invoke("report", samples / "cnn.rx", "--svg", svg, "--html", page)
    assert result.exit_code == 0, result.output
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    rects = [r for r in root.iter(f"{ns}rect") if r.get("class") == "buf"]
    report = json.loads(invoke("report", samples / "cnn.rx", "--json").stdout)["functions"][0]
    assert len(rects) == len(report["buffers"]) > 0
    for r, b in zip(rects, report["buffers"]):  # the tooltip names the tensor and its line
        tip = "".join(r.itertext())
        assert tip.startswith(f"%{b['name']} ") and "at cnn.rx:" in tip
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "<title>relaxc memory report: cnn.rx</title>" in text
    assert "<h2>@main</h2>" in text and "<th>offset</th>" in text
    for k, b in enumerate(report["buffers"]):  # a row per buffer, linked to its rectangle
        assert f'<tr data-i="{k}">' in text and f'<td class="l">%{b["name"]}</td>' in text
    assert "<svg" in text
    # the same report gives the same bytes
    svg2, page2 = tmp_path / "again.svg", tmp_path / "again.html"
    assert invoke("report", samples / "cnn.rx", "--svg", svg2, "--html", page2).exit_code == 0
    assert svg2.read_bytes() == svg.read_bytes() and page2.read_bytes() == page.read_bytes()


def test_report_html_lists_dynamic_allocations(tmp_path: Path) -> None:
    page = tmp_path / "dyn.html"
    result = invoke("report", write(tmp_path / "dyn.rx", DYNAMIC), "--html", page)
    assert result.exit_code == 0, result.output
    text = page.read_text()
    report = json.loads(invoke("report", tmp_path / "dyn.rx", "--json").stdout)["functions"][0]
    assert report["dynamic"] and not report["buffers"]
    assert f"dynamic allocations ({len(report['dynamic'])}, sized at run time)" in text
    for d in report["dynamic"]:
        size = html.escape(d["size"]["expr"])
        assert f'<td class="l">%{d["name"]}</td><td class="l">{size}</td>' in text
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="dyn"' in text  # their lifetimes
    assert "dyn.rx:" in text  # each with its source line


def test_report_html_is_self_contained_and_interactive(samples: Path, tmp_path: Path) -> None:
    page = tmp_path / "cnn.html"
    assert invoke("report", samples / "cnn.rx", "--html", page).exit_code == 0
    text = page.read_text()
    # nothing fetched: the only URL is the SVG namespace, no src= or href= anywhere
    assert set(re.findall(r"https?://[^\s\"']+", text)) == {"http://www.w3.org/2000/svg"}
    assert " src=" not in text and " href=" not in text
    script = text[text.index("<script>") : text.index("</script>")]
    for hook in (
        "'mouseover'",
        "'mouseout'",
        "'wheel'",
        "'mousedown'",
        "scrollIntoView",
        "data-zoom",
        "viewBox",
    ):
        assert hook in script, hook
    for z in ("in", "out", "reset"):
        assert f'<button data-zoom="{z}">' in text
    rows = set(re.findall(r'<tr data-i="(\d+)">', text))
    rects = set(re.findall(r'<rect class="buf" data-i="(\d+)"', text))
    assert rows == rects and rows  # each row has its rectangle, and each rectangle its row


def test_report_svg_without_planned_memory(samples: Path, tmp_path: Path) -> None:
    svg = tmp_path / "map.svg"
    assert invoke("report", samples / "relay_memory.rx", "--svg", svg).exit_code == 0
    assert "no planned memory" in "".join(ET.parse(svg).getroot().itertext())


@pytest.mark.parametrize("flag", ["--svg", "--html"])
def test_report_refuses_to_overwrite_the_input(samples: Path, flag: str) -> None:
    before = (samples / "mlp.rx").read_bytes()
    result = invoke("report", samples / "mlp.rx", flag, samples / "mlp.rx")
    assert_user_error(result, f"refusing to write {samples / 'mlp.rx'}: it is one of the inputs")
    assert (samples / "mlp.rx").read_bytes() == before


def check_report_numbers(fn: dict) -> None:
    assert fn["arena_bytes"] >= fn["lower_bound"] >= 0
    if fn["lower_bound"]:
        assert fn["ratio"] == pytest.approx(fn["arena_bytes"] / fn["lower_bound"])
        assert fn["ratio"] >= 1
    else:
        assert fn["ratio"] is None
    ram = fn["ram"]
    if fn["baseline_bytes"] and ram["total"] is not None and fn["explicit_memory"]:
        assert fn["saving"] <= 1
        held = ram["total"] - ram["inputs"]
        assert fn["saving"] == pytest.approx(1 - held / fn["baseline_bytes"])
    else:
        assert fn["saving"] is None
    assert fn["arena_bytes"] == sum(a["bytes"] for a in fn["arenas"])
    bufs = fn["buffers"]
    for b in bufs:
        assert 0 <= b["offset"] and b["offset"] + b["bytes"] <= fn["arena_bytes"]
        assert b["offset"] % 64 == 0
        assert 0 <= b["first"] <= b["last"] < fn["program_points"]
    for i, x in enumerate(bufs):
        for y in bufs[i + 1 :]:
            live_together = x["first"] <= y["last"] and y["first"] <= x["last"]
            share_bytes = (
                x["offset"] < y["offset"] + y["bytes"] and y["offset"] < x["offset"] + x["bytes"]
            )
            assert not (live_together and share_bytes), (x, y)


@pytest.mark.parametrize("planner", ["best", "greedy-size", "greedy-conflict"])
@pytest.mark.parametrize("stem", SAMPLES)
def test_report_json_numbers_are_consistent(samples: Path, stem: str, planner: str) -> None:
    result = invoke(
        "report", samples / f"{stem}.rx", "--json", "--pass-config", f"PlanMemory.planner={planner}"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["file"] == str(samples / f"{stem}.rx") and data["functions"]
    for fn in data["functions"]:
        check_report_numbers(fn)


def test_report_json_two_functions(tmp_path: Path) -> None:
    data = json.loads(invoke("report", write(tmp_path / "two.rx", TWO), "--json").stdout)
    assert [f["name"] for f in data["functions"]] == ["helper", "main"]
    for fn in data["functions"]:
        check_report_numbers(fn)


def test_report_json_equals_build_json(samples: Path) -> None:
    a = invoke("report", samples / "transformer.rx", "--json").stdout
    b = invoke(
        "build", samples / "transformer.rx", "-t", "ir", "-o", samples / "o.rx", "--json"
    ).stdout
    assert json.loads(a) == json.loads(b)


def test_report_on_planned_ir_with_p_none(samples: Path) -> None:
    lowered = samples / "cnn.lowered.rx"
    assert invoke("build", samples / "cnn.rx", "-t", "ir").exit_code == 0
    a = json.loads(invoke("report", samples / "cnn.rx", "--json").stdout)["functions"]
    b = json.loads(invoke("report", lowered, "-p", "none", "--json").stdout)["functions"]
    from tests.cli.test_report_json import without_lines  # lines are of the other text

    assert without_lines(a) == without_lines(b)


def test_report_max_arena(samples: Path) -> None:
    assert_user_error(
        invoke("report", samples / "mlp.rx", "--max-arena", "4KiB"),
        "memory budget exceeded: @main needs 8.0 KiB (8,192 B); "
        "the budget (--max-arena) is 4.0 KiB",
    )
    assert invoke("report", samples / "mlp.rx", "--max-arena", "8KiB").exit_code == 0
    assert_usage_error(
        invoke("report", samples / "mlp.rx", "--max-arena", "lots"), "'lots' is not a size"
    )


def test_report_one_dimensional_shape(tmp_path: Path) -> None:
    data = json.loads(invoke("report", write(tmp_path / "two.rx", TWO), "--json").stdout)
    assert data["functions"][0]["buffers"][0]["shape"] == [16]


def test_report_missing_file(tmp_path: Path) -> None:
    assert_user_error(
        invoke("report", tmp_path / "nope.rx"), f"file {tmp_path / 'nope.rx'} does not exist"
    )


# Six buffers in program order where first fit by size leaves a 64-byte gap: greedy-size
# plans 5,248 bytes, the lower bound (and best's plan) is 5,184.
FRAGMENTED = """fn @main(%x: Tensor[(), f32]) -> Tensor[(), f32] {
  %b0 = zeros((512,), f32)
  %b1 = zeros((512,), f32)
  %b3 = zeros((256,), f32)
  %s0 = sum(%b0)
  %a3 = add(%x, %s0)
  %s1 = sum(%b1)
  %a4 = add(%a3, %s1)
  %b2 = zeros((512,), f32)
  %b4 = zeros((1280,), f32)
  %b5 = zeros((512,), f32)
  %s3 = sum(%b3)
  %a8 = add(%a4, %s3)
  %s5 = sum(%b5)
  %a9 = add(%a8, %s5)
  %s2 = sum(%b2)
  %a10 = add(%a9, %s2)
  %s4 = sum(%b4)
  %a11 = add(%a10, %s4)
  return %a11
}
"""


def test_over_budget_says_what_the_planner_proved(samples: Path, tmp_path: Path) -> None:
    # Proven: no arena below the one planned, so nothing can fit.
    result = invoke("build", samples / "mlp.rx", "-t", "ir", "--max-arena", "4KiB")
    assert_user_error(result, "note: @main cannot fit: no arena below 8.0 KiB (8,192 B) exists")
    # Not proven: greedy-size's plan is above the lower bound and the budget lies between,
    # so the note points at a search that can fit it, and best does.
    src = write(tmp_path / "frag.rx", FRAGMENTED)
    out = tmp_path / "o.rx"
    greedy_size = ("--pass-config", "PlanMemory.planner=greedy-size")
    result = invoke("build", src, "-t", "ir", "-o", out, "--max-arena", "5200", *greedy_size)
    assert_user_error(
        result,
        "memory budget exceeded: @main needs 5.1 KiB (5,248 B)",
        "note: @main: only an arena below 5.1 KiB (5,184 B) is proven impossible, so one within "
        "the budget may exist",
    )
    assert not out.exists()
    result = invoke("build", src, "-t", "ir", "-o", out, "--max-arena", "5200")
    assert result.exit_code == 0, result.output
    assert out.exists()

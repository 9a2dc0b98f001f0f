"""The C target with the inputs and outputs in the arena (PlanMemory{io_in_arena=true}).

The run function takes no input or output pointer: ``<prefix>_input_<name>()`` gives the
place in the arena to write an input, ``<prefix>_output_<name>()`` the place to read an
output. Every sample (and a program with tuples, a constant output and an input of unbounded
size) builds warning-free, runs clean under AddressSanitizer and UndefinedBehaviorSanitizer,
and agrees with the VM running the same plan within the documented tolerance; ``.bss`` is the
arena (inputs and outputs included) to the byte; a hand-written caller uses the API as the
header documents it, twice in a row."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.c import emit_c
from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes
from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import default_weights_path, load_npz
from relaxc.ir.nodes import Module
from relaxc.cli.target_facts import pipeline_context
from relaxc.passes.assemble import assemble_pipeline
from relaxc.cli.report.analysis import memory_report
from relaxc.passes.pipeline import Pipeline, VerifyInstrument

from .cbuild import CC, STRICT, Built, as_list, assert_close, build_all, needs_cc, run_c
from .test_samples import section_sizes

pytestmark = needs_cc

SAMPLES_DIR = Path(__file__).resolve().parents[3] / "samples"
SAMPLES = sorted(p.stem for p in SAMPLES_DIR.glob("*.rx"))
DIMS = {"transformer": [{"n": 1}, {"n": 128}], "relay_memory": [{"n": 0}, {"n": 64}]}
IO = ("PlanMemory.io_in_arena=true", "PlanMemory.check=true")

MIXED = """
fn @main(%t: Tuple[Tensor[(4,), f32], Tensor[(2, 2), f32]], %u: Tensor[(n,), f32], %x: Tensor[(4,), f32])
    -> Tuple[Tensor[(4,), f32], Tensor[(4,), f32], Tensor[(n,), f32], Tensor[(2,), f32], Tensor[(2, 2), f32]] {
  %a = %t.0
  %b = add(%a, %x)
  %c = relu(%u)
  %k = const([1.5, 2.5], f32)
  %m = %t.1
  %r = (%b, %x, %c, %k, %m)
  return %r
}"""  # noqa: E501


def load(name: str) -> tuple[Module, dict]:
    path = SAMPLES_DIR / f"{name}.rx"
    wpath = default_weights_path(path)
    return parse_module(path.read_text(), path.name), (load_npz(wpath, "weights") if wpath else {})


def planned(module: Module, target: str, unpacked: bool = False) -> Module:
    disable = ("LegalizePackedCalls",) if unpacked else ()
    passes = assemble_pipeline(target, None, disable, IO, pipeline_context())
    return Pipeline(passes, [VerifyInstrument()]).run(module)


def vm_result(module: Module, weights: dict, args: list, dims: dict):
    vm = VirtualMachine(load_bytes(compile_module(planned(module, "vm"), weights), "t.rxb"))
    return vm.run("main", args, dims or None)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, bool], Built]:
    root = tmp_path_factory.mktemp("c_io")
    jobs, keys = [], []
    for name in SAMPLES + ["mixed"]:
        module, weights = (parse_module(MIXED, "mixed.rx"), {}) if name == "mixed" else load(name)
        for mode, sanitize_too in (("packed", True), ("unpacked", False)):
            folder = root / f"{name}_{mode}"
            folder.mkdir()
            sources = emit_c(
                planned(module, "c", unpacked=mode == "unpacked"),
                weights,
                prefix=name,
                emit_main=True,
            )
            for fname, text in sources.files.items():
                (folder / fname).write_text(text)
            for sanitize in (False, True) if sanitize_too else (False,):
                jobs.append((folder, sources, sanitize))
                keys.append((name, mode, sanitize))
    return dict(zip(keys, build_all(jobs)))


CASES = [(n, d) for n in SAMPLES for d in DIMS.get(n, [{}])] + [
    ("mixed", {"n": 0}),
    ("mixed", {"n": 3}),
]


@pytest.mark.parametrize(
    "key",
    [("packed", False), ("packed", True), ("unpacked", False)],
    ids=["packed", "packed-asan-ubsan", "unpacked"],
)
@pytest.mark.parametrize("case", CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_c_through_the_arena_api_matches_the_vm(builds, case, key) -> None:
    name, dims = case
    module, weights = (parse_module(MIXED, "mixed.rx"), {}) if name == "mixed" else load(name)
    fn = module.get("main")
    env = resolve_dims(fn, dims)
    args = random_inputs(fn, env, seed=4)
    flat = [leaf for a in args for leaf in as_list(a)]  # one file per tensor of a tuple
    got = run_c(builds[(name, *key)], flat, env, tag=f"io{key[0]}{key[1]}")
    assert_close(got, vm_result(module, weights, args, env), name)


@pytest.mark.parametrize("name", SAMPLES)
def test_the_run_takes_no_pointers_and_the_header_says_where_they_are(builds, name) -> None:
    built = builds[(name, "packed", False)]
    header = (built.folder / f"{name}.h").read_text()
    info = built.sources.info
    dims = "".join(f", size_t {c}" for _, c, _ in info.dims).removeprefix(", ")
    assert f"int32_t {name}_run({dims or 'void'});" in header
    assert "Inputs and outputs live in the arena" in header
    for port in info.inputs:
        assert f"float *{name}_input_{port.name}(void);" in header
    for port in info.outputs:
        assert f"const float *{name}_output_{port.name}(void);" in header
        assert "of the arena" in port.location


def test_only_what_lives_in_static_memory_leaves_the_signature(builds) -> None:
    info = builds[("mixed", "packed", False)].sources.info
    assert [(p.ir_name, p.accessor) for p in info.inputs] == [
        ("t.0", "mixed_input_t_0"),
        ("t.1", "mixed_input_t_1"),
        ("u", None),  # of unbounded size: the caller's pointer
        ("x", "mixed_input_x"),
    ]
    where = [p.location for p in info.outputs]
    assert where[1] == next(p.location for p in info.inputs if p.ir_name == "x")
    assert (where[2], info.outputs[2].accessor) == ("", None)  # relu(%u): unbounded
    assert where[3] == "the constant %k"
    header = (builds[("mixed", "packed", False)].folder / "mixed.h").read_text()
    assert "int32_t mixed_run(const float *u, float *r_2, size_t n);" in header


@pytest.mark.skipif(shutil.which("size") is None, reason="no binutils size on this machine")
@pytest.mark.parametrize("name", SAMPLES)
def test_bss_is_the_arena_inputs_and_outputs_included(builds, name: str) -> None:
    module, _ = load(name)
    (report,) = [r for r in memory_report(planned(module, "c")) if r.name == "main"]
    assert report.io_in_arena
    assert report.inputs_in_arena_bytes == report.input_bytes.bound
    built = builds[(name, "packed", False)]
    subprocess.run(
        [CC, "-std=c99", "-O2", "-c", f"{name}.c", "-o", f"{name}.o"],
        cwd=built.folder,
        check=True,
    )
    sections = section_sizes(built.folder / f"{name}.o")
    assert sections.get(".bss", 0) == report.arena_bytes == built.sources.info.workspace_bytes
    assert sections.get(".data", 0) == 0


CALLER = r"""
#include "mlp.h"
#include <stdio.h>
#include <string.h>

int main(void)
{
    float *x = mlp_input_x();
    const float *y = mlp_output_probs();
    float first[80];
    int i, run;
    for (run = 0; run < 2; ++run) {
        for (i = 0; i < 8 * 64; ++i) x[i] = (float)((i * 7 + run * 3) % 11) / 10.0f - 0.5f;
        if (mlp_run() != MLP_OK) return 1;
        if (run == 0) memcpy(first, y, sizeof first);
    }
    for (i = 0; i < 80; ++i) printf("%.9g %.9g\n", (double)first[i], (double)y[i]);
    return mlp_input_x() == x && mlp_output_probs() == y ? 0 : 2;
}
"""


def test_a_caller_written_against_the_header(builds, tmp_path: Path) -> None:
    """Fill the input where mlp_input_x() points, run, read where mlp_output_probs() points;
    twice, with other inputs the second time (the pointers never change)."""
    built = builds[("mlp", "packed", False)]
    for f in ("mlp.c", "mlp.h"):
        shutil.copy(built.folder / f, tmp_path / f)
    (tmp_path / "caller.c").write_text(CALLER)
    subprocess.run(
        [CC, *STRICT, "mlp.c", "caller.c", "-lm", "-o", "caller"], cwd=tmp_path, check=True
    )
    out = subprocess.run(["./caller"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = np.array([line.split() for line in out.stdout.splitlines()], dtype=np.float32)
    module, weights = load("mlp")
    for run in range(2):
        i = np.arange(8 * 64)
        x = ((i * 7 + run * 3) % 11).astype(np.float32) / np.float32(10.0) - np.float32(0.5)
        want = vm_result(module, weights, [x.reshape(8, 64)], {})
        assert_close([got[:, run].reshape(8, 10)], want, f"run {run}")

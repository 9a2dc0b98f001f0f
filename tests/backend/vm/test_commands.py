"""The VM through the command line: build writes .rxb, run runs it (--stats, --check,
--source), disasm prints it, and a malformed file is one error line with exit 1."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from relaxc.backend.vm import compile_module
from relaxc.cli.main import cli
from relaxc.cli.units import short_bytes
from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import load_npz

from .util import KITCHEN_SINK, KITCHEN_WEIGHTS, SAMPLES, compile_text, rehash


def invoke(*args: object):
    env = {"RELAXC_DEBUG": None, "COLUMNS": "120"}
    return CliRunner().invoke(
        cli, [str(a) for a in args], env=env, prog_name="relaxc", catch_exceptions=False
    )


def assert_user_error(result, *needles: str) -> None:
    assert result.exit_code == 1, f"exit {result.exit_code}:\n{result.output}"
    for n in needles:
        assert n in result.stderr, f"{n!r} not in:\n{result.stderr}"
    assert "Traceback" not in result.output and "internal error" not in result.output


def assert_usage_error(result, *needles: str) -> None:
    assert result.exit_code == 2, f"exit {result.exit_code}:\n{result.output}"
    for n in needles:
        assert n in result.stderr, f"{n!r} not in:\n{result.stderr}"


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    folder = tmp_path / "samples"
    shutil.copytree(
        SAMPLES,
        folder,
        ignore=shutil.ignore_patterns("*.py", "__pycache__", "*.rxb", "*.lowered.rx"),
    )
    return folder


@pytest.fixture
def rxb(samples: Path) -> Path:
    result = invoke("build", samples / "transformer.rx")
    assert result.exit_code == 0, result.output
    return samples / "transformer.rxb"


# ---------------------------------------------------------------------------------------
# build


def test_build_writes_rxb_beside_the_input_and_prints_the_summary(samples: Path) -> None:
    result = invoke("build", samples / "mlp.rx")
    assert result.exit_code == 0, result.output
    out = samples / "mlp.rxb"
    assert out.read_bytes().startswith(b"\x89RXB\r\n\x1a\n")
    assert "@main: arena 8.0 KiB (8,192 B), 1.00x the lower bound" in result.stderr
    assert f"wrote {out} ({short_bytes(out.stat().st_size)})" in result.stderr
    assert result.stdout == ""
    assert not list(samples.glob(".*.tmp"))  # written atomically


def test_build_is_byte_identical_across_builds(samples: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.rxb", tmp_path / "b.rxb"
    assert invoke("build", samples / "cnn.rx", "-o", a).exit_code == 0
    assert invoke("build", samples / "cnn.rx", "-o", b, "-q").exit_code == 0
    assert a.read_bytes() == b.read_bytes()


def test_build_is_byte_identical_across_processes(samples: Path, tmp_path: Path) -> None:
    outs = []
    for i, seed in enumerate(("0", "12345")):
        out = tmp_path / f"{i}.rxb"
        env = {"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "relaxc.cli.main",
                "build",
                samples / "transformer.rx",
                "-o",
                out,
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_build_json_still_works(samples: Path) -> None:
    result = invoke("build", samples / "mlp.rx", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["functions"][0]["arena_bytes"] == 8192
    assert (samples / "mlp.rxb").exists()


def test_build_refuses_stdout_and_inputs(samples: Path) -> None:
    before = sorted(p.name for p in samples.iterdir())
    assert_user_error(invoke("build", samples / "mlp.rx", "-o", "-"), "bytecode is binary")
    assert_user_error(
        invoke("build", samples / "mlp.rx", "-o", samples / "mlp.rx"), "refusing to write"
    )
    assert_user_error(
        invoke("build", samples / "mlp.rx", "-o", samples / "mlp.npz"), "refusing to write"
    )
    assert sorted(p.name for p in samples.iterdir()) == before


def test_build_needs_the_weights(samples: Path) -> None:
    (samples / "mlp.npz").unlink()
    assert_user_error(invoke("build", samples / "mlp.rx"), "fc1.weight")
    assert not (samples / "mlp.rxb").exists()


# ---------------------------------------------------------------------------------------
# run


@pytest.mark.parametrize(
    "stem, dims",
    [
        ("mlp", ()),
        ("cnn", ()),
        ("transformer", ("--dim", "n=17")),
        ("relay_memory", ("--dim", "n=5")),
    ],
)
def test_run_rxb_gives_the_outputs_of_run_rx(samples: Path, stem: str, dims: tuple) -> None:
    assert invoke("build", samples / f"{stem}.rx", "-q").exit_code == 0
    a, b = samples / "a.npz", samples / "b.npz"
    r1 = invoke("run", samples / f"{stem}.rxb", "--seed", 3, "-o", a, *dims)
    r2 = invoke("run", samples / f"{stem}.rx", "--seed", 3, "-o", b, *dims)
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output + r2.output
    x, y = load_npz(a), load_npz(b)
    assert list(x) == list(y) == ["output"]
    assert x["output"].tobytes() == y["output"].tobytes()
    assert r1.stdout == r2.stdout  # the same outputs table


def test_run_rxb_with_inputs_file(rxb: Path, samples: Path) -> None:
    x = np.random.default_rng(0).normal(size=(9, 64)).astype(np.float32)
    np.savez(samples / "in.npz", x=x)
    out = samples / "out.npz"
    result = invoke("run", rxb, "--inputs", samples / "in.npz", "-o", out, "--check")
    assert result.exit_code == 0, result.output
    assert load_npz(out)["output"].shape == (9, 64)
    assert "(9, 64)" in result.stdout


def test_run_stats_shows_measured_and_promised(rxb: Path) -> None:
    result = invoke("run", rxb, "--stats", "--dim", "n=64")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "memory of @main on the VM (n=64)" in out
    assert "measured │ 557,056 B │ 557,056 B │          0 B │ 16,384 B" in out
    assert "promised │ 557,056 B │ 557,056 B │          0 B │ 16,384 B" in out
    assert "the run held exactly the memory the plan promised" in out


def test_run_stats_on_a_dynamic_model(samples: Path) -> None:
    text = (
        (samples / "transformer.rx")
        .read_text()
        .replace("\n    attrs {upper_bounds = {n = 128}}", "")
    )
    (samples / "dyn.rx").write_text(text)
    shutil.copy(samples / "transformer.npz", samples / "dyn.npz")
    assert invoke("build", samples / "dyn.rx", "-q").exit_code == 1  # unbounded: refused
    assert invoke("build", samples / "dyn.rx", "-q", "--allow-unbounded").exit_code == 0
    for n in (5, 300):
        result = invoke("run", samples / "dyn.rxb", "--stats", "--dim", f"n={n}")
        assert result.exit_code == 0, result.output
        assert "the run held exactly the memory the plan promised" in result.stdout
        assert f"(n={n})" in result.stdout


def test_run_rx_stats_and_check_compile_in_memory(samples: Path) -> None:
    result = invoke("run", samples / "cnn.rx", "--stats", "--check")
    assert result.exit_code == 0, result.output
    assert (
        "check: 1 output(s) of the VM running the compiled program match the reference interpreter "
        "(bit-identical)"
    ) in result.stdout
    assert "the run held exactly the memory the plan promised" in result.stdout
    assert not (samples / "cnn.rxb").exists()


def test_run_check_and_source(rxb: Path, samples: Path) -> None:
    result = invoke("run", rxb, "--check", "--source", samples / "transformer.rx", "--dim", "n=3")
    assert result.exit_code == 0, result.output
    assert (
        f"match the reference interpreter running the program in {rxb} (bit-identical)"
        in result.stdout
    )
    assert (
        f"match the reference interpreter running {samples / 'transformer.rx'} (bit-identical)"
        in result.stdout
    )


def test_run_check_fails_when_the_source_differs(rxb: Path, samples: Path) -> None:
    other = samples / "other.rx"
    other.write_text(
        (samples / "transformer.rx")
        .read_text()
        .replace("%out = add(%r1, %f2)", "%out = subtract(%r1, %f2)")
    )
    shutil.copy(samples / "transformer.npz", samples / "other.npz")
    result = invoke("run", rxb, "--check", "--source", other, "--dim", "n=2")
    assert_user_error(
        result,
        "error: check failed: the VM and the reference interpreter running",
        "differs at index",
    )


def test_run_source_and_params_usage(rxb: Path, samples: Path) -> None:
    assert_usage_error(
        invoke("run", rxb, "--source", samples / "transformer.rx"),
        "--source needs an .rxb FILE and --check",
    )
    assert_usage_error(
        invoke("run", samples / "mlp.rx", "--check", "--source", samples / "mlp.rx"),
        "--source needs",
    )
    assert_usage_error(
        invoke("run", rxb, "--params", samples / "transformer.npz"), "an .rxb holds its own"
    )


@pytest.mark.parametrize("how", ["dim", "inputs"])
def test_run_rxb_dim_above_upper_bound(rxb: Path, samples: Path, how: str) -> None:
    if how == "dim":
        result = invoke("run", rxb, "--dim", "n=129")
    else:
        np.savez(samples / "big.npz", x=np.zeros((129, 64), np.float32))
        result = invoke("run", rxb, "--inputs", samples / "big.npz")
    assert_user_error(
        result, "error: dimension 'n' is 129, larger than its upper bound 128 in @main"
    )


def test_run_bytecode_is_recognised_by_its_magic(rxb: Path, samples: Path) -> None:
    renamed = samples / "model.bin"
    shutil.copy(rxb, renamed)
    result = invoke("run", renamed, "--dim", "n=2", "--check")
    assert result.exit_code == 0, result.output
    assert "check: 1 output(s) of the VM match" in result.stdout


def test_run_poison_changes_nothing_in_a_correct_program(rxb: Path) -> None:
    a = invoke("run", rxb, "--dim", "n=7", "--poison", "--check")
    b = invoke("run", rxb, "--dim", "n=7")
    assert a.exit_code == 0 and b.exit_code == 0
    assert b.stdout in a.stdout


def test_help_lists_the_new_options() -> None:
    out = invoke("run", "--help").stdout
    for opt in ("--stats", "--check", "--source", "--poison", ".rxb"):
        assert opt in out
    assert "disasm" in invoke("--help").stdout


# ---------------------------------------------------------------------------------------
# disasm


def test_disasm_lists_functions_constants_and_instructions(rxb: Path) -> None:
    result = invoke("disasm", rxb)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith(f"{rxb}: relaxc bytecode format 1, {rxb.stat().st_size:,} bytes, sha256 ")
    assert "constants: 17 (195.3 KiB (199,940 B))" in out
    assert "ln1.gamma" in out and "(inline)" in out
    assert (
        "#0   @scaled_softmax           primitive params 2   registers 5     instructions 6" in out
    )
    assert (
        "fn @main(r0:%x: Tensor[(n, 64), f32]) -> Tensor[(n, 64), f32] attrs "
        "{upper_bounds = {n = 128}, order_peak_written = 557056, order_peak_chosen = 557056, "
        "planned = true}" in out
    )
    assert (
        "alloc_storage r1:%arena = memory.alloc_storage(557056, align=64, "
        'scope="global", arena=true, proven_bound=557056)' in out
    )
    assert "invoke        layer_norm(r0:%x, r2:%g1, r3:%b1) outs (r4:%ln1)" in out
    assert "invoke_func   @scaled_softmax(" in out
    assert "kill_tensor   r4:%ln1" in out
    assert out.rstrip().splitlines()[-1].split()[1:] == ["ret", "r40:%out"]


def test_disasm_every_instruction(tmp_path: Path) -> None:
    path = tmp_path / "k.rxb"
    path.write_bytes(compile_module(compile_text(KITCHEN_SINK), KITCHEN_WEIGHTS))
    out = invoke("disasm", path).stdout
    for op in (
        "alloc_storage",
        "alloc_tensor",
        "invoke ",
        "invoke_func",
        "kernel",
        "call ",
        "tuple",
        "project",
        "move",
        "view",
        "call_packed",
        "const",
        "kill_tensor",
        "kill_storage",
        "kill_object",
        "ret",
    ):
        assert f"  {op}" in out, op
    assert 'r15:%o: Tensor[(n, 4), f32] = call_packed("vm.builtin.reshape", r14:%v, (n, 4))' in out


def test_disasm_prints_float_attributes(tmp_path: Path) -> None:
    text = """\
fn @main(%x: Tensor[(2, 3), f32]) -> Tuple[Tensor[(2, 3), f32], Tensor[(2, 3), f32]] {
  %a = leaky_relu(%x, alpha=0.25)
  %b = leaky_relu(%a, 1e-07)
  %c = erf(%b)
  %d = leaky_relu(%c)
  return (%b, %d)
}
"""
    path = tmp_path / "lr.rxb"
    path.write_bytes(compile_module(compile_text(text), {}))
    out = invoke("disasm", path).stdout
    assert "invoke        leaky_relu(r0:%x, alpha=0.25) outs (r2:%a)" in out
    assert "invoke        leaky_relu(r2:%a, 1e-07) outs (r4:%b)" in out
    assert "invoke        erf(r4:%b) outs (r5:%c)" in out
    assert "invoke        leaky_relu(r5:%c) outs (r7:%d)" in out
    ir = invoke("disasm", path, "--ir").stdout
    assert parse_module(ir, "a.rx") == compile_text(text)


def test_disasm_ir_is_the_program(rxb: Path, samples: Path) -> None:
    result = invoke("disasm", rxb, "--ir")
    assert result.exit_code == 0
    lowered = invoke("build", samples / "transformer.rx", "-t", "ir", "-o", "-", "-q").stdout
    assert parse_module(result.stdout, "a.rx") == parse_module(lowered, "b.rx")


# ---------------------------------------------------------------------------------------
# Malformed files through the CLI: one line, exit 1, no traceback


def malformed(rxb: Path) -> dict[str, bytes]:
    good = rxb.read_bytes()
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x10
    version = bytearray(good)
    version[8] = 9
    return {
        "empty": b"",
        "text": b"fn @main() -> Tensor[(1,), f32] {}\n",
        "magic": b"\x89PNG\r\n\x1a\n" + good[8:],
        "version": bytes(version),
        "truncated header": good[:30],
        "truncated payload": good[:-100],
        "bit flip": bytes(flipped),
        "cut, header fixed": rehash(good[: len(good) // 3]),
        "trailing garbage": rehash(good + b"junk"),
    }


@pytest.mark.parametrize("command", ["run", "disasm"])
def test_malformed_files_are_one_error_line(rxb: Path, samples: Path, command: str) -> None:
    for what, data in malformed(rxb).items():
        path = samples / "bad.rxb"
        path.write_bytes(data)
        result = invoke(command, path)
        assert_user_error(result, f"error: {path} ")
        assert len(result.stderr.strip().splitlines()) == 1, (what, result.stderr)
        assert result.stdout == "", what


def test_missing_file_and_directory(samples: Path) -> None:
    assert_user_error(invoke("disasm", samples / "nope.rxb"), "does not exist")
    assert_user_error(invoke("run", samples / "nope.rxb"), "does not exist")
    (samples / "dir.rxb").mkdir()
    assert_user_error(invoke("disasm", samples / "dir.rxb"), "is a directory")


def test_malformed_file_in_a_subprocess(rxb: Path, samples: Path) -> None:
    path = samples / "bad.rxb"
    path.write_bytes(rxb.read_bytes()[:500])
    proc = subprocess.run(
        [sys.executable, "-m", "relaxc.cli.main", "run", path], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: {path} is truncated")
    assert "Traceback" not in proc.stderr

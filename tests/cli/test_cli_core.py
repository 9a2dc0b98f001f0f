"""Behaviour of the relaxc command line: --version/--help, check, fmt and run.

Programs are written inline into ``tmp_path``; the CLI runs in-process through click's
CliRunner (real exceptions propagate, so a crash is never mistaken for an exit code), and a
few tests go through a subprocess to prove the exit codes end to end.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from relaxc.cli.main import cli
from relaxc.frontend.parser import parse_module
from relaxc.ir.verifier import verify_module

MODEL = """\
# add a bias row to every row of %x, then relu
fn @main(%x: Tensor[(n, 4), f32], %w: Tensor[(4,), f32]) -> Tensor[(n, 4), f32]
    attrs {upper_bounds = {n = 8}} {
  %a = add(%x, %w)
  %b = relu(%a)  # the output
  return %b
}
"""

UNFORMATTED = """\
# header comment stays
fn   @main(%x:Tensor[(n,4),f32],%w:Tensor[(4,),f32])->Tensor[(n,4),f32] attrs{upper_bounds={n=8}}{
  %a=add(%x,%w)     # trailing comment stays
  # own-line comment stays
  %b=relu( %a )
  return %b
}
"""

UNBOUNDED = """\
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  %b = relu(%x)
  return %b
}
"""

WEIGHTED = """\
fn @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  %w: Tensor[(2, 3), f32] = const("dense.weight")
  %b: Tensor[(3,), f32] = const("dense.bias")
  %a = add(%x, %w)
  %c = add(%a, %b)
  return %c
}
"""

TWO_OUTPUTS = """\
fn @main(%x: Tensor[(3,), f32]) -> Tuple[Tensor[(3,), f32], Tensor[(3,), f32]] {
  %a = relu(%x)
  %b = exp(%x)
  %t = (%a, %b)
  return %t
}
"""


# ---------------------------------------------------------------------------------------
# Helpers


def invoke(*args: object, input: str | None = None):
    runner = CliRunner()
    return runner.invoke(
        cli,
        [str(a) for a in args],
        input=input,
        env={"RELAXC_DEBUG": None},
        prog_name="relaxc",
        catch_exceptions=False,
    )


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RELAXC_DEBUG"}
    env.update(extra)
    return env


def run_module(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "relaxc.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd=cwd,
        timeout=120,
    )


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def savez(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


def load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def assert_user_error(result, *needles: str) -> None:
    """Exit 1, each needle in stderr, no traceback and no 'internal error'."""
    assert result.exit_code == 1, f"exit {result.exit_code}:\n{result.output}"
    for n in needles:
        assert n in result.stderr, f"{n!r} not in:\n{result.stderr}"
    assert "Traceback" not in result.output
    assert "internal error" not in result.output


def leftovers(folder: Path) -> list[str]:
    """Temporary files an atomic writer might leave behind."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.suffix == ".tmp")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write(tmp_path / "model.rx", MODEL)


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    w = np.array([0.5, -0.25, 0.0, 1.0], dtype=np.float32)
    return savez(tmp_path / "in.npz", x=x, w=w), x, w


# ---------------------------------------------------------------------------------------
# --version and --help


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"relaxc {version('relaxc')}"


def test_version_subprocess() -> None:
    proc = run_module("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"relaxc {version('relaxc')}"


@pytest.mark.parametrize(
    "command, options",
    [
        ((), ("--version", "--debug", "check", "fmt", "run")),
        (("check",), ("FILES", "--params", "--quiet")),
        (("fmt",), ("FILES", "--check", "--diff", "--stdout")),
        (
            ("run",),
            ("FILE", "--inputs", "--output", "-o", "--params", "--entry", "--seed", "--dim"),
        ),
    ],
    ids=["relaxc", "check", "fmt", "run"],
)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help(command: tuple[str, ...], options: tuple[str, ...], flag: str) -> None:
    result = invoke(*command, flag)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: relaxc")
    for opt in options:
        assert opt in result.stdout, f"{opt} missing from {' '.join(command)} --help"


@pytest.mark.parametrize(
    "args, needle",
    [
        (("check",), "Missing argument"),
        (("fmt",), "Missing argument"),
        (("run",), "Missing argument"),
        (("bogus",), "No such command"),
        (("run", "model.rx", "--seed", "abc"), "--seed"),
        (("check", "--no-such-option", "x.rx"), "No such option"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...], needle: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert needle in result.stderr


def test_usage_error_subprocess(tmp_path: Path) -> None:
    proc = run_module("run", tmp_path / "m.rx", "--dim", "n")
    assert proc.returncode == 2
    assert "--dim" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------
# check


def test_check_valid_file(model: Path) -> None:
    result = invoke("check", model)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{model}: ok")
    assert result.stderr == ""


def test_check_quiet(model: Path) -> None:
    result = invoke("check", "-q", model)
    assert result.exit_code == 0
    assert result.output == ""


def test_check_valid_file_subprocess(model: Path) -> None:
    proc = run_module("check", model)
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


def test_check_mentions_weights_beside_model(tmp_path: Path) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    savez(
        tmp_path / "net.npz",
        **{"dense.weight": np.ones((2, 3), np.float32), "dense.bias": np.ones(3, np.float32)},
    )
    result = invoke("check", path)
    assert result.exit_code == 0, result.output
    assert "net.npz" in result.stdout


def test_check_reports_bad_weights_beside_model(tmp_path: Path) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    savez(
        tmp_path / "net.npz",
        **{"dense.weight": np.ones((3, 2), np.float32), "dense.bias": np.ones(3, np.float32)},
    )
    result = invoke("check", path)
    assert_user_error(result, f"{path}:2:3: error: weight 'dense.weight' has shape (3, 2)")


# ---------------------------------------------------------------------------------------
# fmt


def test_fmt_rewrites_in_place(tmp_path: Path) -> None:
    path = write(tmp_path / "m.rx", UNFORMATTED)
    before = parse_module(UNFORMATTED, str(path))
    result = invoke("fmt", path)
    assert result.exit_code == 0, result.output
    assert "reformatted" in result.stderr
    text = path.read_text()
    assert text != UNFORMATTED
    assert parse_module(text, str(path)) == before  # same meaning
    for comment in (
        "# header comment stays",
        "# trailing comment stays",
        "# own-line comment stays",
    ):
        assert comment in text
    assert "%a = add(%x, %w)" in text
    assert leftovers(tmp_path) == []
    # Idempotent: a second run changes nothing and says nothing.
    again = invoke("fmt", path)
    assert again.exit_code == 0
    assert again.output == ""
    assert path.read_text() == text
    # The result is accepted by check.
    assert invoke("check", path).exit_code == 0


def test_fmt_keeps_file_mode(tmp_path: Path) -> None:
    path = write(tmp_path / "m.rx", UNFORMATTED)
    path.chmod(0o600)
    assert invoke("fmt", path).exit_code == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_fmt_check(tmp_path: Path) -> None:
    path = write(tmp_path / "m.rx", UNFORMATTED)
    result = invoke("fmt", "--check", path)
    assert result.exit_code == 1
    assert f"{path}: would reformat" in result.stderr
    assert path.read_text() == UNFORMATTED  # --check changes nothing
    assert invoke("fmt", path).exit_code == 0
    formatted = invoke("fmt", "--check", path)
    assert formatted.exit_code == 0, formatted.output
    assert formatted.output == ""


def test_fmt_check_diff(tmp_path: Path) -> None:
    path = write(tmp_path / "m.rx", UNFORMATTED)
    result = invoke("fmt", "--check", "--diff", path)
    assert result.exit_code == 1
    assert "-  %a=add(%x,%w)" in result.stdout
    assert "+  %a = add(%x, %w)" in result.stdout
    assert path.read_text() == UNFORMATTED


def test_fmt_stdout(tmp_path: Path) -> None:
    path = write(tmp_path / "m.rx", UNFORMATTED)
    result = invoke("fmt", "--stdout", path)
    assert result.exit_code == 0
    assert path.read_text() == UNFORMATTED  # untouched
    assert "# own-line comment stays" in result.stdout
    assert parse_module(result.stdout) == parse_module(UNFORMATTED)
    # What --stdout prints is exactly what fmt writes.
    assert invoke("fmt", path).exit_code == 0
    assert path.read_text() == result.stdout


def test_fmt_leaves_a_file_with_a_syntax_error_untouched(tmp_path: Path) -> None:
    bad = (
        "fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  %a = relu(%x\n  return   %a\n}\n"
    )
    path = write(tmp_path / "bad.rx", bad)
    os.utime(path, (1_000_000_000, 1_000_000_000))
    result = invoke("fmt", path)
    assert_user_error(result, f"{path}:3:3: error: unexpected 'return'")
    assert path.read_bytes() == bad.encode()
    assert path.stat().st_mtime == 1_000_000_000
    assert leftovers(tmp_path) == []


def test_fmt_formats_good_files_and_reports_bad_ones(tmp_path: Path) -> None:
    good = write(tmp_path / "good.rx", UNFORMATTED)
    bad_text = "fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  return $x\n}\n"
    bad = write(tmp_path / "bad.rx", bad_text)
    result = invoke("fmt", bad, good)
    assert result.exit_code == 1
    assert f"{bad}:2:10: error: unexpected character '$'" in result.stderr
    assert bad.read_text() == bad_text
    assert good.read_text() != UNFORMATTED
    assert invoke("fmt", "--check", good).exit_code == 0


# ---------------------------------------------------------------------------------------
# run: inputs


def test_run_random_inputs_are_seeded(model: Path, tmp_path: Path) -> None:
    outs = []
    for i, seed in enumerate((7, 7, 8)):
        out = tmp_path / f"out{i}.npz"
        result = invoke("run", model, "--seed", seed, "-o", out)
        assert result.exit_code == 0, result.output
        outs.append(load(out)["output"])
    assert outs[0].shape == (8, 4)  # n takes its upper bound
    assert outs[0].dtype == np.float32
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], outs[2])


def test_run_prints_an_outputs_table(model: Path) -> None:
    result = invoke("run", model, "--dim", "n=3")
    assert result.exit_code == 0, result.output
    assert "output" in result.stdout
    assert "(3, 4)" in result.stdout
    assert "float32" in result.stdout


def test_run_with_inputs_file(model: Path, inputs, tmp_path: Path) -> None:
    path, x, w = inputs
    out = tmp_path / "out.npz"
    result = invoke("run", model, "--inputs", path, "-o", out)
    assert result.exit_code == 0, result.output
    got = load(out)
    assert list(got) == ["output"]
    np.testing.assert_array_equal(got["output"], np.maximum(x + w, 0))


def test_run_with_inputs_file_subprocess(model: Path, inputs, tmp_path: Path) -> None:
    path, x, w = inputs
    out = tmp_path / "out.npz"
    proc = run_module("run", model, "--inputs", path, "-o", out)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(load(out)["output"], np.maximum(x + w, 0))


X34 = np.zeros((3, 4), np.float32)
W4 = np.zeros(4, np.float32)


@pytest.mark.parametrize(
    "arrays, needles",
    [
        (
            dict(x=X34, v=W4),
            ("does not match @main", "missing w", "unexpected v", "@main takes: x, w"),
        ),
        (dict(x=X34), ("does not match @main", "missing w")),
        (dict(x=X34, w=W4, z=W4), ("does not match @main", "unexpected z")),
        (dict(x=np.zeros((3, 5), np.float32), w=W4), ("input %x has shape (3, 5)", "(3, 4)")),
        (dict(x=X34, w=np.zeros(5, np.float32)), ("input %w has shape (5,)", "(4,)")),
        (dict(x=X34.astype(np.float64), w=W4), ("input %x has dtype float64", "f32")),
        (dict(x=X34, w=W4.astype(np.int32)), ("input %w has dtype int32", "f32")),
        (dict(x=np.zeros((3, 4, 1), np.float32), w=W4), ("input %x has rank 3",)),
        (dict(x=np.zeros((9, 4), np.float32), w=W4), ("dimension 'n' is 9", "upper bound 8")),
    ],
    ids=[
        "wrong-name",
        "missing",
        "extra",
        "wrong-shape",
        "wrong-shape-w",
        "wrong-dtype",
        "wrong-dtype-w",
        "wrong-rank",
        "above-bound",
    ],
)
def test_run_rejects_bad_inputs(
    model: Path, tmp_path: Path, arrays: dict, needles: tuple[str, ...]
) -> None:
    path = savez(tmp_path / "bad_inputs.npz", **arrays)
    out = tmp_path / "out.npz"
    result = invoke("run", model, "--inputs", path, "-o", out)
    assert_user_error(result, *needles)
    assert not out.exists()


@pytest.mark.parametrize(
    "content", [b"", b"PK\x03\x04" + b"\x00" * 64], ids=["empty", "broken-zip"]
)
def test_run_rejects_corrupt_inputs_file(model: Path, tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "in.npz"
    path.write_bytes(content)
    result = invoke("run", model, "--inputs", path)
    assert_user_error(result, str(path), "not a readable .npz archive")


def test_run_rejects_missing_inputs_file(model: Path, tmp_path: Path) -> None:
    result = invoke("run", model, "--inputs", tmp_path / "nope.npz")
    assert_user_error(result, "nope.npz", "does not exist")


# ---------------------------------------------------------------------------------------
# run: --dim


@pytest.mark.parametrize("spec", ["n", "n=abc", "=4", "1n=3", "n=-1", "n=", "n=1.5"])
def test_run_dim_parse_errors_exit_2(model: Path, spec: str) -> None:
    result = invoke("run", model, "--dim", spec)
    assert result.exit_code == 2, result.output
    assert "--dim" in result.stderr
    assert "Traceback" not in result.output


def test_run_dim_given_twice_exit_2(model: Path) -> None:
    result = invoke("run", model, "--dim", "n=2", "--dim", "n=3")
    assert result.exit_code == 2
    assert "given twice" in result.stderr


def test_run_unbounded_dim_names_the_flag(tmp_path: Path) -> None:
    path = write(tmp_path / "ub.rx", UNBOUNDED)
    result = invoke("run", path)
    assert_user_error(result, "'n'", "--dim n=")
    ok = invoke("run", path, "--dim", "n=2")
    assert ok.exit_code == 0, ok.output
    assert "(2, 4)" in ok.stdout


def test_run_dim_above_upper_bound(model: Path) -> None:
    result = invoke("run", model, "--dim", "n=9")
    assert_user_error(result, "'n'", "9", "upper bound 8")


def test_run_dim_at_upper_bound(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    assert invoke("run", model, "--dim", "n=8", "-o", out).exit_code == 0
    assert load(out)["output"].shape == (8, 4)


def test_run_unknown_dim(model: Path) -> None:
    result = invoke("run", model, "--dim", "m=3")
    assert_user_error(result, "'m'", "n")


def test_run_dim_disagreeing_with_inputs(model: Path, inputs) -> None:
    path, _, _ = inputs  # x has 3 rows
    result = invoke("run", model, "--inputs", path, "--dim", "n=4")
    assert_user_error(result, "'n' is 4", "--dim")


def test_run_dims_whose_product_overflows(tmp_path: Path) -> None:
    path = write(
        tmp_path / "nm.rx",
        "fn @main(%x: Tensor[(n, m), f32]) -> Tensor[(n, m), f32] {\n"
        "  %a = relu(%x)\n  return %a\n}\n",
    )
    result = invoke("run", path, "--dim", f"n={2**32}", "--dim", f"m={2**32}")
    assert_user_error(result, "limit")


# ---------------------------------------------------------------------------------------
# run: outputs


def test_run_output_equals_interpreter(model: Path, inputs, tmp_path: Path) -> None:
    from relaxc.backend.interpreter import Interpreter

    path, x, w = inputs
    out = tmp_path / "out.npz"
    assert invoke("run", model, "--inputs", path, "-o", out).exit_code == 0
    module = parse_module(MODEL, str(model))
    expected = Interpreter(module, {}, types=verify_module(module)).run("main", [x, w])
    got = load(out)["output"]
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_run_output_of_a_tuple(tmp_path: Path) -> None:
    path = write(tmp_path / "two.rx", TWO_OUTPUTS)
    x = np.array([-1.0, 0.0, 2.0], np.float32)
    inp = savez(tmp_path / "in.npz", x=x)
    out = tmp_path / "out.npz"
    result = invoke("run", path, "--inputs", inp, "-o", out)
    assert result.exit_code == 0, result.output
    got = load(out)
    assert sorted(got) == ["output_0", "output_1"]
    np.testing.assert_array_equal(got["output_0"], np.maximum(x, 0))
    np.testing.assert_allclose(got["output_1"], np.exp(x), rtol=1e-6)


def test_run_output_is_deterministic_bytes(model: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    assert invoke("run", model, "-o", a).exit_code == 0
    assert invoke("run", model, "-o", b).exit_code == 0
    assert a.read_bytes() == b.read_bytes()


def test_run_refuses_to_overwrite_its_inputs_file(model: Path, inputs) -> None:
    path, _, _ = inputs
    before = path.read_bytes()
    result = invoke("run", model, "--inputs", path, "-o", path)
    assert_user_error(result, "refusing to write", "one of the inputs")
    assert path.read_bytes() == before


def test_run_refuses_to_overwrite_its_inputs_through_another_spelling(
    model: Path, inputs, tmp_path: Path
) -> None:
    path, _, _ = inputs
    before = path.read_bytes()
    (tmp_path / "sub").mkdir()
    other = tmp_path / "sub" / ".." / path.name
    result = invoke("run", model, "--inputs", path, "-o", other)
    assert_user_error(result, "refusing to write")
    assert path.read_bytes() == before


def test_run_refuses_to_overwrite_the_model_or_weights(tmp_path: Path) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    weights = savez(
        tmp_path / "w.npz",
        **{"dense.weight": np.ones((2, 3), np.float32), "dense.bias": np.ones(3, np.float32)},
    )
    wbytes = weights.read_bytes()
    assert_user_error(invoke("run", path, "-o", path), "refusing to write")
    assert path.read_text() == WEIGHTED
    assert_user_error(invoke("run", path, "--params", weights, "-o", weights), "refusing to write")
    assert weights.read_bytes() == wbytes


def test_run_output_into_missing_folder(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "dir" / "out.npz"
    result = invoke("run", model, "-o", out)
    assert_user_error(result, str(out), "does not exist")
    assert not (tmp_path / "no").exists()


def test_run_output_onto_a_directory(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    out.mkdir()
    result = invoke("run", model, "-o", out)
    assert_user_error(result, "directory")
    assert out.is_dir()


def test_run_output_overwrites_atomically(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    out.write_bytes(b"old contents")
    assert invoke("run", model, "-o", out).exit_code == 0
    assert load(out)["output"].shape == (8, 4)
    assert [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# ---------------------------------------------------------------------------------------
# run: --entry


def test_run_entry(tmp_path: Path) -> None:
    text = MODEL + (
        "\nfn @other(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n"
        "  %e = negative(%y)\n  return %e\n}\n"
    )
    path = write(tmp_path / "m.rx", text)
    inp = savez(tmp_path / "in.npz", y=np.array([1.0, -2.0], np.float32))
    out = tmp_path / "out.npz"
    result = invoke("run", path, "--entry", "other", "--inputs", inp, "-o", out)
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(load(out)["output"], np.array([-1.0, 2.0], np.float32))
    missing = invoke("run", path, "--entry", "nope")
    assert_user_error(missing, "no function @nope", "@main", "@other", "--entry")


# ---------------------------------------------------------------------------------------
# run: weights


def _weights(tmp_path: Path, name: str = "net.npz", **override: np.ndarray) -> Path:
    arrays = {
        "dense.weight": np.full((2, 3), 2.0, np.float32),
        "dense.bias": np.arange(3, dtype=np.float32),
    }
    arrays.update(override)
    return savez(tmp_path / name, **arrays)


def test_run_picks_up_weights_beside_the_model(tmp_path: Path) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    _weights(tmp_path)
    x = np.ones((2, 3), np.float32)
    inp = savez(tmp_path / "in.npz", x=x)
    out = tmp_path / "out.npz"
    result = invoke("run", path, "--inputs", inp, "-o", out)
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(load(out)["output"], x + 2.0 + np.arange(3, dtype=np.float32))


def test_run_with_params_option(tmp_path: Path) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    params = _weights(tmp_path, "elsewhere.npz")
    inp = savez(tmp_path / "in.npz", x=np.zeros((2, 3), np.float32))
    out = tmp_path / "out.npz"
    result = invoke("run", path, "--params", params, "--inputs", inp, "-o", out)
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(
        load(out)["output"], 2.0 + np.tile(np.arange(3, dtype=np.float32), (2, 1))
    )


def test_run_without_weights_reports_the_const_line(tmp_path: Path) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    result = invoke("run", path)
    assert_user_error(result, f"{path}:2:3: error: weight 'dense.weight' is not in", "--params")
    assert '  %w: Tensor[(2, 3), f32] = const("dense.weight")' in result.stderr


def test_run_missing_weight_reports_the_const_line(tmp_path: Path) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    savez(tmp_path / "net.npz", **{"dense.weight": np.ones((2, 3), np.float32)})
    result = invoke("run", path)
    assert_user_error(result, f"{path}:3:3: error: weight 'dense.bias' is not in", "dense.weight")
    lines = result.stderr.split("\n")
    assert lines[1] == '    %b: Tensor[(3,), f32] = const("dense.bias")'
    assert lines[2] == "    ^^"


@pytest.mark.parametrize(
    "override, needle",
    [
        ({"dense.bias": np.ones(4, np.float32)}, "weight 'dense.bias' has shape (4,)"),
        ({"dense.bias": np.ones(3, np.float64)}, "weight 'dense.bias' has dtype float64"),
    ],
)
def test_run_weight_of_the_wrong_type(tmp_path: Path, override: dict, needle: str) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    _weights(tmp_path, **override)
    result = invoke("run", path)
    assert_user_error(result, f"{path}:3:3: error: {needle}")


@pytest.mark.parametrize(
    "content", [b"PK\x03\x04" + b"garbage" * 20, b""], ids=["broken-zip", "empty"]
)
def test_run_params_corrupt_npz(tmp_path: Path, content: bytes) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    params = tmp_path / "bad.npz"
    params.write_bytes(content)
    result = invoke("run", path, "--params", params)
    assert_user_error(result, str(params), "not a readable .npz archive")


@pytest.mark.parametrize(
    "content", [b"hello, I am not an archive\n", b"\x00\x01\x02\x03" * 100], ids=["text", "binary"]
)
@pytest.mark.parametrize("option", ["--params", "--inputs"])
def test_npz_that_is_not_an_archive(tmp_path: Path, option: str, content: bytes) -> None:
    path = write(tmp_path / "net.rx", MODEL)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(content)
    result = invoke("run", path, option, bad)
    assert_user_error(result, str(bad), ".npz archive")
    assert "pickle" not in result.stderr


def test_run_params_single_npy_array(tmp_path: Path) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    params = tmp_path / "single.npz"
    with open(params, "wb") as f:
        np.save(f, np.ones(3, np.float32))
    result = invoke("run", path, "--params", params)
    assert_user_error(result, str(params), "not an .npz archive")


def test_run_params_missing_file(tmp_path: Path) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    result = invoke("run", path, "--params", tmp_path / "nope.npz")
    assert_user_error(result, "nope.npz", "does not exist")


def test_check_params_corrupt_npz(tmp_path: Path) -> None:
    path = write(tmp_path / "net.rx", WEIGHTED)
    params = tmp_path / "bad.npz"
    params.write_bytes(b"PK\x03\x04" + b"garbage" * 20)
    result = invoke("check", path, "--params", params)
    assert_user_error(result, str(params))


# ---------------------------------------------------------------------------------------
# Internal errors: exit 3, no traceback unless --debug


def _boom(*args, **kwargs):
    raise RuntimeError("synthetic failure")


def test_run_internal_error_exits_3(model: Path, monkeypatch) -> None:
    monkeypatch.setattr("relaxc.cli.cmd_run.load_input", _boom)
    result = invoke("run", model)
    assert result.exit_code == 3, result.output
    assert "internal error: RuntimeError: synthetic failure" in result.stderr
    assert "--debug" in result.stderr
    assert "Traceback" not in result.stderr


def test_internal_error_with_debug_shows_traceback(model: Path, monkeypatch) -> None:
    monkeypatch.setattr("relaxc.cli.cmd_run.load_input", _boom)
    result = CliRunner().invoke(
        cli,
        ["--debug", "run", str(model)],
        env={"RELAXC_DEBUG": None},
        prog_name="relaxc",
        catch_exceptions=False,
    )
    assert result.exit_code == 3
    assert "Traceback (most recent call last)" in result.stderr
    assert "synthetic failure" in result.stderr


def test_check_internal_error_exits_3(model: Path, monkeypatch) -> None:
    monkeypatch.setattr("relaxc.cli.cmd_check.load_input", _boom)
    result = invoke("check", model)
    assert result.exit_code == 3, result.output
    assert "internal error" in result.stderr


def test_fmt_internal_error_exits_3(model: Path, monkeypatch) -> None:
    monkeypatch.setattr("relaxc.cli.cmd_fmt.canonical_text", _boom)
    result = invoke("fmt", model)
    assert result.exit_code == 3, result.output
    assert "internal error" in result.stderr
    assert model.read_text() == MODEL


# ---------------------------------------------------------------------------------------
# Bugs found while writing these tests (each a program a user can write)


def test_run_scalar_tensor(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.rx",
        "fn @main(%x: Tensor[(), f32]) -> Tensor[(), f32] {\n  %a = exp(%x)\n  return %a\n}\n",
    )
    inp = savez(tmp_path / "in.npz", x=np.array(0.0, np.float32))
    out = tmp_path / "out.npz"
    result = invoke("run", path, "--inputs", inp, "-o", out)
    assert result.exit_code == 0, result.output
    got = load(out)["output"]
    assert got.shape == () and got == np.float32(1.0)


def test_run_division_by_zero_in_a_dimension(tmp_path: Path) -> None:
    path = write(
        tmp_path / "dz.rx",
        "fn @main(%x: Tensor[(n,), f32]) -> Tensor[(n,), f32]\n"
        "    attrs {upper_bounds = {n = 4}} {\n"
        "  %s = memory.alloc_storage(n / 0)\n  return %x\n}\n",
    )
    result = invoke("run", path)
    assert_user_error(result, f"{path}:3:", "by zero")


@pytest.mark.parametrize("keyword", ["scratch", "outs", "invoke"])
def test_a_keyword_used_as_a_name_is_named_as_one(tmp_path: Path, keyword: str) -> None:
    path = write(
        tmp_path / "kw.rx",
        f"fn @main(%x: Tensor[({keyword},), f32]) -> Tensor[({keyword},), f32] {{\n"
        "  %y = relu(%x)\n  return %y\n}\n",
    )
    result = invoke("check", path)
    assert_user_error(result, f"{path}:1:22: error: unexpected '{keyword}'")
    assert f"note: '{keyword}' is a keyword of the .rx format, not a name" in result.output

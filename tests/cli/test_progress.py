"""The progress display: quiet unless stderr is a terminal (CliRunner's is not) and never with
-q; on a (forced) terminal, rich draws the steps of build, import and run on stderr and
erases them, and the command's own output is unchanged."""

from __future__ import annotations

import io
import re
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from relaxc.cli.main import cli
from relaxc.cli.progress import ENV, ENV_DELAY, Progress, make_progress

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "samples"
ESC = "\x1b["


@pytest.fixture
def cnn(tmp_path: Path) -> Path:
    for name in ("cnn.rx", "cnn.npz"):
        shutil.copy(SAMPLES_DIR / name, tmp_path / name)
    return tmp_path / "cnn.rx"


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv(ENV_DELAY, raising=False)


def terminal() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=100, color_system=None), buf


def invoke(args: list, obj: dict | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], obj=obj, catch_exceptions=False)


def test_quiet_when_stderr_is_not_a_terminal(cnn: Path) -> None:
    plain = invoke(["build", cnn, "-t", "c", "-o", cnn.parent / "c"])
    assert plain.exit_code == 0
    assert ESC not in plain.stderr and "passes" not in plain.stderr
    lines = plain.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("@main: arena") and lines[1].startswith("wrote")


def test_shown_on_a_terminal_and_erased(cnn: Path) -> None:
    console, buf = terminal()
    plain = invoke(["build", cnn, "-t", "c", "-o", cnn.parent / "c0"])
    shown = invoke(
        ["build", cnn, "-t", "c", "-o", cnn.parent / "c1"],
        {"progress_console": console, "progress_delay": 0},
    )
    assert shown.exit_code == 0
    # The command's own output is the same; the display went to the console.
    assert shown.stderr.replace("c1", "c0") == plain.stderr
    drawn = buf.getvalue()
    for step in ("loading cnn.rx", "pass ", "C code", "writing 2 files"):
        assert step in drawn, (step, drawn)
    assert ESC in drawn  # cursor movements: each step's line is erased when it ends
    assert (cnn.parent / "c1" / "cnn.c").read_bytes() == (cnn.parent / "c0" / "cnn.c").read_bytes()


def test_quiet_with_dash_q_even_on_a_terminal(cnn: Path) -> None:
    console, buf = terminal()
    for args in (
        ["build", cnn, "-q", "-o", cnn.parent / "m.rxb"],
        ["run", cnn, "-q"],
    ):
        result = invoke(args, {"progress_console": console, "progress_delay": 0})
        assert result.exit_code == 0, result.output
    assert buf.getvalue() == ""


def test_quick_steps_show_nothing(cnn: Path) -> None:
    """A step shorter than the delay (about a second) never draws."""
    console, buf = terminal()
    result = invoke(["build", cnn, "-o", cnn.parent / "m.rxb"], {"progress_console": console})
    assert result.exit_code == 0
    assert buf.getvalue() == ""


def test_vm_codegen_and_run_steps(cnn: Path) -> None:
    console, buf = terminal()
    obj = {"progress_console": console, "progress_delay": 0}
    assert invoke(["build", cnn, "-o", cnn.parent / "m.rxb"], obj).exit_code == 0
    assert "VM code" in buf.getvalue()
    result = invoke(["run", cnn.parent / "m.rxb", "--check", "--source", cnn], obj)
    assert result.exit_code == 0, result.output
    drawn = buf.getvalue()
    assert "running @main on the VM" in drawn and "with the interpreter" in drawn
    assert "outputs" in result.stdout and ESC not in result.stdout


def test_import_steps(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "m.onnx"
    )
    console, buf = terminal()
    result = invoke(
        ["import", tmp_path / "m.onnx"], {"progress_console": console, "progress_delay": 0}
    )
    assert result.exit_code == 0, result.output
    assert "importing m.onnx" in buf.getvalue() and "writing" in buf.getvalue()
    quiet = invoke(["import", tmp_path / "m.onnx", "-q"], {"progress_console": console})
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_forced_by_the_environment(cnn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RELAXC_PROGRESS=1 draws on stderr even when it is not a terminal; =0 never draws."""
    monkeypatch.setenv(ENV, "1")
    monkeypatch.setenv(ENV_DELAY, "0")
    result = invoke(["build", cnn, "-t", "c", "-o", cnn.parent / "c"])
    assert result.exit_code == 0
    assert "C code" in result.stderr and ESC in result.stderr
    monkeypatch.setenv(ENV, "0")
    console, buf = terminal()
    result = invoke(
        ["build", cnn, "-t", "c", "-o", cnn.parent / "c"],
        {"progress_console": console, "progress_delay": 0},
    )
    assert result.exit_code == 0 and buf.getvalue() == "" and ESC not in result.stderr


def test_an_error_erases_the_display_before_the_message(cnn: Path) -> None:
    console, buf = terminal()
    cnn.with_suffix(".npz").unlink()
    result = invoke(
        ["build", cnn, "-t", "c", "-o", cnn.parent / "c"],
        {"progress_console": console, "progress_delay": 0},
    )
    assert result.exit_code == 1 and "error" in result.stderr and ESC not in result.stderr
    assert "loading cnn.rx" in buf.getvalue()


def test_dumps_on_stdout_turn_the_passes_display_off(cnn: Path) -> None:
    console, buf = terminal()
    result = invoke(
        ["build", cnn, "-t", "ir", "-o", cnn.parent / "o.rx", "--dump-after", "PlanMemory"],
        {"progress_console": console, "progress_delay": 0},
    )
    assert result.exit_code == 0 and "# ===== IR after PlanMemory" in result.stdout
    assert "pass " not in buf.getvalue()


def test_a_step_appears_after_the_delay_and_counts_from_its_start() -> None:
    console, buf = terminal()
    progress = Progress(console, delay=0.2)
    with progress.step("slow", total=10) as step:
        step.update(3)
        assert buf.getvalue() == ""  # not yet
        time.sleep(0.6)
        step.update(7)
        time.sleep(0.2)
        drawn = buf.getvalue()
    assert "slow" in drawn and "70%" in drawn and re.search(r"0:00:0\d", drawn)


def test_make_progress_decides_from_quiet_the_terminal_and_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    console, _ = terminal()
    assert make_progress({"progress_console": console}).enabled
    assert not make_progress({"progress_console": console}, quiet=True).enabled
    assert not make_progress({"progress_console": Console(file=io.StringIO())}).enabled
    monkeypatch.setenv(ENV, "0")
    assert not make_progress({"progress_console": console}).enabled
    monkeypatch.setenv(ENV, "1")
    monkeypatch.setenv(ENV_DELAY, "2.5")
    forced = make_progress({})
    assert forced.enabled and forced.delay == 2.5
    with Progress(None).step("nothing", 3) as step:  # disabled: a no-op step
        step.update(1)
        step.advance()

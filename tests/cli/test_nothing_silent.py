"""Nothing passes silently: check validates the weights as build would, an empty program is
an error, a closed stdout is a normal end (0, whenever the reader left, in every command),
Ctrl-C ends as Unix tools end (130), neither with a traceback, and -q
means "nothing but errors" in every command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from relaxc.cli.main import cli
from relaxc.frontend.weights import npz_bytes

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"

WEIGHTED = """\
fn @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  %w: Tensor[(2, 3), f32] = const("dense.weight")
  %a = add(%x, %w)
  return %a
}
"""


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def weighted(tmp_path: Path) -> Path:
    path = tmp_path / "m.rx"
    path.write_text(WEIGHTED)
    return path


# --- check validates the weights ------------------------------------------------------------


def test_check_fails_when_the_weights_are_missing(weighted: Path) -> None:
    result = invoke("check", weighted)
    assert result.exit_code == 1
    assert "ok" not in result.stdout
    assert f"{weighted}:2:3: error: weight 'dense.weight' is not in the weights" in result.stderr
    assert "use --params" in result.stderr
    build = invoke("build", weighted, "-o", weighted.with_suffix(".rxb"))
    assert build.exit_code == 1  # check and build agree


def test_check_fails_on_a_weight_of_the_wrong_shape(weighted: Path) -> None:
    weighted.with_suffix(".npz").write_bytes(
        npz_bytes({"dense.weight": np.zeros((3, 2), np.float32)})
    )
    result = invoke("check", weighted)
    assert result.exit_code == 1
    assert "has shape (3, 2)" in result.stderr


def test_check_reads_the_data_through(weighted: Path) -> None:
    """A damaged member (its CRC no longer matches) fails check as it would fail build."""
    arr = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    data = bytearray(npz_bytes({"dense.weight": arr}))
    raw = arr.tobytes()
    at = bytes(data).find(raw)
    if at < 0:  # deflated: damage the middle of the archive's first member instead
        at = 80
    data[at + 4] ^= 0xFF
    weighted.with_suffix(".npz").write_bytes(bytes(data))
    result = invoke("check", weighted)
    assert result.exit_code == 1, result.output
    assert "error:" in result.stderr and "Traceback" not in result.stderr


def test_check_ok_names_the_weights(weighted: Path) -> None:
    weighted.with_suffix(".npz").write_bytes(
        npz_bytes({"dense.weight": np.ones((2, 3), np.float32)})
    )
    result = invoke("check", weighted)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"{weighted}: ok (1 function(s), 2 statement(s), weights "
        f"{weighted.with_suffix('.npz')}: 1 of 1 array(s) used)\n"
    )


# --- an empty program -------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n"])
@pytest.mark.parametrize("command", ["check", "build", "report", "passes", "run"])
def test_a_program_with_no_functions_is_an_error(tmp_path: Path, text: str, command: str) -> None:
    path = tmp_path / "empty.rx"
    path.write_text(text)
    result = invoke(command, path)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {path} defines no functions: a program needs at least fn @main (see docs/ir.md)\n"
    )
    assert not path.with_suffix(".rxb").exists()


def test_build_needs_main(tmp_path: Path) -> None:
    path = tmp_path / "lib.rx"
    path.write_text(
        "fn @f(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {\n  %y = relu(%x)\n  return %y\n}\n"
    )
    result = invoke("build", path)
    assert result.exit_code == 1
    assert "has no function @main to compile (functions: @f)" in result.stderr
    assert not path.with_suffix(".rxb").exists()


# --- -q: nothing but errors -------------------------------------------------------------------


def test_quiet_prints_nothing_on_success(tmp_path: Path) -> None:
    mlp = SAMPLES / "mlp.rx"
    for args in (
        ("build", mlp, "-o", tmp_path / "m.rxb", "-q"),
        ("build", mlp, "-t", "ir", "-o", tmp_path / "m.lowered.rx", "-q"),
        ("build", mlp, "-t", "c", "-o", tmp_path / "c", "-q"),
        ("check", mlp, "-q"),
        ("report", mlp, "-q"),
        ("run", mlp, "-q", "--check", "-o", tmp_path / "out.npz"),
        ("run", tmp_path / "m.rxb", "-q"),
    ):
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.output)
        assert result.stdout == "" and result.stderr == "", args
    assert (tmp_path / "m.rxb").exists() and (tmp_path / "c" / "mlp.c").exists()


def test_quiet_passes_dumps_to_a_folder(tmp_path: Path) -> None:
    mlp = SAMPLES / "mlp.rx"
    result = invoke("passes", mlp, "--dump-after", "all", "--dump-dir", tmp_path / "d", "-q")
    assert result.exit_code == 0 and result.output == ""
    assert len(list((tmp_path / "d").iterdir())) == 7


def test_disasm_of_a_program_points_to_build(tmp_path: Path) -> None:
    result = invoke("disasm", SAMPLES / "mlp.rx")
    assert result.exit_code == 1
    assert "is not a relaxc bytecode file but a program: relaxc build" in result.stderr


def test_quiet_fmt(tmp_path: Path) -> None:
    path = tmp_path / "u.rx"
    path.write_text("fn @main(%x:Tensor[(4,),f32])->Tensor[(4,),f32]{\n%y=relu(%x)\nreturn %y\n}\n")
    result = invoke("fmt", path, "-q")
    assert result.exit_code == 0 and result.output == ""
    assert "%y = relu(%x)" in path.read_text()


def test_quiet_still_prints_errors_and_what_was_asked_for(tmp_path: Path) -> None:
    mlp = SAMPLES / "mlp.rx"
    over = invoke("build", mlp, "-t", "ir", "-o", tmp_path / "x.rx", "-q", "--max-arena", "1KiB")
    assert over.exit_code == 1 and over.stderr.startswith("error: memory budget exceeded")
    assert not (tmp_path / "x.rx").exists()
    json_out = invoke("report", mlp, "-q", "--json")
    assert json_out.exit_code == 0 and json_out.stdout.startswith("{")
    ir = invoke("build", mlp, "-t", "ir", "-o", "-", "-q")
    assert ir.exit_code == 0 and ir.stdout.startswith("fn @main") and ir.stderr == ""


def test_every_quiet_option_has_the_same_help() -> None:
    from relaxc.cli.options import QUIET_HELP

    for command in ("build", "check", "fmt", "import", "passes", "report", "run"):
        params = {p.name: p for p in cli.commands[command].params}
        assert params["quiet"].help == QUIET_HELP, command


# --- a closed stdout and Ctrl-C: real processes ----------------------------------------------

ENTRY = [
    sys.executable,
    "-c",
    "import sys; from relaxc.cli.entry import main; sys.argv[0] = 'relaxc'; main()",
]


def _with_stdout_closed(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run relaxc with the reading end of its stdout closed before it writes anything, so
    that its first write fails: (status, stderr)."""
    proc = subprocess.Popen(
        [*ENTRY, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


def test_a_closed_stdout_ends_quietly_with_0_in_every_command(tmp_path: Path) -> None:
    """``relaxc passes m.rx --dump-after all | head -1`` exited 141 where every command whose
    output fits in the pipe exited 0 (it never saw the reader leave): the status depended
    on timing. Now a closed stdout is a normal end in every command: no message, exit 0."""
    built = subprocess.run(
        [*ENTRY, "build", str(SAMPLES / "cnn.rx"), "-o", "cnn.rxb", "-q"], cwd=tmp_path
    )
    assert built.returncode == 0
    for args in (
        ["passes", str(SAMPLES / "transformer.rx"), "--dump-after", "all"],
        ["passes"],  # the rich table of the passes
        ["report", str(SAMPLES / "cnn.rx")],
        ["report", str(SAMPLES / "cnn.rx"), "--json"],
        ["check", str(SAMPLES / "cnn.rx")],
        ["fmt", "--stdout", str(SAMPLES / "cnn.rx")],
        ["disasm", "cnn.rxb"],
        ["run", "cnn.rxb"],
        ["build", str(SAMPLES / "cnn.rx"), "-t", "ir", "-o", "-", "-q"],
        ["--help"],  # written by click itself, outside any command
        ["--version"],
        ["import", "--help"],
    ):
        status, err = _with_stdout_closed(args, tmp_path)
        assert (status, err) == (0, ""), args


def test_a_command_that_failed_keeps_its_status_when_stdout_is_closed(tmp_path: Path) -> None:
    """A closed stdout is no excuse for hiding an error: the error is printed on stderr and
    the status stays 1."""
    bad = tmp_path / "bad.rx"
    bad.write_text("fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  return %y\n}\n")
    for command in ("report", "check", "passes"):
        status, err = _with_stdout_closed([command, str(bad)], tmp_path)
        assert status == 1, (command, err)
        assert err.startswith(f"{bad}:2:10: error:"), (command, err)


def test_head_in_a_real_shell_pipeline(tmp_path: Path) -> None:
    for command in (f"passes {SAMPLES / 'transformer.rx'} --dump-after all", "--help"):
        script = (
            f'{" ".join(ENTRY[:2])} "{ENTRY[2]}" {command} | head -1; '
            'echo "status ${PIPESTATUS[0]}"'
        )
        out = subprocess.run(
            ["bash", "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        lines = out.stdout.splitlines()
        assert len(lines) == 2, out
        assert lines[-1] == "status 0", out  # whether or not relaxc wrote all before head left
        assert out.stderr == "", out


SIGINT_DURING_IMPORT = textwrap.dedent(
    """
    import os, signal, sys

    class Interrupt:
        def find_spec(self, name, path=None, target=None):
            if name == "relaxc.cli.main":  # relaxc's start-up: the commands, numpy, rich
                os.kill(os.getpid(), signal.SIGINT)
            return None

    sys.meta_path.insert(0, Interrupt())
    from relaxc.cli.entry import main
    sys.argv = ["relaxc", *sys.argv[1:]]
    main()
    """
)


def _default_sigint() -> None:
    """In the child: SIGINT as a terminal gives it, whatever the parent did with it (a
    parent that ignores SIGINT, as GNU time does, makes its children ignore it too)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_start_up_exits_130_without_a_traceback(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SIGINT_DURING_IMPORT, "check", str(SAMPLES / "mlp.rx")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        preexec_fn=_default_sigint,
    )
    assert out.returncode == 130, out.stderr
    assert out.stderr == "relaxc: interrupted\n"
    assert out.stdout == ""


def test_ctrl_c_while_a_command_runs_exits_130(tmp_path: Path) -> None:
    """relaxc check reads a FIFO nobody writes to: it waits until SIGINT arrives (during
    start-up or during the read, both must end the same way)."""
    fifo = tmp_path / "never.rx"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [*ENTRY, "check", str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        preexec_fn=_default_sigint,
    )
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.decode() == "relaxc: interrupted\n"


def test_debug_shows_the_traceback_of_an_interrupt(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SIGINT_DURING_IMPORT, "--debug", "check", "x.rx"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        preexec_fn=_default_sigint,
    )
    assert out.returncode == 130
    assert "Traceback" in out.stderr and out.stderr.endswith("relaxc: interrupted\n")


def test_the_console_script_is_the_entry_module() -> None:
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "relaxc"]
    assert ep.value == "relaxc.cli.entry:main"

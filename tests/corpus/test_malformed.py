"""Malformed .rx inputs, checked through the real CLI.

Every file in ``malformed/`` starts with a header that states what ``relaxc check`` must say:

    # expect: LINE:COL: a substring of the message
    # xfail: why relaxc does not do this yet        (optional; a known bug, strict xfail)

Any other comment line (``# regression: ...``) is a note about a bug the case once caught.

For each file the test asserts exit status 1, a first line ``<path>:LINE:COL: error: ...``
holding the substring, then the source line and a caret under column COL, and no Python
traceback. Inputs that cannot be written as a corpus file (binary data, a missing path, a
folder) are made by the tests below.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tracemalloc
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from relaxc.cli.main import cli

CORPUS = Path(__file__).resolve().parent / "malformed"
HEADER = re.compile(r"^# expect: (\d+):(\d+): (.+)$")
XFAIL = re.compile(r"^# xfail: (.+)$")


@dataclass(frozen=True)
class Case:
    path: Path
    line: int
    col: int
    message: str
    xfail: str | None

    @property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")


def load_case(path: Path) -> Case:
    lines = path.read_text(encoding="utf-8").split("\n")
    m = HEADER.match(lines[0])
    if m is None:
        raise ValueError(f"{path.name}: first line must be '# expect: LINE:COL: message'")
    x = XFAIL.match(lines[1]) if len(lines) > 1 else None
    return Case(path, int(m.group(1)), int(m.group(2)), m.group(3), x.group(1) if x else None)


CASES = [load_case(p) for p in sorted(CORPUS.glob("*.rx"))]


def case_params(cases: list[Case]) -> list:
    out = []
    for c in cases:
        marks = [pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else []
        out.append(pytest.param(c, id=c.path.stem, marks=marks))
    return out


def by_name(*names: str) -> list[Case]:
    table = {c.path.stem: c for c in CASES}
    return [table[n] for n in names]


# ---------------------------------------------------------------------------------------
# Helpers


def invoke(*args: str):
    """Run the CLI in-process; real exceptions propagate (a crash is never an exit code)."""
    runner = CliRunner()
    return runner.invoke(
        cli,
        [str(a) for a in args],
        env={"RELAXC_DEBUG": None},
        prog_name="relaxc",
        catch_exceptions=False,
    )


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RELAXC_DEBUG"}
    env.update(extra)
    return env


def run_module(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "relaxc.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        env=env or clean_env(),
        timeout=120,
    )


def assert_rendered(case: Case, stderr: str) -> None:
    """The error is ``path:L:C: error: msg``, then the source line, then a caret at C."""
    assert "Traceback" not in stderr, stderr
    assert "internal error" not in stderr, stderr
    lines = stderr.split("\n")
    prefix = f"{case.path}:{case.line}:{case.col}: error: "
    assert lines[0].startswith(prefix), f"expected {prefix!r}..., got:\n{stderr}"
    assert case.message in lines[0], f"expected {case.message!r} in:\n{stderr}"
    source = case.text.split("\n")[case.line - 1].replace("\t", " ")
    source = "".join(
        "\ufffd" if unicodedata.category(c) in ("Cc", "Cf") else c for c in source
    )  # shown as U+FFFD
    assert len(lines) >= 3, stderr
    assert lines[1] == "  " + source, f"source line should be {source!r}, got:\n{stderr}"
    caret = re.fullmatch(r"  ( *)(\^+)", lines[2])
    assert caret is not None, f"no caret line in:\n{stderr}"
    assert len(caret.group(1)) == case.col - 1, f"caret not under column {case.col}:\n{stderr}"


# ---------------------------------------------------------------------------------------
# The corpus


def test_corpus_is_complete() -> None:
    files = sorted(CORPUS.glob("*.rx"))
    assert len(files) >= 45
    assert len(CASES) == len(files)  # every file has a valid header (load_case raises otherwise)
    for c in CASES:
        assert c.line >= 1 and c.col >= 1, c.path.name
        assert c.message.strip(), c.path.name


@pytest.mark.parametrize("case", case_params(CASES))
def test_check_reports_the_error(case: Case) -> None:
    result = invoke("check", case.path)
    assert result.exit_code == 1, result.output
    assert result.stdout == "", "nothing is reported as ok"
    assert_rendered(case, result.stderr)


SUBPROCESS_CASES = (
    "unknown_op_did_you_mean",
    "syntax_bad_character",
    "shape_mismatch_add",
    "syntax_missing_paren",
)


@pytest.mark.parametrize("case", case_params(by_name(*SUBPROCESS_CASES)))
def test_check_end_to_end_subprocess(case: Case) -> None:
    proc = run_module("check", case.path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert_rendered(case, proc.stderr)


def _console_script() -> str | None:
    beside = Path(sys.executable).with_name("relaxc")
    if beside.exists():
        return str(beside)
    return shutil.which("relaxc")


def test_console_script_exit_codes(tmp_path: Path) -> None:
    exe = _console_script()
    if exe is None:
        pytest.skip("the relaxc console script is not installed")
    case = by_name("undefined_name")[0]
    bad = subprocess.run(
        [exe, "check", str(case.path)], capture_output=True, text=True, env=clean_env(), timeout=120
    )
    assert bad.returncode == 1
    assert_rendered(case, bad.stderr)
    good = tmp_path / "ok.rx"
    good.write_text("fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  return %x\n}\n")
    ok = subprocess.run(
        [exe, "check", str(good)], capture_output=True, text=True, env=clean_env(), timeout=120
    )
    assert ok.returncode == 0, ok.stderr
    assert "ok" in ok.stdout
    usage = subprocess.run(
        [exe, "check"], capture_output=True, text=True, env=clean_env(), timeout=120
    )
    assert usage.returncode == 2
    assert "Missing argument" in usage.stderr


@pytest.mark.parametrize(
    "case", case_params(by_name("unknown_op_did_you_mean", "syntax_missing_paren"))
)
def test_debug_shows_a_traceback(case: Case) -> None:
    result = CliRunner().invoke(
        cli,
        ["--debug", "check", str(case.path)],
        env={"RELAXC_DEBUG": None},
        prog_name="relaxc",
        catch_exceptions=False,
    )
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "RxError" in result.stderr
    # The rendered error still follows the traceback.
    assert f"{case.path}:{case.line}:{case.col}: error: " in result.stderr


def test_debug_from_environment_subprocess() -> None:
    case = by_name("redefined_name")[0]
    proc = run_module("check", case.path, env=clean_env(RELAXC_DEBUG="1"))
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr
    assert f"{case.path}:{case.line}:{case.col}: error: " in proc.stderr


def test_check_reports_each_file(tmp_path: Path) -> None:
    good = tmp_path / "good.rx"
    good.write_text("fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  return %x\n}\n")
    a, b = by_name("unknown_op_did_you_mean", "redefined_name")
    result = invoke("check", a.path, good, b.path)
    assert result.exit_code == 1
    assert f"{good}: ok" in result.stdout
    assert f"{a.path}:{a.line}:{a.col}: error: " in result.stderr
    assert f"{b.path}:{b.line}:{b.col}: error: " in result.stderr


# ---------------------------------------------------------------------------------------
# Inputs that are not .rx text at all


def test_an_empty_file_is_an_error_everywhere(tmp_path: Path) -> None:
    """Issue 18: an empty program used to check ``ok`` and build into an empty .rxb."""
    for name, text in (
        ("empty.rx", ""),
        ("comment.rx", "# nothing here\n"),
        ("blank.rx", "\n \n\t\n"),
    ):
        path = tmp_path / name
        path.write_text(text)
        for command in ("check", "run", "build"):
            result = invoke(command, path)
            assert result.exit_code == 1, (command, result.output)
            assert "defines no functions" in result.stderr
            assert "Traceback" not in result.output
        assert not path.with_suffix(".rxb").exists()


@pytest.mark.parametrize("command", ["check", "fmt", "run"])
def test_binary_garbage_is_refused(tmp_path: Path, command: str) -> None:
    path = tmp_path / "garbage.rx"
    data = b"fn @main\x00\x01\x02\xff\xfe\x89PNG\r\n\x1a\n" + bytes(range(256))
    path.write_bytes(data)
    result = invoke(command, path)
    assert result.exit_code == 1, result.output
    assert str(path) in result.stderr
    assert "binary" in result.stderr
    assert "Traceback" not in result.output
    assert path.read_bytes() == data


@pytest.mark.parametrize("command", ["check", "fmt", "run"])
def test_non_utf8_is_refused(tmp_path: Path, command: str) -> None:
    path = tmp_path / "latin1.rx"
    data = (
        "fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  return %x  # café\n}\n".encode(
            "latin-1"
        )
    )
    path.write_bytes(data)
    result = invoke(command, path)
    assert result.exit_code == 1, result.output
    assert str(path) in result.stderr
    assert "UTF-8" in result.stderr
    assert "Traceback" not in result.output
    assert path.read_bytes() == data


def test_non_utf8_error_has_a_location(tmp_path: Path) -> None:
    path = tmp_path / "latin1.rx"
    path.write_bytes(
        "fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  return "
        "%x  # caf\xe9\n}\n".encode("latin-1")
    )
    result = invoke("check", path)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:2:19: error: ")


def test_utf8_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "bom.rx"
    path.write_bytes(
        b"\xef\xbb\xbffn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  return %x\n}\n"
    )
    result = invoke("check", path)
    # Either accept the file (as Python and most compilers do) or name the BOM plainly.
    assert (
        result.exit_code == 0
        or "byte order mark" in result.stderr.lower()
        or "BOM" in result.stderr
    )
    assert "character character" not in result.stderr


@pytest.mark.parametrize("command", ["check", "fmt", "run"])
def test_nonexistent_path(tmp_path: Path, command: str) -> None:
    path = tmp_path / "no_such_model.rx"
    result = invoke(command, path)
    assert result.exit_code == 1, result.output
    assert str(path) in result.stderr
    assert "does not exist" in result.stderr
    assert "Traceback" not in result.output
    assert not path.exists()


@pytest.mark.parametrize("command", ["check", "fmt", "run"])
def test_directory_path(tmp_path: Path, command: str) -> None:
    folder = tmp_path / "model.rx"
    folder.mkdir()
    result = invoke(command, folder)
    assert result.exit_code == 1, result.output
    assert str(folder) in result.stderr
    assert "directory" in result.stderr
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------------------------
# Sizes: errors, never allocations


@pytest.mark.parametrize("name", ["huge_dim", "huge_dim_in_body"])
def test_huge_dims_never_allocate(name: str) -> None:
    case = by_name(name)[0]
    tracemalloc.start()
    try:
        result = invoke("run", case.path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.exit_code == 1, result.output
    assert "limit" in result.stderr
    assert "Traceback" not in result.output
    assert peak < 64 << 20, f"run allocated {peak:,} bytes for a program it refuses"


def test_huge_bound_is_refused_before_running() -> None:
    case = by_name("huge_dim_from_bound")[0]
    tracemalloc.start()
    try:
        result = invoke("run", case.path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.exit_code == 1, result.output
    assert "limit" in result.stderr
    assert peak < 64 << 20


def test_very_long_integer_literal(tmp_path: Path) -> None:
    path = tmp_path / "long.rx"
    path.write_text(
        "fn @main(%x: Tensor[(" + "9" * 5000 + ",), f32]) -> Tensor[(2,), f32] {\n  return %x\n}\n"
    )
    result = invoke("check", path)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:1:")
    assert "integer literal of 5000 digits is too long" in result.stderr
    assert "internal error" not in result.stderr


def test_long_dimension_expression(tmp_path: Path) -> None:
    path = tmp_path / "deep.rx"
    expr = " + ".join(["n"] * 1500)
    path.write_text(
        "fn @main(%x: Tensor[(n,), f32]) -> Tensor[(n,), f32] {\n"
        f'  %w: Tensor[({expr},), f32] = const("w")\n'
        "  return %x\n}\n"
    )
    result = invoke("check", path)
    # Accept it, or refuse it as too deep naming the file (check takes many files); never crash.
    assert result.exit_code in (0, 1), result.output
    assert "internal error" not in result.stderr
    if result.exit_code == 1:
        assert str(path) in result.stderr

"""Running relaxc on hostile inputs and judging how it failed.

The contract checked everywhere (see docs/guarantees.md):

* the exit status is 0 (the input was fine after all), 1 (an error in the input) or 2 (a
  usage error) — never 3 (an internal error) and never a Python traceback;
* no command runs for ever: :func:`invoke` raises :class:`Hang` after a deadline;
* an error about IR text is ``FILE:LINE:COL: error: ...`` followed by that source line and
  a caret under the column; an error about a file or an option is a plain sentence
  (``error: ...``), one per failing file;
* outputs are complete or absent: :func:`snapshot` a folder before a command and compare
  after (a failed command leaves it exactly as it was; an existing output is untouched).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from click.testing import CliRunner

from relaxc.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
SAMPLE_STEMS = ("relay_memory", "mlp", "transformer", "cnn")
PYTHON_MODULE = (sys.executable, "-m", "relaxc.cli.main")


class Hang(Exception):
    """A command that did not finish within its deadline."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in the body after ``seconds`` (SIGALRM: the main thread only)."""

    def expired(signum, frame):  # noqa: ANN001
        raise Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Outcome:
    """What one command did: exit status, stdout, stderr (and the arguments, for messages)."""

    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str
    crash: str | None = None  # an exception that escaped the CLI (in-process only)

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def __str__(self) -> str:
        head = f"relaxc {' '.join(self.args)}"
        if len(head) > 300:
            head = head[:300] + "..."
        body = self.crash or (self.stderr[-1500:] if self.stderr else self.stdout[-500:])
        return f"{head}\n  -> exit {self.code}\n{body}"


def invoke(*args: object, timeout: float = 30, input: str | bytes | None = None) -> Outcome:
    """Run the CLI in-process (click's CliRunner). An exception escaping it is recorded as a
    crash, exit status -1; a run past ``timeout`` seconds is recorded as a hang."""
    argv = tuple(str(a) for a in args)
    runner = CliRunner()
    try:
        with deadline(timeout):
            r = runner.invoke(
                cli,
                list(argv),
                input=input,
                env={"RELAXC_DEBUG": None},
                prog_name="relaxc",
                catch_exceptions=False,
            )
    except Hang as e:
        return Outcome(argv, -1, "", "", crash=f"HANG: {e}")
    except BaseException as e:  # noqa: BLE001 - a crash is what we look for
        if isinstance(e, KeyboardInterrupt):
            raise
        return Outcome(argv, -1, "", "", crash=f"CRASH: {type(e).__name__}: {e}")
    return Outcome(argv, r.exit_code, r.stdout, r.stderr)


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RELAXC_DEBUG"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_subprocesses(
    commands: Sequence[Sequence[object]],
    timeout: float = 120,
    jobs: int = 4,
    cwd: Path | None = None,
) -> list[Outcome]:
    """Run ``python -m relaxc.cli.main ARGS`` for each command, ``jobs`` at a time; a command
    past ``timeout`` seconds is killed and recorded as a hang (exit -1)."""
    results: list[Outcome | None] = [None] * len(commands)
    pending = list(enumerate(commands))
    while pending:
        batch, pending = pending[:jobs], pending[jobs:]
        procs = []
        for i, args in batch:
            argv = tuple(str(a) for a in args)
            p = subprocess.Popen(
                [*PYTHON_MODULE, *argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env=clean_env(),
                cwd=cwd,
            )
            procs.append((i, argv, p))
        for i, argv, p in procs:
            try:
                out, err = p.communicate(timeout=timeout)
                results[i] = Outcome(
                    argv,
                    p.returncode,
                    out.decode("utf-8", "replace"),
                    err.decode("utf-8", "replace"),
                )
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                results[i] = Outcome(argv, -1, "", "", crash=f"HANG: killed after {timeout} s")
    return [r for r in results if r is not None]


# ---------------------------------------------------------------------------------------
# Judging an outcome


def crash_problems(o: Outcome, codes: tuple[int, ...] = (0, 1)) -> list[str]:
    """What is wrong with ``o`` as a clean ending: an exit status outside ``codes``, a crash,
    a hang, a traceback, an internal error, or a failure without a word on stderr."""
    out = []
    if o.crash:
        out.append(o.crash)
    elif o.code not in codes:
        out.append(f"exit status {o.code}, expected one of {codes}")
    if "Traceback (most recent call last)" in o.output:
        out.append("a Python traceback")
    if "internal error" in o.stderr:
        out.append("an internal error")
    if not o.crash and o.code != 0 and not o.stderr.strip():
        out.append("a failure with nothing on stderr")
    return out


_LONE_CR = re.compile("\r(?!\n)")
_CARET = re.compile(r"  ( *)(\^+)$")


def _shown(c: str) -> str:
    if c == "\t":
        return " "
    return "\ufffd" if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c


def source_lines(text: str) -> list[str]:
    """The lines of ``text`` as relaxc shows them: ``\\n``, ``\\r\\n`` and a lone ``\\r`` end a
    line, a leading byte-order mark is not content, a tab is shown as one space and a
    control or invisible formatting character as U+FFFD."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return [
        "".join(map(_shown, line.rstrip("\r"))) for line in _LONE_CR.sub("\n", text).split("\n")
    ]


def error_problems(stderr: str, path: Path | str, text: str | None) -> list[str]:
    """What is wrong with the first error of ``stderr`` about file ``path`` (holding ``text``,
    or None if it is not text): ``path:L:C: error: msg`` + the source line + a caret under C,
    or a plain sentence ``error: msg`` / ``path: error: msg``."""
    lines = stderr.split("\n")
    first = lines[0]
    m = re.match(re.escape(str(path)) + r":(\d+):(\d+): error: \S", first)
    if m is None:
        if re.match(r"(" + re.escape(str(path)) + r": )?error: \S", first):
            return []
        return [
            f"the first line is neither 'FILE:L:C: error: ...' nor 'error: ...': {first[:200]!r}"
        ]
    line, col = int(m.group(1)), int(m.group(2))
    if text is None:
        # a located error about bytes that are not text (e.g. not UTF-8): no source to compare
        return []
    src = source_lines(text)
    if not 1 <= line <= len(src):
        return [f"line {line} is not in the file ({len(src)} lines)"]
    if not 1 <= col <= len(src[line - 1]) + 1:
        return [f"column {col} is not on line {line} ({len(src[line - 1])} characters)"]
    if len(lines) < 3:
        return ["no source line and caret under the error"]
    if lines[1] != "  " + src[line - 1]:
        return [
            f"the line under the error is {lines[1][:120]!r}, not the source line "
            f"{src[line - 1][:120]!r}"
        ]
    caret = _CARET.match(lines[2])
    if caret is None:
        return [f"no caret line: {lines[2][:120]!r}"]
    if len(caret.group(1)) != col - 1:
        return [f"the caret is at column {len(caret.group(1)) + 1}, not {col}"]
    return []


def check_problems(o: Outcome, path: Path, text: str | None) -> list[str]:
    """``relaxc check PATH``: a clean success ('PATH: ok') or one well-formed error."""
    out = crash_problems(o)
    if out:
        return out
    if o.code == 0:
        return (
            []
            if o.stdout.startswith(f"{path}: ok")
            else [f"exit 0 without 'ok': {o.stdout[:200]!r}"]
        )
    if o.stdout:
        out.append(f"a failed check printed on stdout: {o.stdout[:200]!r}")
    return out + error_problems(o.stderr, path, text)


def report(failures: list[str], what: str) -> None:
    """Fail with every problem found, not just the first."""
    if failures:
        shown = "\n\n".join(failures[:25])
        more = f"\n\n... and {len(failures) - 25} more" if len(failures) > 25 else ""
        raise AssertionError(f"{len(failures)} {what} ended badly:\n\n{shown}{more}")


# ---------------------------------------------------------------------------------------
# Outputs: complete or absent


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: relative path → 'dir', or the SHA-256 and mode of a file."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() + f":{p.stat().st_mode & 0o777:o}"
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    """Entries added, removed or modified."""
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def leftovers(folder: Path) -> list[str]:
    """Temporary files an atomic writer might leave behind."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name.endswith(".tmp"))

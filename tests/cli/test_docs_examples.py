"""Every guide's examples run: the ``$ relaxc ...`` lines of the code blocks in docs/*.md are
run in order, per guide, in a folder holding a copy of samples/ (and the model-zoo networks
of :data:`ZOO_IN_DOCS`), and checked against what
the guide shows.

* The exit status: the value a following ``$ echo $?`` shows; else non-zero when the shown
  output has an ``error:`` (``FILE:LINE:COL: error:``) or ``Usage:`` line, and 0 otherwise
  (a pipeline's is 0, that of its ``head`` or ``tail``).
* The output: the lines shown under a command (stdout and stderr together, in any order of
  the two streams, leading and trailing spaces ignored) must be exactly the lines it
  prints; ``| head -N``, ``| tail -N`` and ``> FILE`` apply to stdout as in a shell,
  ``a && b`` runs b if a succeeded, ``$ cat FILE`` and ``$ ls DIR`` (one name a line) are
  understood.

A block preceded by ``<!-- example: file NAME -->`` is the text of a file the later
examples use (written into the folder when the guide reaches it). A block preceded by
``<!-- example: skip (reason) -->`` is not run (it needs a C compiler,
a model that is not in samples/, ...); ``<!-- example: status-only (reason) -->`` runs it
but checks only the exit status (timings). The commands run in this process through
click's CliRunner at 80 columns, so the whole set takes seconds, not a process per line.
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from relaxc.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
GUIDES = sorted(p.name for p in DOCS.glob("*.md"))
MARKER = re.compile(r"<!--\s*example:\s*(skip|status-only|file)\b\s*([^\s>]*)[^>]*-->")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)


ZOO_IN_DOCS = ("light_shufflenet.onnx", "light_squeezenet.onnx", "light_vgg19.onnx")
"""Networks of the ONNX model zoo (the onnx package ships them) that the guides use; they are
copied into the folder the examples run in."""


def zoo_folder() -> Path:
    onnx = pytest.importorskip("onnx")
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@dataclass
class Command:
    line: str  # without the "$ "
    shown: list[str] = field(default_factory=list)
    check_output: bool = True


@dataclass
class Block:
    where: str
    commands: list[Command]
    mode: str  # run, skip, status-only, file
    file: str = ""  # mode file: the name of the file the block's text is
    text: str = ""


def blocks(guide: str) -> list[Block]:
    text = (DOCS / guide).read_text()
    out = []
    for m in FENCE.finditer(text):
        body = m.group(1)
        before = text[: m.start()].rstrip().splitlines()
        marker = MARKER.search(before[-1]) if before else None
        mode = marker.group(1) if marker else "run"
        line_no = text.count("\n", 0, m.start()) + 1
        if mode == "file":
            out.append(Block(f"{guide}:{line_no}", [], mode, marker.group(2), body))
            continue
        if not any(line.startswith("$ ") for line in body.splitlines()):
            continue
        commands: list[Command] = []
        for line in body.splitlines():
            if line.startswith("$ "):
                commands.append(Command(line[2:], check_output=mode == "run"))
            elif commands:
                commands[-1].shown.append(line.rstrip())
        out.append(Block(f"{guide}:{line_no}", commands, mode))
    return out


def test_every_guide_has_runnable_examples() -> None:
    """The markers are the exception: most examples of the command guides run."""
    for guide in (
        "build.md",
        "check.md",
        "fmt.md",
        "import.md",
        "passes.md",
        "report.md",
        "run.md",
    ):
        assert any(b.mode != "skip" for b in blocks(guide)), guide


@dataclass
class Shell:
    """Runs the command lines of one guide in ``cwd``, remembering the last status."""

    cwd: Path
    status: int = 0

    def relaxc(self, argv: list[str]) -> tuple[int, str, str]:
        env = {"COLUMNS": "80", "RELAXC_DEBUG": None, "RELAXC_PROGRESS": "0"}
        result = CliRunner().invoke(cli, argv, env=env, catch_exceptions=False, prog_name="relaxc")
        return result.exit_code, result.stdout, result.stderr

    def run(self, line: str) -> tuple[int, list[str]]:
        lines: list[str] = []
        status = 0
        for part in line.split(" && "):
            status, out = self.one(part.strip())
            lines += out
            if status != 0:
                break
        self.status = status
        return status, lines

    def one(self, text: str) -> tuple[int, list[str]]:
        words = shlex.split(text, comments=True)
        pipe: list[str] = []
        if "|" in words:
            at = words.index("|")
            words, pipe = words[:at], words[at + 1 :]
        redirect = None
        if ">" in words:
            at = words.index(">")
            words, redirect = words[:at], words[at + 1]
        if words == ["echo", "$?"]:
            return 0, [str(self.status)]
        if words[0] == "cat":
            return 0, (self.cwd / words[1]).read_text().splitlines()
        if words[0] == "ls":
            return 0, sorted(p.name for p in (self.cwd / words[1]).iterdir())
        assert words[0] == "relaxc", f"cannot run {text!r} here: mark its block skip"
        status, out, err = self.relaxc(words[1:])
        out_lines = out.splitlines()
        if pipe:
            n = int(pipe[1].lstrip("-")) if len(pipe) > 1 else 10
            assert pipe[0] in ("head", "tail"), text
            out_lines = out_lines[:n] if pipe[0] == "head" else out_lines[-n:]
            status = 0  # a pipeline's status is that of head or tail
        if redirect is not None:
            if redirect != "/dev/null":
                (self.cwd / redirect).write_text(out)
            out_lines = []
        return status, out_lines + err.splitlines()


def expected_status(block: Block, i: int) -> int | None:
    """The status a following ``$ echo $?`` shows, else None (0 or "non-zero")."""
    nxt = block.commands[i + 1] if i + 1 < len(block.commands) else None
    if nxt is not None and nxt.line.strip() == "echo $?" and nxt.shown:
        return int(nxt.shown[0])
    return None


def normalized(lines: list[str]) -> list[str]:
    """The non-empty lines, stripped (a table's title is centred on a terminal, flush left in
    a pipe), in sorted order (stdout and stderr interleave differently in a shell)."""
    return sorted(line.strip() for line in lines if line.strip())


@pytest.mark.parametrize("guide", GUIDES)
def test_the_examples_of_a_guide_run(guide: str, tmp_path: Path, monkeypatch) -> None:
    found = blocks(guide)
    if not any(b.mode != "skip" for b in found):
        pytest.skip(f"{guide} has no runnable examples")
    shutil.copytree(REPO / "samples", tmp_path / "samples")
    for name in ZOO_IN_DOCS:
        shutil.copy(zoo_folder() / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    shell = Shell(tmp_path)
    for block in found:
        if block.mode == "file":
            (tmp_path / block.file).write_text(block.text)
        if block.mode in ("skip", "file"):
            continue
        for i, cmd in enumerate(block.commands):
            status, lines = shell.run(cmd.line)
            where = f"{block.where}: $ {cmd.line}"
            if cmd.line.strip() == "echo $?":
                continue
            want = expected_status(block, i)
            errors = any(re.search(r"(^|: )(error|Error):|^Usage:", s.strip()) for s in cmd.shown)
            if want is not None:
                assert status == want, (where, lines)
            elif errors and "|" not in shlex.split(cmd.line, comments=True):
                # a pipeline's status is its last command's (head's), as in a shell
                assert status != 0, (where, lines)
            else:
                assert status == 0, (where, lines)
            if cmd.check_output:
                assert normalized(lines) == normalized(cmd.shown), where

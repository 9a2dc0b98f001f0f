"""Every guide's examples run: the ``$ relaxc ...`` lines of the code blocks in docs/*.md are
run in order, per guide, in a folder holding a copy of samples/ (and the model-zoo networks
of :data:`ZOO_IN_DOCS`), and checked against what
the guide shows.

* The exit status: the value a following ``$ echo $?`` shows; else non-zero when the shown
  output has an ``error:`` (``FILE:LINE:COL: error:``) or ``Usage:`` line, and 0 otherwise
  (a pipeline's is 0, that of its ``head`` or ``tail``).
* The output: the lines shown under a command (stdout and stderr together, in any order of
  the two streams, leading and trailing spaces ignored) must be exactly the lines it
  prints, but for the statistics of a float output in a ``relaxc run`` outputs table (min,
  max, mean, first values: float results, whose last digits depend on the BLAS and its
  summation order): each number there may differ from the one shown by one unit in its
  last digit plus 1e-5 of the largest magnitude among them in its row
  (:data:`RTOL_OF_ROW`); the table is compared cell by cell, so a column a moved digit
  widens or a reflowed cell does not matter. Everything else (names, shapes, dtypes, an
  integer output's statistics, memory figures) must match exactly. ``| head -N``,
  ``| tail -N`` and ``> FILE`` apply to stdout as in a shell, ``a && b`` runs b if a
  succeeded, ``$ cat FILE`` and ``$ ls DIR`` (one name a line) are
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
from hypothesis import example, given
from hypothesis import strategies as st

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


NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")

RTOL_OF_ROW = 1e-5
"""How far a float output's statistic may be from the one shown, in units of the largest
magnitude among its row's statistics (besides one unit in the last digit shown): float32 results
summed in another order (another BLAS, another blocking) differ by a few roundings of the
magnitudes summed, not of the result (a mean near zero after cancellation moves most)."""


@dataclass
class OutputsTable:
    """A ``relaxc run`` outputs table, parsed: its header cells and its rows, each row's cells
    with the lines rich wrapped them onto joined."""

    header: list[str]
    rows: list[list[str]]


def split_outputs_tables(lines: list[str]) -> tuple[list[str], list[OutputsTable]]:
    """``lines`` without the outputs tables (a line ``outputs``, a header with ``┃``, a rule,
    rows with ``│``), and those tables parsed, in order. Parsed, a table's numbers can be
    compared as numbers: a last digit that moves can widen a column and reflow the table."""
    rest: list[str] = []
    tables: list[OutputsTable] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "outputs" and i + 2 < len(lines) and "┃" in lines[i + 1]:
            header = [c.strip() for c in lines[i + 1].split("┃")]
            rows: list[list[str]] = []
            i += 3  # title, header, rule
            while i < len(lines) and "│" in lines[i]:
                cells = [c.strip() for c in lines[i].split("│")]
                if cells[0] or not rows:
                    rows.append(cells)
                else:
                    rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells)]
                i += 1
            tables.append(OutputsTable(header, rows))
            continue
        rest.append(lines[i])
        i += 1
    return rest, tables


def last_digit_unit(shown: str) -> float:
    """One unit in the last digit of a number as written: ``0.1253`` -> 1e-4, ``6e-3`` ->
    1e-3."""
    mantissa, _, exponent = shown.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


EXACT_COLUMNS = ("name", "shape", "dtype")
"""The columns of an outputs table that are not computed: compared exactly."""


def cells_agree(printed: str, shown: str, scale: float) -> bool:
    """Two cells of a float output's statistics: the same text around the numbers, and each
    number within one unit of the shown one's last digit plus RTOL_OF_ROW times ``scale``
    (written ``0.1253``, ``6e-3`` or, %g of a large float, ``262145``)."""
    if NUMBER.sub("#", printed) != NUMBER.sub("#", shown):
        return False
    return all(
        abs(float(a) - float(b)) <= last_digit_unit(b) + RTOL_OF_ROW * scale
        for a, b in zip(NUMBER.findall(printed), NUMBER.findall(shown))
    )


def tables_agree(printed: OutputsTable, shown: OutputsTable) -> bool:
    """The same header and rows; the statistics of a float output (every column but
    :data:`EXACT_COLUMNS`) by :func:`cells_agree` with the largest magnitude among them as the
    scale, every other cell (an integer or bool output's statistics too) exactly."""
    if printed.header != shown.header or len(printed.rows) != len(shown.rows):
        return False
    dtype = shown.header.index("dtype") if "dtype" in shown.header else None
    for row, want in zip(printed.rows, shown.rows):
        if len(row) != len(want):
            return False
        computed = [
            i
            for i, column in enumerate(shown.header)
            if column not in EXACT_COLUMNS
            and dtype is not None
            and re.fullmatch(r"b?float\d+", want[dtype])
        ]
        scale = max((abs(float(n)) for i in computed for n in NUMBER.findall(want[i])), default=0.0)
        for i, (a, b) in enumerate(zip(row, want)):
            if not (cells_agree(a, b, scale) if i in computed else a == b):
                return False
    return True


def assert_output_is_shown(lines: list[str], shown: list[str], where: str) -> None:
    """What a command printed is what the guide shows: every line exactly, but for the
    numbers of an outputs table (:func:`cells_agree`)."""
    printed_rest, printed_tables = split_outputs_tables(lines)
    shown_rest, shown_tables = split_outputs_tables(shown)
    assert normalized(printed_rest) == normalized(shown_rest), where
    assert len(printed_tables) == len(shown_tables), (where, lines)
    for printed, want in zip(printed_tables, shown_tables):
        assert tables_agree(printed, want), (where, printed, want)


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
                assert_output_is_shown(lines, cmd.shown, where)


MLP_TABLE = """outputs
 name   ┃ shape   ┃ dtype   ┃        min ┃      max ┃ mean ┃ first values
━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━━━━━━━
 output │ (8, 10) │ float32 │ 0.00914641 │ 0.331597 │  0.1 │ 0.1253, 0.04201,
        │         │         │            │          │      │ 0.07364, 0.1421
        │         │         │            │          │      │ ...
wrote 1 output(s) to y.npz""".splitlines()


def agrees(printed: list[str], shown: list[str]) -> bool:
    try:
        assert_output_is_shown(printed, shown, "test")
    except AssertionError:
        return False
    return True


def test_a_last_digit_of_an_outputs_table_may_move() -> None:
    """The failure of issue 28: another BLAS prints 0.00914642; and a mean that no longer
    rounds to 0.1 widens its column and reflows the first values."""
    moved = [MLP_TABLE[0], MLP_TABLE[1], MLP_TABLE[2]] + [
        line.replace("0.00914641", "0.00914642") for line in MLP_TABLE[3:]
    ]
    assert agrees(moved, MLP_TABLE)
    reflowed = """outputs
 name   ┃ shape   ┃ dtype   ┃        min ┃      max ┃     mean ┃ first values
━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━
 output │ (8, 10) │ float32 │ 0.00914641 │ 0.331597 │ 0.100001 │ 0.1253,
        │         │         │            │          │          │ 0.04201, 0.07364,
        │         │         │            │          │          │ 0.1421 ...
wrote 1 output(s) to y.npz""".splitlines()
    assert agrees(reflowed, MLP_TABLE)


@pytest.mark.parametrize(
    "old, new",
    [
        ("0.00914641", "0.00954641"),  # 4e-4: more than 1e-5 of the row's 0.33
        ("0.331597", "0.331697"),
        ("0.1253,", "0.1255,"),
        ("(8, 10)", "(8, 11)"),  # shapes are exact
        ("float32", "float64"),
        ("output │", "outputs│"),
        ("to y.npz", "to z.npz"),  # outside the table, every character
    ],
)
def test_anything_else_that_moves_is_a_difference(old: str, new: str) -> None:
    changed = [line.replace(old, new, 1) for line in MLP_TABLE]
    assert changed != MLP_TABLE
    assert not agrees(changed, MLP_TABLE)


def test_an_integer_output_is_compared_exactly() -> None:
    ints = [line.replace("float32", "int32  ") for line in MLP_TABLE]
    assert agrees(ints, ints)
    assert not agrees([line.replace("0.1253", "0.1254") for line in ints], ints)
    assert agrees([line.replace("0.1253", "0.1254") for line in MLP_TABLE], MLP_TABLE)


def test_a_missing_row_or_table_is_a_difference() -> None:
    assert not agrees(MLP_TABLE[:3] + MLP_TABLE[6:], MLP_TABLE)
    assert not agrees(MLP_TABLE[-1:], MLP_TABLE)


@given(st.floats(-(2.0**127), 2.0**127, width=32).filter(lambda x: abs(x) > 1e-37))
@example(0.00914641)
def test_one_float32_rounding_is_within_the_tolerance(x: float) -> None:
    """A (normal, not the largest) float32 statistic one rounding away (another summation
    order), printed as the outputs table prints it (6 significant digits), agrees with the
    one shown."""
    import numpy as np

    y = float(np.nextafter(np.float32(x), np.float32(np.inf)))
    a, b = f"{x:.6g}", f"{y:.6g}"
    assert cells_agree(a, b, abs(x))
    assert cells_agree(b, a, abs(y))

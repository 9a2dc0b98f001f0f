"""benchmarks/minimalloc_peer.py: MiniMalloc's answers are read back and checked by
relaxc's independent plan checker, never taken on trust. A stand-in binary (a Python
script speaking MiniMalloc's command line and CSV) gives each kind of answer."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from minimalloc_peer import solve, usable  # noqa: E402

from relaxc.passes.planning.model import Buffer  # noqa: E402

FAKE = """#!{python}
import csv, os, sys
args = dict((a[2:] + "=").split("=")[:2] for a in sys.argv[1:])
mode = os.environ["FAKE_MINIMALLOC"]
if ("minimize_capacity" in args) != (os.environ.get("FAKE_MINIMIZE") == "1"):
    sys.stderr.write("unexpected flags\\n"); sys.exit(3)
if mode == "notfound":
    sys.stderr.write("NOT_FOUND: no solution\\n"); sys.exit(1)
if mode == "deadline":
    sys.stderr.write("DEADLINE_EXCEEDED\\n"); sys.exit(1)
rows = list(csv.DictReader(open(args["input"])))
with open(args["output"], "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(list(rows[0]) + ["offset"])
    top = 0
    for r in rows:
        # stacked: valid; "overlap": everything at 0
        w.writerow(list(r.values()) + [0 if mode == "overlap" else top])
        top += int(r["size"])
"""


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    path = tmp_path / "minimalloc"
    path.write_text(FAKE.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


BUFFERS = [Buffer(0, 2, 64, 64), Buffer(1, 3, 128, 64), Buffer(3, 4, 64, 64)]


@pytest.mark.parametrize(
    "mode, status, height",
    [
        ("stack", "found", 256),
        ("overlap", "invalid", 128),
        ("notfound", "infeasible", None),
        ("deadline", "timeout", None),
    ],
)
def test_each_answer_is_read_and_checked(
    fake: Path, monkeypatch: pytest.MonkeyPatch, mode: str, status: str, height: int | None
) -> None:
    monkeypatch.setenv("FAKE_MINIMALLOC", mode)
    run = solve(fake, BUFFERS, 1024, timeout=5)
    assert (run.status, run.height) == (status, height)
    assert run.seconds >= 0


def test_a_plan_over_the_capacity_is_invalid(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MINIMALLOC", "stack")
    assert solve(fake, BUFFERS, 200, timeout=5).status == "invalid"  # stacked: 256 bytes


def test_an_unusable_binary_is_named(tmp_path: Path) -> None:
    assert usable(tmp_path / "missing") == f"{tmp_path / 'missing'} is not a file"
    plain = tmp_path / "plain"
    plain.write_text("")
    os.chmod(plain, 0o644)
    assert usable(plain) == f"{plain} is not executable"


def test_minimizing_asks_for_minimize_capacity(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MINIMALLOC", "stack")
    monkeypatch.setenv("FAKE_MINIMIZE", "1")
    assert solve(fake, BUFFERS, 1024, timeout=5, minimize=True).status == "found"
    monkeypatch.setenv("FAKE_MINIMALLOC", "notfound")  # minimizing: nothing found, no proof
    assert solve(fake, BUFFERS, 1024, timeout=5, minimize=True).status == "none"
    assert solve(fake, BUFFERS, 1024, timeout=5).status.startswith("error")  # flag missing

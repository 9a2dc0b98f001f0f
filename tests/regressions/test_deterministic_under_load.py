"""Output depends on the input and the options only: two builds of a program whose plan
needs the best planner's search give the same bytes while the machine is loaded (issue 14,
item 11: the wall clock, not the work budget, used to end the search, so a busy machine
gave another plan)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .minimalloc_program import DATA, program


def _spin(stop) -> None:  # a busy loop until told to stop
    x = 0
    while not stop.is_set():
        x = (x * 31 + 7) % 1000003


@pytest.mark.skipif(
    not DATA.is_dir(),
    reason="the MiniMalloc instances (shared/benchmarks) are not beside the checkout",
)
def test_two_builds_under_load_are_byte_identical(tmp_path: Path) -> None:
    """The two builds run at the same time, beside ``cpu_count - 1`` busy loops (at least
    one): one runnable process more than there are cores, each build competing with the
    other and the loops. (It was ``cpu_count`` loops beside one build after the other: the
    same load, twice as long, most of the CPU time the loops'.)"""
    src = tmp_path / "d.rx"
    src.write_text(program("D"))
    stop = multiprocessing.Event()
    spinners = [
        multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
        for _ in range(max(1, (os.cpu_count() or 2) - 1))
    ]
    for p in spinners:
        p.start()
    try:
        builds = []
        for k in range(2):
            out = tmp_path / f"d{k}.rxb"
            cmd = [
                sys.executable,
                "-m",
                "relaxc.cli.main",
                "build",
                str(src),
                "-q",
                "-o",
                str(out),
                "--pass-config",
                "PlanMemory.time_limit=0.5",
            ]
            builds.append((subprocess.Popen(cmd), out))
        assert [proc.wait() for proc, _ in builds] == [0, 0]
        outs = [out.read_bytes() for _, out in builds]
    finally:
        stop.set()
        for p in spinners:
            p.join(timeout=10)
    assert outs[0] == outs[1]

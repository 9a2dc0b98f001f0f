"""benchmarks/known_plans.py: a raw plan is carried onto a program's large buffers by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from known_plans import main, transferred  # noqa: E402

from relaxc.passes.planning.model import Buffer  # noqa: E402


def test_offsets_follow_the_names_not_the_order() -> None:
    raw = [Buffer(0, 4, 128, 1, "0"), Buffer(2, 6, 256, 1, "1")]
    program = [
        Buffer(1, 9, 256, 64, "b1_storage"),
        Buffer(3, 5, 64, 64, "r0"),  # a one-element tensor: not one of the raw buffers
        Buffer(0, 5, 128, 64, "b0_storage"),
    ]
    assert transferred(raw, program, [0, 128]) == [128, 0]


def test_a_raw_buffer_missing_from_the_program_gives_none() -> None:
    raw = [Buffer(0, 4, 128, 1, "0"), Buffer(2, 6, 256, 1, "1")]
    program = [Buffer(0, 5, 128, 64, "b0_storage"), Buffer(1, 9, 256, 64, "x_storage")]
    assert transferred(raw, program, [0, 128]) is None
    assert transferred(raw, program[:1], [0, 128]) is None


@pytest.mark.parametrize("argv", [["--only", "Q,H"], ["--time-limit", "-1"]])
def test_bad_options_are_refused_before_any_work(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err

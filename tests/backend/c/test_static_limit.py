"""``relaxc build -t c`` refuses a program whose static memory is larger than
``--max-static-bytes`` (default 1 GiB): a 64 GiB arena (``n <= 2**30``) was written without a
word and the binary died with SIGSEGV before ``main`` (issue 28, defect 4)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from relaxc.cli.main import cli
from relaxc.cli.static_limit import MAX_STATIC_BYTES
from relaxc.cli.units import format_bytes

SAMPLES_DIR = Path(__file__).resolve().parents[3] / "samples"

HUGE = """\
fn @main(%x: Tensor[(n, 8), f32]) -> Tensor[(n, 8), f32]
    attrs {{upper_bounds = {{n = {bound}}}}} {{
  %a = relu(%x)
  %b = exp(%a)
  %c = add(%a, %b)
  return %c
}}
"""


def invoke(*args: object):
    return CliRunner().invoke(
        cli, [str(a) for a in args], env={"RELAXC_DEBUG": None}, catch_exceptions=False
    )


def static_bytes(header: Path) -> int:
    m = re.search(r"#define \w+_STATIC_BYTES (\d+)", header.read_text())
    assert m, header
    return int(m[1])


def test_a_huge_static_arena_is_refused_by_default(tmp_path: Path) -> None:
    src = tmp_path / "huge.rx"
    src.write_text(HUGE.format(bound=2**30))
    out = tmp_path / "out"
    r = invoke("build", src, "-t", "c", "-o", out)
    assert r.exit_code == 1, r.output
    assert not out.exists()  # nothing written, no folder made
    assert "Traceback" not in r.output
    assert "error: the C program's static memory would be 64.0 GiB (68,719,476,736 B)" in r.stderr
    assert "n <= 1,073,741,824" in r.stderr  # the bound that makes it so
    assert "more than --max-static-bytes 1.0 GiB (1,073,741,824 B)" in r.stderr
    # what the user asks for is what they get: a larger limit writes it (not compiled here)
    ok = invoke("build", src, "-t", "c", "-o", out, "--max-static-bytes", "64GiB")
    assert ok.exit_code == 0, ok.output
    assert static_bytes(out / "huge.h") == 64 * 2**30


@pytest.fixture
def mlp(tmp_path: Path) -> Path:
    for name in ("mlp.rx", "mlp.npz"):
        shutil.copy(SAMPLES_DIR / name, tmp_path / name)
    return tmp_path / "mlp.rx"


def test_the_limit_is_the_static_bytes_exactly(mlp: Path, tmp_path: Path) -> None:
    first = invoke("build", mlp, "-t", "c", "-o", tmp_path / "probe")
    assert first.exit_code == 0, first.output
    size = static_bytes(tmp_path / "probe" / "mlp.h")
    assert 0 < size <= MAX_STATIC_BYTES
    at = invoke("build", mlp, "-t", "c", "-o", tmp_path / "at", "--max-static-bytes", size)
    assert at.exit_code == 0, at.output
    below = tmp_path / "below"
    r = invoke("build", mlp, "-t", "c", "-o", below, "--max-static-bytes", size - 1)
    assert r.exit_code == 1 and not below.exists()
    assert f"would be {format_bytes(size)}" in r.stderr
    assert f"more than --max-static-bytes {format_bytes(size - 1)}" in r.stderr


def test_the_default_limit_admits_one_gib(tmp_path: Path) -> None:
    """64 bytes of arena per n (the relu's and the exp's 32-byte rows; the add writes over
    one of them): n <= 2**24 is exactly 1 GiB and passes, one row more does not."""
    src = tmp_path / "gib.rx"
    for bound, ok in ((2**24, True), (2**24 + 1, False)):
        src.write_text(HUGE.format(bound=bound))
        out = tmp_path / f"out{bound}"
        r = invoke("build", src, "-t", "c", "-o", out)
        assert (r.exit_code == 0) is ok, r.output
        if ok:
            assert static_bytes(out / "gib.h") == MAX_STATIC_BYTES == 2**30


def test_max_static_bytes_is_only_for_the_c_target(mlp: Path, tmp_path: Path) -> None:
    r = invoke("build", mlp, "-o", tmp_path / "m.rxb", "--max-static-bytes", "1GiB")
    assert r.exit_code == 2 and "--max-static-bytes is only for --target c" in r.stderr
    bad = invoke("build", mlp, "-t", "c", "-o", tmp_path / "c", "--max-static-bytes", "lots")
    assert bad.exit_code == 2 and "is not a size" in bad.stderr

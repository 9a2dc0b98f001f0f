"""No output of a pipeline command lands on one of its inputs: dumps included (issue 14, item 9)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from relaxc.cli.main import cli
from relaxc.passes.registry import PIPELINES

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
VM = PIPELINES["vm"]
DUMPS = [f"{k:03d}_after_{p}.rx" for k, p in enumerate(VM, start=1)]  # --dump-after all
PLAN_MEMORY_DUMP = DUMPS[VM.index("PlanMemory")]


@pytest.fixture
def mlp(tmp_path: Path) -> Path:
    for suffix in (".rx", ".npz"):
        shutil.copy(SAMPLES / f"mlp{suffix}", tmp_path / f"mlp{suffix}")
    return tmp_path / "mlp.rx"


@pytest.mark.parametrize("command", [["passes"], ["build", "-t", "ir", "-o", "-"], ["report"]])
def test_dump_named_like_the_source_is_refused_and_the_source_kept(
    mlp: Path, command: list[str]
) -> None:
    source = mlp.parent / PLAN_MEMORY_DUMP
    shutil.copy(mlp, source)
    shutil.copy(mlp.with_suffix(".npz"), source.with_suffix(".npz"))
    before = source.read_bytes()
    r = CliRunner().invoke(
        cli, [*command, str(source), "--dump-after", "all", "--dump-dir", str(mlp.parent)]
    )
    assert r.exit_code == 1, r.output
    assert "refusing to write" in r.output and PLAN_MEMORY_DUMP in r.output
    assert source.read_bytes() == before
    assert not (mlp.parent / DUMPS[0]).exists()  # nothing written at all


def test_dump_named_like_the_weights_is_refused(mlp: Path) -> None:
    weights = mlp.parent / DUMPS[0]
    shutil.copy(mlp.with_suffix(".npz"), weights)
    before = weights.read_bytes()
    r = CliRunner().invoke(
        cli,
        [
            "passes",
            str(mlp),
            "--params",
            str(weights),
            "--dump-after",
            "all",
            "--dump-dir",
            str(mlp.parent),
        ],
    )
    assert r.exit_code == 1, r.output
    assert "refusing to write" in r.output
    assert weights.read_bytes() == before


def test_dumps_beside_the_source_are_written_when_no_name_collides(mlp: Path) -> None:
    r = CliRunner().invoke(
        cli, ["passes", str(mlp), "--dump-after", "all", "--dump-dir", str(mlp.parent)]
    )
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in mlp.parent.glob("0*.rx")) == DUMPS

"""Output paths are checked before any work: ``build -o EXISTING_DIR`` or ``-o
missing/dir/x`` was refused only after the whole compile, and ``report --svg nodir/x.svg
--json`` printed the JSON and then exited 1. Every command that writes files it is told to
(build, import, run -o, report --svg/--html/--trace) now refuses such a path first: the
loader (or the importer) is replaced here by one that fails the test if it is called, stdout
stays empty, and nothing is written. (``fmt`` rewrites a file only if it is not canonical,
which it knows only after parsing it: its write keeps its own refusal.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from relaxc.cli import cmd_build, cmd_report, cmd_run
from relaxc.cli.files import check_output_file, check_output_folder
from relaxc.cli.main import cli
from relaxc.ir.diagnostics import RxError

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _no_work(*args, **kwargs):
    raise AssertionError("the input was loaded before the output path was checked")


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """mlp.rx and its weights, a folder ``dir`` and a file ``file``; no command may load."""
    for suffix in (".rx", ".npz"):
        shutil.copy(SAMPLES / f"mlp{suffix}", tmp_path / f"mlp{suffix}")
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("a file\n")
    for module in (cmd_build, cmd_report, cmd_run):
        monkeypatch.setattr(module, "load_input", _no_work)
    monkeypatch.setattr(cmd_run, "load_file", _no_work)
    monkeypatch.chdir(tmp_path)
    return tmp_path


CASES = [
    (("build", "mlp.rx", "-o", "dir"), "cannot write dir: it is a directory"),
    (("build", "mlp.rx", "-o", "missing/dir/x.rxb"), "folder missing/dir does not exist"),
    (("build", "mlp.rx", "-o", "file/x.rxb"), "cannot write file/x.rxb: folder file does not"),
    (("build", "mlp.rx", "--json", "-o", "dir"), "cannot write dir: it is a directory"),
    (("build", "mlp.rx", "-o", "-"), "bytecode is binary and is not written to stdout"),
    (("build", "mlp.rx", "-t", "ir", "-o", "dir"), "cannot write dir: it is a directory"),
    (("build", "mlp.rx", "-t", "ir", "-o", "nodir/x.rx"), "folder nodir does not exist"),
    (("build", "mlp.rx", "-t", "c", "-o", "file"), "writes into a folder, and this is a file"),
    (("build", "mlp.rx", "-t", "c", "-o", "file/c"), "cannot create folder file/c: file is"),
    (("build", "mlp.rx", "-t", "c", "-o", "-"), "give a folder with -o, not '-'"),
    (("build", "mlp.rx", "-o", "mlp.rx"), "refusing to write mlp.rx: it is one of the inputs"),
    (("run", "mlp.rx", "-o", "dir"), "cannot write dir: it is a directory"),
    (("run", "mlp.rx", "-o", "nodir/y.npz"), "folder nodir does not exist"),
    (("report", "mlp.rx", "--svg", "nodir/x.svg", "--json"), "folder nodir does not exist"),
    (("report", "mlp.rx", "--html", "dir"), "cannot write dir: it is a directory"),
    (("report", "mlp.rx", "--trace", "nodir/t.json"), "folder nodir does not exist"),
    (("report", "mlp.rx", "--svg", "mlp.npz"), "refusing to write mlp.npz"),
    (("build", "mlp.rx", "-t", "ir", "-o", "mlp.npz"), "refusing to write mlp.npz"),
]


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_bad_output_is_refused_before_any_work(world: Path, args, message: str) -> None:
    before = sorted(p.relative_to(world) for p in world.rglob("*"))
    result = invoke(*args)
    assert result.exit_code == 1, result.output
    assert result.stdout == "", "something was printed before the refusal"
    assert result.stderr.startswith("error: ") and message in result.stderr, result.stderr
    assert sorted(p.relative_to(world) for p in world.rglob("*")) == before


def test_import_checks_its_outputs_before_importing(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    import relaxc.frontend.onnx as frontend_onnx

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(world / "m.onnx"))
    monkeypatch.setattr(frontend_onnx, "import_onnx", _no_work)
    for out, message in (
        ("nodir/m.rx", "cannot write nodir/m.rx: folder nodir does not exist"),
        ("file/m.rx", "folder file does not exist"),
    ):
        result = invoke("import", "m.onnx", "-o", out)
        assert result.exit_code == 1 and message in result.stderr, result.stderr
    (world / "m.npz").mkdir()  # the weights' file would be a folder
    result = invoke("import", "m.onnx")
    assert result.exit_code == 1 and "cannot write m.npz: it is a directory" in result.stderr


def test_good_outputs_pass_the_early_check(tmp_path: Path) -> None:
    """The check refuses only what the write would refuse: a new file in an existing folder,
    an existing file, a device, a folder to be made with its parents all pass."""
    (tmp_path / "old.rxb").write_bytes(b"x")
    for path in (tmp_path / "new.rxb", tmp_path / "old.rxb", Path("/dev/null"), Path("x.rxb")):
        check_output_file(path)
    for folder in (tmp_path, tmp_path / "a" / "b" / "c", Path("out")):
        check_output_folder(folder)
    assert not (tmp_path / "a").exists()  # checking creates nothing


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root")
def test_a_folder_without_write_permission_is_refused_first(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(RxError, match="cannot create files in folder"):
            check_output_file(locked / "x.rxb")
        with pytest.raises(RxError, match="permission denied"):
            check_output_folder(locked / "c")
    finally:
        locked.chmod(0o755)

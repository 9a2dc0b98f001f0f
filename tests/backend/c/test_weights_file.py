"""Weights as data: ``--constants file`` puts the named weights into ``PREFIX_weights.bin``,
linked by the assembler stub ``PREFIX_weights.S``. The build computes what the inline build
computes (bit for bit), the bytes are deterministic and exactly the weights, the header
states them, the object's ``.rodata`` is the file, and the files are written like every
other output (atomically, never over an input)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from relaxc.backend.c import emit_c
from relaxc.cli.main import cli
from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import default_weights_path, load_npz
from relaxc.ir.diagnostics import RxError
from relaxc.cli.report.analysis import memory_report

from .cbuild import (
    CC,
    assert_close,
    build_all,
    compile_module,
    emit,
    needs_cc,
    run_c,
    write_sources,
)

SAMPLES_DIR = Path(__file__).resolve().parents[3] / "samples"
SAMPLES = sorted(p.stem for p in SAMPLES_DIR.glob("*.rx"))
DIMS = {"transformer": {"n": 7}, "relay_memory": {"n": 3}}


def load(name: str):
    path = SAMPLES_DIR / f"{name}.rx"
    wpath = default_weights_path(path)
    return parse_module(path.read_text(), path.name), (load_npz(wpath, "weights") if wpath else {})


def inputs(module, dims: dict[str, int], seed: int = 0) -> list[np.ndarray]:
    from relaxc.backend.inputs import random_inputs, resolve_dims

    fn = module.get("main")
    return random_inputs(fn, resolve_dims(fn, dims), seed)


def section_sizes(obj: Path) -> dict[str, int]:
    out = subprocess.run(["size", "-A", str(obj)], capture_output=True, text=True, check=True)
    sizes: dict[str, int] = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit():
            base = "." + parts[0].split(".")[1]
            sizes[base] = sizes.get(base, 0) + int(parts[1])
    return sizes


# ---------------------------------------------------------------------------------------
# What is emitted.


def test_file_mode_moves_the_weights_out_of_the_c_file() -> None:
    module, weights = load("cnn")
    inline = emit_c(compile_module(module), weights, prefix="cnn")
    sources = emit_c(compile_module(module), weights, prefix="cnn", constants="file")
    assert set(sources.files) == {"cnn.h", "cnn.c", "cnn_weights.S", "cnn_weights.bin"}
    c, asm, data = (sources.files[f] for f in ("cnn.c", "cnn_weights.S", "cnn_weights.bin"))
    assert isinstance(data, bytes) and isinstance(c, str) and isinstance(asm, str)
    assert "static const union" not in c  # every constant of the cnn is a named weight
    assert "extern const float cnn_c_conv1_weight[432];" in c
    assert '.incbin "cnn_weights.bin"' in asm and ".hidden \\name" in asm
    # The file is exactly the weights the C file reads: their bytes, once each.
    assert len(data) == sources.info.weights_bytes == sources.info.constant_bytes
    assert sources.info.constant_bytes == inline.info.constant_bytes
    (report,) = [r for r in memory_report(compile_module(module)) if r.name == "main"]
    assert len(data) == report.constant_bytes
    # The code is the same; only the constants' definitions differ: the inline file holds
    # at least two characters (a hex digit pair) per constant byte more.
    assert len(inline.files["cnn.c"]) - len(c) > 2 * sources.info.constant_bytes
    assert sources.files["cnn.h"] != inline.files["cnn.h"]


def test_the_header_states_the_bytes() -> None:
    module, weights = load("transformer")
    sources = emit_c(compile_module(module), weights, prefix="tf", constants="file")
    h = sources.files["tf.h"]
    data = sources.files["tf_weights.bin"]
    assert f"#define TF_WEIGHTS_FILE_BYTES {len(data)}\n" in h
    total = int(re.search(r"#define TF_CONSTANT_BYTES (\d+)", h)[1])
    assert total == sources.info.constant_bytes
    # The transformer's primitive @scaled_softmax has a 4-byte literal: it stays in the C file.
    inline = total - len(data)
    assert inline == 4
    assert f" *     {len(data)} bytes in tf_weights.bin (linked by tf_weights.S), 4 in tf.c" in h
    assert "static const union { uint32_t w[1]; float v[1]; }" in sources.files["tf.c"]


def test_the_bytes_are_deterministic_and_laid_out_by_element_size() -> None:
    """Two builds give the same bytes; arrays of larger elements come first, so each is
    aligned to its element size and the file has no padding."""
    text = """
fn @main(%x: Tensor[(3,), f64]) -> Tensor[(3,), f64] {
  %a: Tensor[(3,), i8] = const("a")
  %b: Tensor[(3,), f64] = const("b")
  %c: Tensor[(3,), f16] = const("c")
  %d: Tensor[(3,), i64] = const("d")
  %e: Tensor[(3,), f32] = const("e")
  %a1 = cast(%a, dtype=f64)
  %c1 = cast(%c, dtype=f64)
  %d1 = cast(%d, dtype=f64)
  %e1 = cast(%e, dtype=f64)
  %s1 = add(%x, %a1)
  %s2 = multiply(%s1, %b)
  %s3 = add(%s2, %c1)
  %s4 = subtract(%s3, %d1)
  %s5 = add(%s4, %e1)
  return %s5
}
"""
    weights = {
        "a": np.array([1, -2, 3], np.int8),
        "b": np.array([0.5, -1.25, 2.0], np.float64),
        "c": np.array([1.5, 0.0, -2.0], np.float16),
        "d": np.array([7, -(1 << 40), 9], np.int64),
        "e": np.array([0.1, 0.2, -0.3], np.float32),
    }
    module = parse_module(text, "t.rx")
    one = emit_c(compile_module(module), weights, prefix="m", constants="file")
    two = emit_c(compile_module(module), weights, prefix="m", constants="file")
    assert one.files == two.files
    data = one.files["m_weights.bin"]
    want = b"".join(
        weights[k].astype(weights[k].dtype.newbyteorder("<")).tobytes() for k in "bdeca"
    )
    assert data == want  # f64, i64 (by first use), f32, f16, i8: no padding
    offsets = [int(x) for x in re.findall(r"SYM\(m_c_\w+\), (\d+), \d+", one.files["m_weights.S"])]
    assert offsets == [0, 24, 48, 60, 66]
    assert "at byte 66 of m_weights.bin" in one.files["m.c"]  # the i8 array, last


def test_unread_weights_are_left_out_of_the_file() -> None:
    text = """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %w: Tensor[(4,), f32] = const("w")
  %unused: Tensor[(2,), f32] = const("unused")
  %y = add(%x, %w)
  return %y
}
"""
    weights = {"w": np.arange(4, dtype=np.float32), "unused": np.ones(2, np.float32)}
    sources = emit_c(
        compile_module(parse_module(text, "t.rx")), weights, prefix="m", constants="file"
    )
    assert sources.files["m_weights.bin"] == weights["w"].tobytes()
    assert "unused" not in sources.files["m_weights.S"]


def test_an_unknown_mode_is_refused() -> None:
    module, weights = load("mlp")
    with pytest.raises(RxError, match="constants='rom'"):
        emit_c(compile_module(module), weights, constants="rom")


# ---------------------------------------------------------------------------------------
# Compiled: the same outputs as inline, and .rodata is the file.


@needs_cc
@pytest.mark.parametrize("unpacked", [False, True], ids=["packed", "unpacked"])
def test_file_mode_computes_the_inline_outputs_on_every_sample(
    sample_builds, tmp_path: Path, unpacked: bool
) -> None:
    """Every sample built with ``--constants file`` computes the inline build's outputs bit
    for bit (the inline builds are the session's strict ones, conftest.py)."""
    mode = "unpacked" if unpacked else "packed"
    jobs = []
    for name in SAMPLES:
        module, weights = load(name)
        folder = tmp_path / f"{name}_file"
        sources = emit(module, weights, folder, prefix=name, unpacked=unpacked, constants="file")
        jobs.append((folder, sources, False))
    built = dict(zip(SAMPLES, build_all(jobs)))
    for name in SAMPLES:
        module, _ = load(name)
        dims = DIMS.get(name, {})
        args = inputs(module, dims, seed=3)
        want = run_c(sample_builds[name, mode, False], args, dims, tag="weights_file")
        got = run_c(built[name], args, dims)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=name)  # the same code, the same bytes


@needs_cc
def test_file_mode_under_the_sanitizers(tmp_path: Path) -> None:
    module, weights = load("cnn")
    sources = emit(module, weights, tmp_path, prefix="cnn", constants="file")
    (built,) = build_all([(tmp_path, sources, True)])
    args = inputs(module, {}, seed=4)
    from relaxc.backend.interpreter import Interpreter

    want = Interpreter(module, weights).run("main", args)
    assert_close(run_c(built, args), want, "cnn, file mode, sanitized")


@needs_cc
def test_rodata_of_the_weights_object_is_the_file(tmp_path: Path) -> None:
    module, weights = load("cnn")
    sources = emit(module, weights, tmp_path, prefix="cnn", constants="file")
    for src in ("cnn_weights.S", "cnn.c"):
        subprocess.run(
            [CC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-c", src],
            cwd=tmp_path,
            check=True,
        )
    data = sources.files["cnn_weights.bin"]
    assert section_sizes(tmp_path / "cnn_weights.o").get(".rodata") == len(data)
    # The weights are not in the C object; what .rodata it has is the kernels' literals.
    assert section_sizes(tmp_path / "cnn.o").get(".rodata", 0) < len(data) // 10
    # Each array is one symbol of its size (hidden: the model still exports only its API).
    nm = subprocess.run(
        ["nm", "-S", "cnn_weights.o"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert re.search(r"^0+ 0+6c0 R cnn_c_conv1_weight$", nm, re.M), nm  # 432 floats


@needs_cc
def test_the_stub_is_assembled_from_another_folder_with_dash_i(tmp_path: Path) -> None:
    module, weights = load("mlp")
    out = tmp_path / "out"
    out.mkdir()
    emit(module, weights, out, prefix="mlp", constants="file")
    r = subprocess.run(
        [CC, "-c", "out/mlp_weights.S", "-o", "w.o"], cwd=tmp_path, capture_output=True, text=True
    )
    assert r.returncode != 0 and "mlp_weights.bin" in r.stderr  # not found without -I
    subprocess.run([CC, "-c", "out/mlp_weights.S", "-Iout", "-o", "w.o"], cwd=tmp_path, check=True)


@needs_cc
def test_a_truncated_weights_file_does_not_assemble(tmp_path: Path) -> None:
    module, weights = load("mlp")
    sources = emit(module, weights, tmp_path, prefix="mlp", constants="file")
    data = sources.files["mlp_weights.bin"]
    (tmp_path / "mlp_weights.bin").write_bytes(data[:-4])
    r = subprocess.run([CC, "-c", "mlp_weights.S"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode != 0


@needs_cc
def test_squeezenet_from_a_weights_file_computes_the_inline_outputs(
    squeezenet_c, tmp_path: Path
) -> None:
    """The c pipeline's SqueezeNet with its weights in a file computes the inline build's
    outputs bit for bit (the inline build is the session's, tests/conftest.py)."""
    result, compiled, inline = squeezenet_c
    sources = emit_c(compiled, result.weights, prefix="sq", emit_main=True, constants="file")
    write_sources(tmp_path, sources)
    (file,) = build_all([(tmp_path, sources, False)])
    assert len(file.sources.files["sq.c"]) * 20 < len(inline.sources.files["sq.c"])
    assert file.sources.info.weights_bytes == inline.sources.info.constant_bytes == 4_941_984
    args = inputs(result.module, {}, seed=5)
    for g, w in zip(run_c(file, args), run_c(inline, args, tag="weights_file")):
        np.testing.assert_array_equal(g, w)


# ---------------------------------------------------------------------------------------
# relaxc build --constants file.


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    folder = tmp_path / "samples"
    folder.mkdir()
    for name in ("cnn.rx", "cnn.npz"):
        shutil.copy(SAMPLES_DIR / name, folder / name)
    return folder


def test_build_writes_the_weights_file_and_its_stub(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke("build", samples / "cnn.rx", "-t", "c", "-o", out, "--constants", "file")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "cnn.c",
        "cnn.h",
        "cnn_weights.S",
        "cnn_weights.bin",
    ]
    direct = emit_c(compile_module(load("cnn")[0]), load("cnn")[1], prefix="cnn", constants="file")
    assert (out / "cnn_weights.bin").read_bytes() == direct.files["cnn_weights.bin"]
    stub, data = out / "cnn_weights.S", out / "cnn_weights.bin"
    assert re.search(rf"{re.escape(str(stub))} \([^)]+\), {re.escape(str(data))} \(", result.stderr)


def test_constants_is_only_for_the_c_target(samples: Path) -> None:
    result = invoke("build", samples / "cnn.rx", "--constants", "file")
    assert result.exit_code == 2 and "--constants is only for --target c" in result.output


def test_the_weights_file_never_overwrites_an_input(samples: Path) -> None:
    """Weights given with --params under the name the weights file would take: refused,
    and nothing written."""
    out = samples / "out"
    out.mkdir()
    params = out / "cnn_weights.bin"
    shutil.copy(samples / "cnn.npz", params)
    before = params.read_bytes()
    result = invoke(
        "build", samples / "cnn.rx", "-t", "c", "-o", out, "--constants", "file", "--params", params
    )
    assert result.exit_code == 1
    assert "refusing to write" in result.output and "it is one of the inputs" in result.output
    assert params.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["cnn_weights.bin"]


def test_all_the_files_or_none(samples: Path) -> None:
    """A weights file that cannot be written (a folder is in the way): no file is written,
    not even the ones before it, and no temporary file is left."""
    out = samples / "out"
    (out / "cnn_weights.bin").mkdir(parents=True)
    result = invoke("build", samples / "cnn.rx", "-t", "c", "-o", out, "--constants", "file")
    assert result.exit_code == 1 and "it is a directory" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["cnn_weights.bin"]

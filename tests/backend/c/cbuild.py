"""Building and running emitted C in tests: compile with the machine's cc, run the generated
main() on raw little-endian files, compare with the reference interpreter."""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pytest

from relaxc.backend.c import CSources, emit_c
from relaxc.backend.inputs import concrete_shape
from relaxc.frontend.parser import parse_module
from relaxc.ir.nodes import Module
from relaxc.ir.types import numpy_dtype
from relaxc.cli.target_facts import pipeline_context
from relaxc.passes.assemble import assemble_pipeline
from relaxc.passes.pipeline import Pipeline, VerifyInstrument

CC = shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc) on this machine")

STRICT = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"]
SANITIZE = [
    "-std=c99",
    "-O0",
    "-g",
    "-fno-omit-frame-pointer",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pedantic",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
]
SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=99",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=98",
}

TOLERANCE = {"f16": (2e-3, 2e-3), "f32": (1e-4, 1e-5), "f64": (1e-12, 1e-14)}
"""(rtol, atol) per float dtype; integers and bools must match exactly. f32: the reference
kernels sum products in float32 (BLAS's blocked order) and C in its own order, so a sum
that cancels can differ by a few float32 roundings of its terms' magnitudes (the same
tolerance the ONNX tests allow against onnxruntime)."""

SCALED_ATOL = {"f16": 0.0, "f32": 64 * 2.0**-24, "f64": 0.0}
"""An absolute tolerance per float dtype in units of the output's largest finite magnitude,
added to TOLERANCE's: the C's f32 conv2d, dense and matmul sum in blocked ``float`` (docs/c.md,
Numbers), whose error is relative to the magnitudes of the terms, not of the result (a
result near zero after cancellation is off by the rounding of the large terms); the output's
scale stands for them. 64 roundings of 2**-24: about 3.8e-6 of the largest |output|."""


def scaled_atol(w: np.ndarray, dtype: str) -> float:
    """TOLERANCE's atol of ``dtype`` plus SCALED_ATOL times the largest finite |w|."""
    finite = np.abs(w[np.isfinite(w)]) if w.size else np.zeros(0)
    scale = float(finite.max()) if finite.size else 0.0
    return TOLERANCE[dtype][1] + SCALED_ATOL[dtype] * scale


def compile_module(m: Module, passes: str = "c", unpacked: bool = False) -> Module:
    pipeline = assemble_pipeline("c", passes, context=pipeline_context())
    if unpacked:
        pipeline = [p for p in pipeline if p.name != "LegalizePackedCalls"]
    return Pipeline(pipeline, [VerifyInstrument()]).run(m)


@dataclass
class Built:
    folder: Path
    exe: Path
    sources: CSources
    sanitized: bool


def emit(
    module: Module,
    weights: Mapping[str, np.ndarray],
    folder: Path,
    prefix: str = "model",
    unpacked: bool = False,
    constants: str = "inline",
) -> CSources:
    folder.mkdir(parents=True, exist_ok=True)
    sources = emit_c(
        compile_module(module, unpacked=unpacked),
        weights,
        prefix=prefix,
        emit_main=True,
        constants=constants,
    )
    write_sources(folder, sources)
    return sources


def write_sources(folder: Path, sources: CSources) -> None:
    """The emitted files into ``folder`` (text, and the weights file's bytes)."""
    for name, data in sources.files.items():
        path = folder / name
        path.write_bytes(data) if isinstance(data, bytes) else path.write_text(data)


def compile_c(folder: Path, sources: CSources, sanitize: bool = False) -> Built:
    assert CC is not None
    p = sources.info.prefix
    exe = folder / (f"{p}_san" if sanitize else f"{p}_run")
    flags = SANITIZE if sanitize else STRICT
    stub = [f"{p}_weights.S"] if f"{p}_weights.S" in sources.files else []  # --constants file
    r = subprocess.run(
        [CC, *flags, f"{p}.c", f"{p}_main.c", *stub, "-lm", "-o", exe.name],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, f"cc {' '.join(flags)} failed:\n{r.stderr}"
    assert r.stderr == "", f"cc printed diagnostics:\n{r.stderr}"
    return Built(folder, exe, sources, sanitize)


def build_all(jobs: Sequence[tuple[Path, CSources, bool]]) -> list[Built]:
    """Compile several emitted models at once (cc runs in parallel)."""
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return list(pool.map(lambda j: compile_c(*j), jobs))


def build(
    text: str,
    folder: Path,
    weights: Mapping[str, np.ndarray] | None = None,
    *,
    prefix: str = "model",
    unpacked: bool = False,
    sanitize: bool = False,
) -> Built:
    sources = emit(parse_module(text, "t.rx"), weights or {}, folder, prefix, unpacked)
    return compile_c(folder, sources, sanitize)


def run_c(
    built: Built,
    args: Sequence[np.ndarray],
    dims: Mapping[str, int] | None = None,
    tag: str = "run",
) -> list[np.ndarray]:
    """Run the model's main() on ``args``; returns the outputs. Fails on any sanitizer report."""
    info = built.sources.info
    dims = dict(dims or {})
    files = []
    for i, (port, a) in enumerate(zip(info.inputs, args)):
        path = built.folder / f"{tag}_in{i}.bin"
        np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tofile(path)
        files.append(path.name)
    outs = [built.folder / f"{tag}_out{i}.bin" for i in range(len(info.outputs))]
    files += [p.name for p in outs]
    cmd = [str(built.exe), *files, *[f"{k}={v}" for k, v in dims.items()]]
    env = dict(os.environ, **SAN_ENV) if built.sanitized else None
    r = subprocess.run(cmd, cwd=built.folder, capture_output=True, text=True, env=env)
    assert r.returncode == 0, f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr}"
    assert r.stderr == "", f"the program printed to stderr:\n{r.stderr}"
    result = []
    for port, path in zip(info.outputs, outs):
        shape = concrete_shape(port.type.shape, dims)
        dt = numpy_dtype(port.type.dtype).newbyteorder("<")
        result.append(np.fromfile(path, dtype=dt).reshape(shape).astype(dt.newbyteorder("=")))
    return result


def run_c_raw(built: Built, argv: Sequence[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, **SAN_ENV) if built.sanitized else None
    return subprocess.run(
        [str(built.exe), *argv], cwd=built.folder, capture_output=True, text=True, env=env
    )


def as_list(v: Any) -> list[np.ndarray]:
    if isinstance(v, tuple):
        return [x for f in v for x in as_list(f)]
    return [v]


def assert_close(got: Sequence[np.ndarray], want: Any, what: str = "") -> None:
    """Outputs equal to the reference: floats within TOLERANCE of their dtype and
    :func:`scaled_atol` (NaN where it has NaN), integers and bools exactly."""
    wants = as_list(want)
    assert len(got) == len(wants), what
    for i, (g, w) in enumerate(zip(got, wants)):
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{what} output {i}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        )
        if w.dtype.kind == "f":
            dt = {"float16": "f16", "float32": "f32", "float64": "f64"}[w.dtype.name]
            rtol, atol = TOLERANCE[dt][0], scaled_atol(w.astype(np.float64), dt)
            np.testing.assert_allclose(
                g.astype(np.float64),
                w.astype(np.float64),
                rtol=rtol,
                atol=atol,
                equal_nan=True,
                err_msg=f"{what} output {i}",
            )
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} output {i}")

"""C hygiene: every exported function of a build that uses AVX returns with the upper halves
of the vector registers clean (``vzeroupper``), or the SSE code its caller runs next is
slowed (2.5x, measured on squeezenet's ``squeezenet_run``, which GCC 12 at -O3
-march=native let return error codes dirty). A small conv2d + dense model is built for this
machine (-O3 -march=native), also with the compiler's own ``vzeroupper`` insertion turned off
(-mno-vzeroupper: then only the emitted C keeps the promise), and its object disassembled
with objdump; every path to a ``ret`` of an exported function is followed
(:mod:`upper_state`)."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.c import emit_c
from relaxc.frontend.parser import parse_module

from .cbuild import CC, STRICT, compile_module, needs_cc
from .upper_state import disassemble, dirty_exits, global_functions, uses_upper_state

pytestmark = [
    needs_cc,
    pytest.mark.skipif(shutil.which("objdump") is None, reason="no objdump on this machine"),
    pytest.mark.skipif(
        platform.machine().lower() not in ("x86_64", "amd64"), reason="AVX is x86-64's"
    ),
]

MODEL = """
fn @main(%x: Tensor[(1, 8, 12, 12), f32]) -> Tensor[(1, 10), f32] {
  %w: Tensor[(16, 8, 3, 3), f32] = const("conv.weight")
  %c = conv2d(%x, %w, padding=(1, 1))
  %r = relu(%c)
  %p = global_avg_pool2d(%r)
  %f = flatten(%p)
  %d: Tensor[(10, 16), f32] = const("fc.weight")
  %b: Tensor[(10,), f32] = const("fc.bias")
  %y = dense(%f, %d, %b)
  return %y
}
"""


def _native_avx() -> bool:
    """-march=native on this machine turns AVX on."""
    r = subprocess.run(
        [CC, "-march=native", "-dM", "-E", "-x", "c", "-"],
        input="",
        capture_output=True,
        text=True,
    )
    return r.returncode == 0 and "#define __AVX__ 1" in r.stdout


def _compile(folder: Path, source: str, flags: list[str]) -> str:
    obj = folder / (Path(source).stem + ".o")
    r = subprocess.run(
        [CC, *flags, "-c", source, "-o", str(obj)], cwd=folder, capture_output=True, text=True
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return str(obj)


def _accepts(flag: str, folder: Path) -> bool:
    probe = folder / "probe.c"
    probe.write_text("int probe(void) { return 0; }\n")
    r = subprocess.run(
        [CC, flag, "-c", str(probe), "-o", str(folder / "probe.o")], capture_output=True
    )
    return r.returncode == 0


@pytest.fixture(scope="module")
def native(tmp_path_factory) -> Path:
    if not _native_avx():
        pytest.skip("-march=native has no AVX on this machine")
    folder = tmp_path_factory.mktemp("upper")
    rng = np.random.default_rng(0)
    weights = {
        "conv.weight": rng.standard_normal((16, 8, 3, 3)).astype(np.float32),
        "fc.weight": rng.standard_normal((10, 16)).astype(np.float32),
        "fc.bias": rng.standard_normal((10,)).astype(np.float32),
    }
    sources = emit_c(compile_module(parse_module(MODEL, "m.rx")), weights, prefix="m")
    for name, text in sources.files.items():
        (folder / name).write_text(text) if isinstance(text, str) else (folder / name).write_bytes(
            text
        )
    return folder


NATIVE = [f for f in STRICT if f != "-O2"] + ["-O3", "-march=native"]


@pytest.mark.parametrize("own_insertion", [True, False], ids=["cc", "no-vzeroupper"])
def test_every_exported_function_returns_with_a_clean_upper_state(
    native: Path, own_insertion: bool
) -> None:
    flags = list(NATIVE)
    if not own_insertion:
        if not _accepts("-mno-vzeroupper", native):
            pytest.skip(f"{CC} has no -mno-vzeroupper")
        flags.append("-mno-vzeroupper")
    obj = _compile(native, "m.c", flags)
    funcs = disassemble(obj)
    exported = global_functions(obj)
    assert {"m_run", "m_strerror"} <= exported
    assert any(uses_upper_state(insns) for insns in funcs.values()), "no AVX code was built"
    bad = dirty_exits(funcs)
    dirty = {name: [hex(i.addr) for i in bad[name]] for name in sorted(exported) if bad[name]}
    assert dirty == {}, f"exported functions returning with a dirty upper state: {dirty}"


def test_the_check_sees_a_dirty_return(native: Path) -> None:
    """The disassembly check itself: a loop GCC vectorizes with ymm registers, built without
    the compiler's vzeroupper, is reported; the same with it is not."""
    if not _accepts("-mno-vzeroupper", native):
        pytest.skip(f"{CC} has no -mno-vzeroupper")
    (native / "axpy.c").write_text(
        "void axpy(int n, float a, const float *restrict x, float *restrict y)\n"
        "{\n    int i;\n    for (i = 0; i < n; ++i) y[i] += a * x[i];\n}\n"
    )
    flags = ["-std=c99", "-O3", "-mavx2", "-mprefer-vector-width=256"]
    dirty = dirty_exits(disassemble(_compile(native, "axpy.c", flags + ["-mno-vzeroupper"])))
    assert dirty["axpy"], "a function returning with ymm registers dirty was not seen"
    assert dirty_exits(disassemble(_compile(native, "axpy.c", flags)))["axpy"] == []


def test_the_c_without_avx_has_no_intrinsic(native: Path) -> None:
    """The portable build (no -march) compiles warning-free as C99 and calls no AVX
    intrinsic: the clearing is behind ``#if defined(__AVX__)``."""
    obj = _compile(native, "m.c", STRICT)
    funcs = disassemble(obj)
    assert not any("vzeroupper" == i.op for insns in funcs.values() for i in insns)
    text = (native / "m.c").read_text()
    assert "#if defined(__AVX__)\n#include <immintrin.h>" in text

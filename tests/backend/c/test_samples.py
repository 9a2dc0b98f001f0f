"""Every sample through the C target: compiled warning-free (-std=c99 -O2 -Wall -Wextra -Werror
-pedantic), run, and compared with the reference interpreter; the same under AddressSanitizer
and UndefinedBehaviorSanitizer with no report; packed and unpacked builds agree bit for bit;
the binary's static memory is the memory report's."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import default_weights_path, load_npz
from relaxc.cli.report.analysis import memory_report

from .cbuild import CC, Built, assert_close, compile_module, needs_cc, run_c

pytestmark = needs_cc

SAMPLES_DIR = Path(__file__).resolve().parents[3] / "samples"
SAMPLES = sorted(p.stem for p in SAMPLES_DIR.glob("*.rx"))
DIMS = {
    "transformer": [{"n": 1}, {"n": 7}, {"n": 128}],
    "relay_memory": [{"n": 0}, {"n": 3}, {"n": 64}],
}
MODES = ["packed", "unpacked"]


def load(name: str):
    path = SAMPLES_DIR / f"{name}.rx"
    wpath = default_weights_path(path)
    return parse_module(path.read_text(), path.name), (load_npz(wpath, "weights") if wpath else {})


@pytest.fixture(scope="module")
def builds(sample_builds) -> dict[tuple[str, str, bool], Built]:
    """Every sample, packed and unpacked, strict and sanitized, compiled once (the session's
    builds: conftest.py)."""
    return sample_builds


CASES = [(name, dims) for name in SAMPLES for dims in DIMS.get(name, [{}])]


def case_id(case) -> str:
    name, dims = case
    return name + "".join(f"-{k}{v}" for k, v in dims.items())


@pytest.mark.parametrize("sanitize", [False, True], ids=["strict", "asan-ubsan"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_sample_matches_the_interpreter(builds, case, mode: str, sanitize: bool) -> None:
    name, dims = case
    module, weights = load(name)
    fn = module.get("main")
    env = resolve_dims(fn, dims)
    args = random_inputs(fn, env, seed=3)
    want = Interpreter(module, weights).run("main", args, env)
    got = run_c(builds[(name, mode, sanitize)], args, env, tag=f"{mode}{sanitize}{case_id(case)}")
    assert_close(got, want, f"{name} {mode}")


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_packed_and_unpacked_agree_exactly(builds, case) -> None:
    name, dims = case
    fn = load(name)[0].get("main")
    env = resolve_dims(fn, dims)
    args = random_inputs(fn, env, seed=11)
    packed = run_c(builds[(name, "packed", False)], args, env, tag="agree_p")
    unpacked = run_c(builds[(name, "unpacked", False)], args, env, tag="agree_u")
    for a, b in zip(packed, unpacked):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("name", SAMPLES)
def test_packed_build_calls_kernels_packed(builds, name: str) -> None:
    packed = (builds[(name, "packed", False)].folder / f"{name}.c").read_text()
    unpacked = (builds[(name, "unpacked", False)].folder / f"{name}.c").read_text()
    n_calls = len(
        re.findall(r"_fp_\w+\(v_args\w*, v_codes\w*, \d+, &ret_value, &ret_code, NULL\)", packed)
    )
    assert n_calls > 0 and "DLTensor" in packed and "kTVMDLTensorHandle" in packed
    assert "TVMValue" not in unpacked and "DLTensor" not in unpacked


@pytest.mark.skipif(shutil.which("size") is None, reason="no binutils size on this machine")
@pytest.mark.parametrize("name", SAMPLES)
def test_static_memory_is_the_memory_report(builds, name: str) -> None:
    """``size -A`` of the object: .bss holds the arena of exactly the planned size, .rodata
    the constants (plus a few literals and strings)."""
    module, weights = load(name)
    report = {r.name: r for r in memory_report(compile_module(module))}["main"]
    built = builds[(name, "packed", False)]
    obj = built.folder / f"{name}.o"
    subprocess.run(
        [CC, "-std=c99", "-O2", "-c", f"{name}.c", "-o", obj.name], cwd=built.folder, check=True
    )
    sections = section_sizes(obj)
    info = built.sources.info
    assert info.workspace_bytes == report.arena_bytes
    assert sections.get(".bss", 0) == report.arena_bytes + report.unplanned_static_bytes
    assert info.constant_bytes == report.constant_bytes + extra_constant_bytes(module)
    assert report.constant_bytes <= sections.get(".rodata", 0) <= info.constant_bytes + 4096
    header = (built.folder / f"{name}.h").read_text()
    assert f"#define {name.upper()}_WORKSPACE_BYTES {report.arena_bytes}" in header


def section_sizes(obj: Path) -> dict[str, int]:
    out = subprocess.run(
        ["size", "-A", str(obj)], capture_output=True, text=True, check=True
    ).stdout
    sizes: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit():
            base = "." + parts[0].split(".")[1]  # .rodata.cst8 counts as .rodata
            sizes[base] = sizes.get(base, 0) + int(parts[1])
    return sizes


def extra_constant_bytes(module) -> int:
    """Constants of primitive functions (the report counts the runner's only)."""
    from relaxc.ir.nodes import Bind, Call
    from relaxc.ir.types import dtype_nbytes
    from relaxc.ir.verifier import verify_module

    types = verify_module(module)
    total = 0
    for fn in module.functions:
        if fn.is_primitive:
            for s in fn.body:
                if isinstance(s, Bind) and isinstance(s.value, Call) and s.value.op == "const":
                    t = types[fn.name][s.name]
                    total += int(np.prod([int(d) for d in t.shape], dtype=np.int64)) * dtype_nbytes(
                        t.dtype
                    )
    return total

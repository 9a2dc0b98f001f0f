"""The C half of the ports: every program marked ``# c: yes`` is emitted once, compiled once
with AddressSanitizer and UndefinedBehaviorSanitizer (all of them in parallel, the first time
a test asks), and run on the same random inputs as the interpreter."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from tests.backend.c import cbuild

from .harness import Program, all_programs


@dataclass
class CRun:
    outputs: list[np.ndarray] | None
    reference: object
    error: str | None


def _build_and_run(prog: Program, root: Path) -> CRun:
    try:
        module = parse_module(prog.text, str(prog.path))
        folder = root / prog.name
        sources = cbuild.emit(module, {}, folder, prefix="m", unpacked=prog.c_unpacked)
        fn = module.get("main")
        flags = list(cbuild.SANITIZE)
        if not fn.params:  # issue 14 item 2: --emit-main of a function without parameters warns
            flags.remove("-Werror")
        exe = folder / "m_san"
        r = subprocess.run([cbuild.CC, *flags, "m.c", "m_main.c", "-lm", "-o", exe.name], cwd=folder,
                           capture_output=True, text=True)
        if r.returncode != 0:
            return CRun(None, None, f"cc failed:\n{r.stderr}")
        built = cbuild.Built(folder, exe, sources, True)
        dims = resolve_dims(fn, prog.dims)
        args = random_inputs(fn, dims, 0)
        ref = Interpreter(module).run("main", args, prog.dims or None)
        return CRun(cbuild.run_c(built, args, prog.dims), ref, None)
    except Exception as e:  # reported by the test of the program
        return CRun(None, None, f"{type(e).__name__}: {e}")


@pytest.fixture(scope="session")
def c_runs(tmp_path_factory) -> dict[str, CRun]:
    if cbuild.CC is None:
        pytest.skip("no C compiler (cc) on this machine")
    root = tmp_path_factory.mktemp("tvm_c")
    progs = [p for p in all_programs() if p.c]
    with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        runs = list(pool.map(lambda p: _build_and_run(p, root), progs))
    return {p.name: r for p, r in zip(progs, runs)}


@pytest.fixture
def c_check(c_runs):
    """``c_check(name)``: the program, built for C under ASan/UBSan, agrees with the
    interpreter within the dtype's tolerance."""
    def check(name: str) -> None:
        run = c_runs.get(name)
        assert run is not None, f"{name} is not marked '# c: yes'"
        assert run.error is None, run.error
        cbuild.assert_close(run.outputs, run.reference, name)
    return check

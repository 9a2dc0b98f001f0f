"""The C half of the ports: every program marked ``# c: yes`` (or ``unpacked``) is emitted once;
each model's ``PREFIX.c`` and ``PREFIX_main.c`` become one translation unit (its ``main()``
renamed), and all of them are linked with a small dispatcher into two sanitized executables
(AddressSanitizer and UndefinedBehaviorSanitizer, ``-Werror``), compiled in parallel the
first time a test asks; then each
model runs on the same random inputs as the interpreter."""

from __future__ import annotations

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


FLAGS = [f for f in cbuild.SANITIZE if f != "-g"]
"""tests/backend/c's sanitizer flags (-Werror included) without debug information."""


@dataclass
class CRun:
    outputs: list[np.ndarray] | None
    reference: object
    error: str | None


@dataclass
class _Model:
    prog: Program
    prefix: str
    sources: object = None  # the emitted CSources
    error: str | None = None


def _emit(model: _Model, folder: Path) -> None:
    try:
        module = parse_module(model.prog.text, str(model.prog.path))
        model.sources = cbuild.emit(
            module, {}, folder, prefix=model.prefix, unpacked=model.prog.c_unpacked
        )
        wrap = [f"#define main {model.prefix}_entry"]
        if not module.get("main").params:  # issue 14 item 2: an unused read_file without parameters
            wrap.append('#pragma GCC diagnostic ignored "-Wunused-function"')
        wrap.append(f'#include "{model.prefix}.c"')
        wrap.append(f'#include "{model.prefix}_main.c"')
        (folder / f"{model.prefix}_wrap.c").write_text("\n".join(wrap) + "\n")
    except Exception as e:  # noqa: BLE001 - reported by the test of the program
        model.error = f"{type(e).__name__}: {e}"


def _link(models: list[_Model], folder: Path, exe: str) -> str | None:
    """Compile and link ``models`` and a dispatcher into ``exe``; returns cc's complaint."""
    lines = ["#include <string.h>", "#include <stdio.h>"]
    lines += [f"int {m.prefix}_entry(int argc, char **argv);" for m in models]
    lines += ["int main(int argc, char **argv) {", "  if (argc < 2) return 2;"]
    lines += [
        f'  if (!strcmp(argv[1], "{m.prefix}")) return {m.prefix}_entry(argc - 1, argv + 1);'
        for m in models
    ]
    lines += ['  fprintf(stderr, "no model %s\\n", argv[1]);', "  return 2;", "}"]
    (folder / f"{exe}.c").write_text("\n".join(lines) + "\n")
    files = [f"{exe}.c"] + [f"{m.prefix}_wrap.c" for m in models]  # one translation unit per model
    r = subprocess.run(
        [cbuild.CC, *FLAGS, *files, "-lm", "-o", exe], cwd=folder, capture_output=True, text=True
    )
    if r.returncode != 0 or r.stderr:
        return f"cc {' '.join(FLAGS)} failed:\n{r.stderr}"
    return None


def _run(model: _Model, folder: Path, exe: str) -> CRun:
    try:
        module = parse_module(model.prog.text, str(model.prog.path))
        fn = module.get("main")
        dims = model.prog.dims
        args = random_inputs(fn, resolve_dims(fn, dims), 0)
        ref = Interpreter(module).run("main", args, dims or None)
        # run_c runs [exe, files..., dims...]: a one-line launcher puts the model's name first.
        launcher = folder / f"run_{model.prefix}"
        launcher.write_text(f'#!/bin/sh\nexec "{folder / exe}" {model.prefix} "$@"\n')
        launcher.chmod(0o755)
        built = cbuild.Built(folder, launcher, model.sources, True)
        return CRun(cbuild.run_c(built, args, dims, tag=model.prefix), ref, None)
    except Exception as e:  # noqa: BLE001 - reported by the test of the program
        return CRun(None, None, f"{type(e).__name__}: {e}")


def _wanted(session) -> set[str]:
    """The C programs the collected tests name (so running one file builds only its own)."""
    texts = {Path(str(item.fspath)).read_text() for item in session.items}
    return {p.name for p in all_programs() if p.c and any(f'"{p.name}"' in t for t in texts)}


@pytest.fixture(scope="session")
def c_runs(request, tmp_path_factory) -> dict[str, CRun]:
    if cbuild.CC is None:
        pytest.skip("no C compiler (cc) on this machine")
    folder = tmp_path_factory.mktemp("tvm_c")
    wanted = _wanted(request.session)
    models = [
        _Model(p, f"m{i}") for i, p in enumerate(q for q in all_programs() if q.name in wanted)
    ]
    for m in models:
        _emit(m, folder)
    ok = [m for m in models if m.error is None]
    halves = {k: v for k, v in {"san_a": ok[0::2], "san_b": ok[1::2]}.items() if v}
    with ThreadPoolExecutor(max_workers=2) as pool:
        errors = dict(zip(halves, pool.map(lambda kv: _link(kv[1], folder, kv[0]), halves.items())))
    runs: dict[str, CRun] = {}
    for exe, ms in halves.items():
        for m in ms:
            runs[m.prog.name] = (
                CRun(None, None, errors[exe]) if errors[exe] else _run(m, folder, exe)
            )
    for m in models:
        if m.error is not None:
            runs[m.prog.name] = CRun(None, None, m.error)
    return runs


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

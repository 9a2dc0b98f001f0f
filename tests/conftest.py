"""Settings every test shares.

Hypothesis runs without its per-example deadline: a deadline is a timing assertion, and the
machines the tests run on are shared and busy (a 0.1 ms example once took 290 ms under
load and failed as "flaky"). Speed is measured by the benchmarks, never by a test.

In CI (the environment variable ``CI`` set, as CI runners set it: ``CI=true``) hypothesis is
derandomized: every run draws the same examples, so a red CI run is a change of the code,
never a new draw; a failing example is printed with its reproduction blob. Locally the
draws stay random (and failures are replayed from the ``.hypothesis`` database), so the
properties keep looking for new counterexamples.

Builds that tests in several folders need are made once for the session (:func:`squeezenet_c`).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("relaxc", deadline=None)
settings.register_profile(
    "ci", parent=settings.get_profile("relaxc"), derandomize=True, database=None, print_blob=True
)


def in_ci(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """``CI`` is set to something other than empty, ``0`` or ``false``."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


settings.load_profile("ci" if in_ci() else "relaxc")


@pytest.fixture(scope="session")
def squeezenet_c(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Any]:
    """SqueezeNet (the ONNX zoo's light model with random weights) through the c pipeline,
    emitted with its weights inline and built strict, once for the session:
    ``(import result, c pipeline output, Built)``. tests/backend/c/test_weights_file.py and
    tests/passes/test_compute_in_place.py built the same program each (about 8 s of cc
    apiece). Read it, never change it: each test runs it with its own ``tag``."""
    pytest.importorskip("onnx")
    from relaxc.backend.c import emit_c
    from relaxc.frontend.onnx import import_onnx

    from .backend.c.cbuild import CC, compile_c, compile_module, write_sources
    from .frontend.onnx.test_model_zoo import with_random_weights, zoo_model

    if CC is None:
        pytest.skip("no C compiler (cc) on this machine")
    result = import_onnx(with_random_weights(zoo_model("squeezenet")))
    compiled = compile_module(result.module)
    sources = emit_c(compiled, result.weights, prefix="sq", emit_main=True)
    folder = tmp_path_factory.mktemp("squeezenet_c")
    write_sources(folder, sources)
    return result, compiled, compile_c(folder, sources)

"""Settings every test shares.

Hypothesis runs without its per-example deadline: a deadline is a timing assertion, and the
machines the tests run on are shared and busy (a 0.1 ms example once took 290 ms under
load and failed as "flaky"). Speed is measured by the benchmarks, never by a test.

Builds that tests in several folders need are made once for the session (:func:`squeezenet_c`).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("relaxc", deadline=None)
settings.load_profile("relaxc")


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
    # Inline on purpose (relaxc build -t c would put squeezenet's 4.9 MB of weights in a
    # file): test_weights_file.py compares its file build with this one.
    sources = emit_c(compiled, result.weights, prefix="sq", emit_main=True, constants="inline")
    folder = tmp_path_factory.mktemp("squeezenet_c")
    write_sources(folder, sources)
    return result, compiled, compile_c(folder, sources)

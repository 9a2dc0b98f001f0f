"""Generated programs (views, aliases, tuples, projections, splits, returned parameters and
duplicates, primitive calls, symbolic dims) through the C target, under ASan and UBSan,
against the interpreter; packed and unpacked."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings

from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from tests.strategies import programs

from .cbuild import assert_close, compile_c, emit, needs_cc, run_c

pytestmark = needs_cc
_counter = itertools.count()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("c_generated")


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=programs(max_ops=10))
def test_generated_programs_match_the_interpreter(workdir: Path, prog) -> None:
    # The C target refuses calls of non-primitive functions and unbounded allocations (tested
    # elsewhere); everything else must compile clean and compute what the interpreter does.
    assume("call @helper" not in prog.text)
    assume("n" not in prog.dims or "upper_bounds" in prog.text)
    module = parse_module(prog.text, "gen.rx")
    fn = module.get("main")
    env = resolve_dims(fn, prog.dims)
    args = random_inputs(fn, env, seed=1)
    want = Interpreter(module, {}).run("main", args, env)
    k = next(_counter)
    for mode in ("packed", "unpacked"):
        folder = workdir / f"{k}_{mode}"
        built = compile_c(folder, emit(module, {}, folder, unpacked=mode == "unpacked"), sanitize=True)
        assert_close(run_c(built, args, env), want, f"{mode}\n{prog.text}")

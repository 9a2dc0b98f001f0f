"""The C kernels of the reduction and index-producing ops against the reference kernels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.inputs import random_inputs
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from relaxc.ir.types import TensorType, type_to_str
from relaxc.ir.verifier import verify_function

from .cbuild import assert_close, build, needs_cc, run_c

pytestmark = needs_cc


def program(params: str, body: str) -> str:
    """``fn @main(params)`` returning every tensor ``body`` binds (types from the verifier)."""
    names = [ln.split("=")[0].strip().lstrip("%") for ln in body.splitlines() if ln.strip()]
    probe = parse_module(f"fn @main({params}) -> Tuple[] {{\n{body}\n  return ()\n}}", "p.rx")
    types = verify_function(probe.get("main"), probe)
    rets = [n for n in names if isinstance(types[n], TensorType)]
    ret_type = "Tuple[" + ", ".join(type_to_str(types[n]) for n in rets) + "]"
    ret = ", ".join("%" + n for n in rets)
    return f"fn @main({params}) -> {ret_type} {{\n{body}\n  return ({ret})\n}}\n"


def check(
    tmp_path: Path,
    params: str,
    body: str,
    dims: dict[str, int] | None = None,
    unpacked: bool = False,
) -> None:
    """The program of ``body`` in C (strict, sanitized) against the interpreter on two
    random inputs."""
    text = program(params, body)
    module = parse_module(text, "t.rx")
    built = build(text, tmp_path, unpacked=unpacked, sanitize=True)
    for seed in (0, 1):
        args = random_inputs(module.get("main"), dims or {}, seed)
        with np.errstate(all="ignore"):
            want = Interpreter(module).run("main", args, dims)
        assert_close(run_c(built, args, dims), want, f"seed {seed}")


ARANGE = """
  %a = arange(start=3, delta=-2, length=5, dtype={t})
  %b = arange(start=0, delta=1, length=n, dtype={t})
"""


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "i64", "i32", "i8", "u8"])
def test_arange(tmp_path: Path, dtype: str) -> None:
    body = ARANGE.replace("{t}", dtype)
    if dtype == "u8":
        body = body.replace("delta=-2", "delta=2")
    # a symbolic length is not bound by any input: the packed convention cannot call it
    check(tmp_path, "%x: Tensor[(n,), f32]", body, {"n": 6}, unpacked=True)

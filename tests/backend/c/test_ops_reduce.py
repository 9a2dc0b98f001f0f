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
    for seed in (0, 1, 2):
        args = random_inputs(module.get("main"), dims or {}, seed)
        if seed == 2:
            if not any(a.dtype.kind == "f" for a in args):
                continue
            for a in args:  # IEEE specials: NaN propagates, infinities stay
                if a.dtype.kind == "f" and a.size >= 8:
                    a.reshape(-1)[[1, 5, 6]] = [np.nan, np.inf, -np.inf]
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


CALLS = {
    "sum": "sum(%x, axes=1, keepdims=true)",
    "max": "max(%x, axes=1, keepdims=true)",
    "min": "min(%x, axes=1, keepdims=true)",
    "prod": "prod(%x, axes=1, keepdims=true)",
    "sum_square": "sum_square(%x, axes=1, keepdims=true)",
    "l1_norm": "l1_norm(%x, axes=1, keepdims=true)",
    "mean": "mean(%x, axes=1, keepdims=true)",
    "l2_norm": "l2_norm(%x, axes=1, keepdims=true)",
    "log_sum": "log_sum(%x, axes=1, keepdims=true)",
    "log_sum_exp": "log_sum_exp(%x, axes=1, keepdims=true)",
}
"""One call of each reduction; :func:`reductions_body` adds every axis, all and none."""
FLOAT_ONLY = ("mean", "l2_norm", "log_sum", "log_sum_exp")


def reductions_body(dtype: str) -> str:
    ops = [op for op in CALLS if dtype in ("f32", "f64", "f16") or op not in FLOAT_ONLY]
    if dtype == "bool":
        ops = ["max", "min"]
    lines = []
    for op in ops:
        one = CALLS[op]
        lines += [
            f"  %{op}_1 = {one}",
            f"  %{op}_all = {one.replace('axes=1, keepdims=true', 'keepdims=false')}",
            f"  %{op}_02 = {one.replace('axes=1, keepdims=true', 'axes=(0, -1)')}",
            f"  %{op}_none = {one.replace('axes=1', 'axes=()')}",
        ]
    return "\n".join(lines)


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "i8", "i32", "i64", "u8", "u32", "bool"])
def test_reductions(tmp_path: Path, dtype: str) -> None:
    check(tmp_path, f"%x: Tensor[(2, 3, 4), {dtype}]", reductions_body(dtype))


@pytest.mark.parametrize("dtype", ["f32", "i16"])
def test_reductions_over_an_empty_axis_give_the_identity(tmp_path: Path, dtype: str) -> None:
    """An axis whose symbolic length is 0 in this run: every reduction gives its identity."""
    text = program(f"%x: Tensor[(2, n, 4), {dtype}]", reductions_body(dtype))
    module = parse_module(text, "t.rx")
    built = build(text, tmp_path, sanitize=True)
    for n in (0, 3):
        args = random_inputs(module.get("main"), {"n": n}, n)
        with np.errstate(all="ignore"):
            want = Interpreter(module).run("main", args, {"n": n})
        assert_close(run_c(built, args, {"n": n}), want, f"n={n}")


ARG = """
  %amax = argmax(%x, axis=1)
  %amaxl = argmax(%x, axis=-1, keepdims=false, select_last_index=true)
  %amin = argmin(%x, axis=0, keepdims=false)
  %aminl = argmin(%x, axis=2, select_last_index=true)
"""


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64", "i8", "u8", "i64", "bool"])
def test_argmax_argmin(tmp_path: Path, dtype: str) -> None:
    check(tmp_path, f"%x: Tensor[(2, 3, 4), {dtype}]", ARG)


def test_argmax_ties_and_nan(tmp_path: Path) -> None:
    text = program("%x: Tensor[(2, 4), f32]", ARG.replace("axis=2", "axis=1"))
    module = parse_module(text, "t.rx")
    built = build(text, tmp_path)
    x = np.array([[1, 3, 3, 1], [np.nan, 2, np.nan, -1]], np.float32)
    assert_close(run_c(built, [x]), Interpreter(module).run("main", [x]))

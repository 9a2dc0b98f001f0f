"""The C kernels of the N-d window ops and the CNN normalizations (conv_nd, max_pool_nd,
avg_pool_nd, lp_pool_nd, group_norm, mean_variance_norm, inv_std_dev) against the reference
interpreter, on float and integer dtypes, one program per dtype (one sanitized build)."""

# ruff: noqa: E501 (the .rx calls are one line each)

from __future__ import annotations

import numpy as np
import pytest

from relaxc.backend.inputs import random_inputs
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from relaxc.ir.types import TensorType, type_to_str
from relaxc.ir.verifier import verify_function

from .cbuild import assert_close, build, needs_cc, run_c

pytestmark = needs_cc

PARAMS = (
    "%x5: Tensor[(2, 4, 5, 6, 5), {t}], %w5: Tensor[(6, 2, 2, 3, 2), {t}], "
    "%b6: Tensor[(6,), {t}], %x3: Tensor[(2, 4, 9), {t}], %w3: Tensor[(3, 4, 3), {t}], "
    "%s4: Tensor[(4,), {t}], %t4: Tensor[(4,), {t}]"
)

NUMERIC = """
  %conv3 = conv_nd(%x5, %w5, %b6, strides=(1, 2, 1), padding=(1, 0, 1, 0, 1, 1), dilation=(1, 1, 2), groups=2)
  %conv1 = conv_nd(%x3, %w3, strides=2, padding=(1, 2))
  %maxp = max_pool_nd(%x5, pool_size=(3, 2, 3), strides=(2, 1, 2), padding=(1, 0, 1, 1, 1, 0), dilation=(1, 2, 1), ceil_mode=true)
  %maxp1 = max_pool_nd(%x3, pool_size=(2,), padding=(1,))
  %argmax = max_pool_indices(%x5, pool_size=(3, 2, 3), strides=(2, 1, 2), padding=(1, 0, 1, 1, 1, 0), ceil_mode=true)
  %argmaxc = max_pool_indices(%x5, pool_size=(2, 2, 2), strides=(1, 2, 1), padding=1, dilation=(2, 1, 1), storage_order=1)
  %argmax1 = max_pool_indices(%x3, pool_size=(3,), strides=(2,), padding=(1,))
"""

FLOAT_ONLY = """
  %avgp = avg_pool_nd(%x5, pool_size=(3, 2, 3), strides=(2, 1, 2), padding=(1, 0, 1, 1, 1, 0), dilation=(1, 2, 1), ceil_mode=true, count_include_pad=true)
  %avgp0 = avg_pool_nd(%x5, pool_size=(2, 3, 2), strides=2, padding=1, ceil_mode=true)
  %lp3 = lp_pool_nd(%x5, pool_size=(2, 2, 2), p=3.0)
  %lp2 = lp_pool_nd(%x3, pool_size=(3,), padding=(1,), p=2.0)
  %lp1 = lp_pool_nd(%x3, pool_size=(2,), strides=(2,), p=1.0)
  %gn = group_norm(%x5, %s4, %t4, num_groups=2)
  %inorm = group_norm(%x3, %s4, %t4, num_groups=4, epsilon=0.01)
  %mvn = mean_variance_norm(%x5, axes=(0, 2, 3))
  %isd = inv_std_dev(%x5, axes=(2, 3, 4), epsilon=0.001)
  %isd2 = inv_std_dev(%x3, axes=(1,), keepdims=false)
"""

DTYPES = ["f32", "f64", "f16", "i8", "i32", "u8", "i64"]


def program(dtype: str) -> str:
    body = NUMERIC + (FLOAT_ONLY if dtype[0] == "f" else "")
    params = PARAMS.replace("{t}", dtype)
    names = [line.split("=")[0].strip().lstrip("%") for line in body.splitlines() if line.strip()]
    probe = parse_module(
        f"fn @main({params}) -> Tensor[(6,), {dtype}] {{{body}  return %b6\n}}", "p.rx"
    )
    types = verify_function(probe.get("main"), probe)
    assert all(isinstance(types[n], TensorType) for n in names)
    ret = "Tuple[" + ", ".join(type_to_str(types[n]) for n in names) + "]"
    rets = ", ".join("%" + n for n in names)
    return f"fn @main({params}) -> {ret} {{{body}  return ({rets})\n}}\n"


@pytest.mark.parametrize("dtype", DTYPES)
def test_cnn_ops_match_the_reference(tmp_path, dtype: str) -> None:
    text = program(dtype)
    module = parse_module(text, f"{dtype}.rx")
    built = build(text, tmp_path, prefix=f"cnn_{dtype}", sanitize=dtype == "f32")
    for seed in (0, 1):
        args = random_inputs(module.get("main"), {}, seed)
        if seed and dtype[0] == "f":
            args[0].reshape(-1)[[3, 50]] = [np.nan, -np.inf]
        with np.errstate(all="ignore"):
            want = Interpreter(module, {}).run("main", args)
        got = run_c(built, args, tag=f"s{seed}")
        names = [v.name for v in module.get("main").ret.fields]
        for name, g, w in zip(names, got, want):
            assert_close([g], w, f"{dtype} %{name} (seed {seed})")

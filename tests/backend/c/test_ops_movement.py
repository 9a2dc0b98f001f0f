"""The C kernels of pad, tile, gather_elements, gather_nd, scatter_nd, scatter_elements,
one_hot and trilu against the reference kernels, one program per dtype, built strict (and
sanitized for f32 and i8): every pad mode with crops, indices that are negative and out of
range (they clip), duplicate scatter indices under every reduction, and a scatter whose
data dies at it (so its output is planned over the data)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.inputs import random_inputs
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from relaxc.ir.types import type_to_str
from relaxc.ir.verifier import verify_function

from .cbuild import assert_close, build_all, emit, needs_cc, run_c

pytestmark = needs_cc

PARAMS = "%a: Tensor[(2, 3, 4), {t}], %u: Tensor[(2, 4), {t}], %v: Tensor[(2,), {t}]"

BODY = """
  %i2 = const([[1, -1], [5, 0]], i64)
  %ie = const([[[0, 2, -1, 7]], [[1, 1, 0, -4]]], i32)
  %ue = strided_slice(%a, begin=(0,), end=(1,), axes=(1,))
  %ind = const([[1, 2], [0, -1], [9, 1]], i64)
  %inb = const([[[2], [0]], [[-1], [3]]], i64)
  %hot = const([[0, 3], [-1, 7]], i64)
  %kk = const([1], i32)
  %pc = pad(%a, pads=(0, 1, 2, 1, 0, -1), value=2.5)
  %pr = pad(%a, pads=(1, 2, 5, 0, 3, 6), mode="reflect")
  %pe = pad(%a, pads=(0, -1, 2, 1, 2, 3), mode="edge")
  %pw = pad(%a, pads=(1, 4, -1, 2, 7, 1), mode="wrap")
  %ti = tile(%a, repeats=(2, 1, 3))
  %ge = gather_elements(%a, %ie, axis=2)
  %ge0 = gather_elements(%a, %ie, axis=0)
  %gn = gather_nd(%a, %ind)
  %gb = gather_nd(%a, %inb, batch_dims=1)
  %sn = scatter_nd(%a, %i2, %u, reduction="{red}")
  %snn = scatter_nd(%a, %i2, %u)
  %se = scatter_elements(%a, %ie, %ue, axis=2, reduction="{red}")
  %oh = one_hot(%hot, %v, depth=4, axis=1)
  %oh2 = one_hot(%hot, %v, depth=3)
  %tu = trilu(%a, k=1)
  %tl = trilu(%a, k=-1, upper=false)
  %tr = trilu(%a, k=2)
  %tk = trilu(%a, %kk, upper=false)
  %dies = add(%a, %a)
  %last = scatter_nd(%dies, %i2, %u, reduction="{red}")
"""

RETS = "%pc %pr %pe %pw %ti %ge %ge0 %gn %gb %sn %snn %se %oh %oh2 %tu %tl %tr %tk %last".split()


def program(dtype: str, reduction: str) -> str:
    body = BODY.replace("{red}", reduction).replace("{t}", dtype)
    if dtype == "bool":
        body = body.replace("  %dies = add(%a, %a)\n", "  %dies = transpose(%a, axes=(0, 1, 2))\n")
    params = PARAMS.replace("{t}", dtype)
    probe = parse_module(
        f"fn @main({params}) -> Tensor[(2, 3, 4), {dtype}] {{{body}  return %a\n}}", "p.rx"
    )
    types = verify_function(probe.get("main"), probe)
    ret = "Tuple[" + ", ".join(type_to_str(types[n.lstrip("%")]) for n in RETS) + "]"
    return f"fn @main({params}) -> {ret} {{{body}  return ({', '.join(RETS)})\n}}\n"


CASES = [
    ("f32", "add"),
    ("f32", "max"),
    ("f16", "mul"),
    ("f64", "min"),
    ("i64", "add"),
    ("i32", "max"),
    ("i8", "mul"),
    ("u8", "min"),
    ("bool", "none"),
]
SANITIZED = {("f32", "add"), ("i8", "mul")}


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("c_movement")
    jobs, keys, mods = [], [], {}
    for dtype, red in CASES:
        module = parse_module(program(dtype, red), f"{dtype}.rx")
        mods[(dtype, red)] = module
        folder = root / f"{dtype}_{red}"
        sources = emit(module, {}, folder, prefix=f"mv_{dtype}")
        for sanitize in (False, True) if (dtype, red) in SANITIZED else (False,):
            jobs.append((folder, sources, sanitize))
            keys.append((dtype, red, sanitize))
    return dict(zip(keys, build_all(jobs))), mods


@pytest.mark.parametrize(
    "dtype, red, sanitize",
    [(d, r, False) for d, r in CASES] + [(d, r, True) for d, r in sorted(SANITIZED)],
)
def test_movement_ops_match_the_reference(builds, dtype: str, red: str, sanitize: bool) -> None:
    built, mods = builds
    module = mods[(dtype, red)]
    for seed in (0, 1):
        args = random_inputs(module.get("main"), {}, seed)
        if dtype in ("f32", "f16", "f64") and seed:
            args[0].reshape(-1)[3] = np.nan
            args[1].reshape(-1)[2] = np.nan
        with np.errstate(all="ignore"):
            want = Interpreter(module, {}).run("main", args)
        got = run_c(built[(dtype, red, sanitize)], args, tag=f"s{seed}")
        for name, g, w in zip(RETS, got, want):
            assert_close([g], w, f"{dtype} {name} (seed {seed})")


def test_the_reference_clips_indices_and_keeps_update_order() -> None:
    """What the C is compared with: out-of-range indices clip, the last duplicate wins."""
    module = parse_module(program("i64", "add"), "p.rx")
    args = [
        np.arange(24, dtype=np.int64).reshape(2, 3, 4),
        np.array([[10, 20, 30, 40], [50, 60, 70, 80]], np.int64),
        np.array([0, 1], np.int64),
    ]
    out = dict(zip(RETS, Interpreter(module, {}).run("main", args)))
    # %ind rows (1, 2), (0, -1) -> (0, 2), (9, 1) -> (1, 1)
    np.testing.assert_array_equal(out["%gn"], args[0][[1, 0, 1], [2, 2, 1]])
    # %i2 = [[1, -1], [5, 0]]: (1, 2) and (1, 0) get a row each, added
    want = args[0].copy()
    want[1, 2] += args[1][0]
    want[1, 0] += args[1][1]
    np.testing.assert_array_equal(out["%sn"], want)
    want = args[0].copy()
    want[1, 2] = args[1][0]
    want[1, 0] = args[1][1]
    np.testing.assert_array_equal(out["%snn"], want)


def test_reflect_pad_of_an_axis_of_length_one(tmp_path: Path) -> None:
    """Fuzz seed 57: the static length of one reflects to 0, with no dead ``% 0`` that cc
    rejects (-Werror=div-by-zero)."""
    from .test_ops_reduce import check

    body = (
        '  %y = pad(%x, pads=(-1, 1, -1, 0), mode="reflect")\n'
        '  %z = pad(%x, pads=(0, 2, 0, 3), mode="reflect")'
    )
    check(tmp_path, "%x: Tensor[(3, 1), i32]", body)

"""The C kernels of the elementwise ops of issue 30 (activations, unary math, comparisons,
logic, bit operations, mod) for every dtype each takes, against the reference kernels: one
program per dtype, compiled strict (and sanitized for a few dtypes), run on random inputs
with NaN, infinities, zeros, -1 and each integer type's extremes mixed in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from relaxc.ir.nodes import Module
from relaxc.ir.types import TensorType, numpy_dtype, type_to_str
from relaxc.ir.verifier import verify_function

from .cbuild import assert_close, build, build_all, emit, needs_cc, run_c

pytestmark = needs_cc

FLOATS = ["f32", "f64", "f16"]
INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
DTYPES = FLOATS + INTS + ["bool"]
SANITIZED = ["f16", "i8", "u32", "u64"]

PARAMS = "%a: Tensor[(3, 4, 5), {t}], %b: Tensor[(3, 4, 5), {t}], %v: Tensor[(5,), {t}]"

COMPARE = """
  %eq = equal(%a, %b)
  %lt = less(%a, %b)
  %gt = greater(%a, %v)
  %le = less_equal(%v, %a)
  %ge = greater_equal(%a, %b)
  %eqs = equal(%a, %a)
"""

NUMERIC = """
  %sign = sign(%a)
  %prelu = prelu(%a, %v)
  %prelu2 = prelu(%a, %b)
  %shrink = shrink(%a)
  %shrink2 = shrink(%a, bias=1.5, lambd=2.0)
  %shrink3 = shrink(%a, bias=-1.0, lambd=-0.5)
  %modf = mod(%a, %b, fmod=true)
  %mod = mod(%a, %b)
  %modv = mod(%a, %v)
"""

INT_ONLY = """
  %band = bitwise_and(%a, %b)
  %bor = bitwise_or(%a, %v)
  %bxor = bitwise_xor(%a, %b)
  %bnot = bitwise_not(%a)
  %shl = bit_shift(%a, %b)
  %shr = bit_shift(%a, %v, direction="right")
"""

FLOAT_ONLY = """
  %reciprocal = reciprocal(%a)
  %floor = floor(%a)
  %ceil = ceil(%a)
  %round = round(%a)
  %sin = sin(%a)
  %cos = cos(%a)
  %tan = tan(%a)
  %asin = asin(%a)
  %acos = acos(%a)
  %atan = atan(%a)
  %sinh = sinh(%a)
  %cosh = cosh(%a)
  %asinh = asinh(%a)
  %acosh = acosh(%a)
  %atanh = atanh(%a)
  %softplus = softplus(%a)
  %softsign = softsign(%a)
  %mish = mish(%a)
  %gelu_tanh = gelu_tanh(%a)
  %elu = elu(%a)
  %elu2 = elu(%a, alpha=0.25)
  %selu = selu(%a)
  %selu2 = selu(%a, alpha=2.0, gamma=0.5)
  %celu = celu(%a)
  %celu2 = celu(%a, alpha=-1.5)
  %trelu = thresholded_relu(%a)
  %trelu2 = thresholded_relu(%a, alpha=-0.5)
  %isnan = isnan(%a)
  %isinf = isinf(%a)
  %isposinf = isinf(%a, detect_negative=false)
  %isneginf = isinf(%a, detect_positive=false)
  %isnone = isinf(%a, detect_negative=false, detect_positive=false)
"""

BOOL_ONLY = """
  %and = logical_and(%a, %b)
  %or = logical_or(%a, %v)
  %xor = logical_xor(%a, %b)
  %not = logical_not(%a)
"""


def body_of(dtype: str) -> str:
    body = COMPARE
    if dtype != "bool":
        body += NUMERIC
    if dtype in INTS:
        body += INT_ONLY
    if dtype in FLOATS:
        body += FLOAT_ONLY
    if dtype == "bool":
        body += BOOL_ONLY
    return body


def program(dtype: str) -> Module:
    """One function computing every op of :func:`body_of` on ``dtype``, returning them all."""
    body = body_of(dtype)
    params = PARAMS.replace("{t}", dtype)
    names = [line.split("=")[0].strip().lstrip("%") for line in body.splitlines() if line.strip()]
    probe = parse_module(
        f"fn @main({params}) -> Tensor[(3, 4, 5), {dtype}] {{{body}  return %a\n}}", "p.rx"
    )
    types = verify_function(probe.get("main"), probe)
    assert all(isinstance(types[n], TensorType) for n in names)
    ret = "Tuple[" + ", ".join(type_to_str(types[n]) for n in names) + "]"
    text = (
        f"fn @main({params}) -> {ret} {{{body}  return ({', '.join('%' + n for n in names)})\n}}\n"
    )
    return parse_module(text, f"{dtype}.rx")


def inputs(dtype: str, seed: int) -> list[np.ndarray]:
    """a, b (3, 4, 5) and v (5,): floats in [-4, 4] at quarter steps (halves for round) with
    NaN, +-inf, -0 and 0 mixed in; integers over the type's range with 0, 1, -1, the extremes
    and small shifts; bools at random."""
    rng = np.random.default_rng(seed)
    npt = numpy_dtype(dtype)
    shapes = [(3, 4, 5), (3, 4, 5), (5,)]
    if dtype == "bool":
        return [rng.integers(0, 2, size=s).astype(bool) for s in shapes]
    if dtype in FLOATS:
        out = [(rng.integers(-16, 17, size=s) / 4.0).astype(npt) for s in shapes]
        a = out[0].reshape(-1)
        a[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.5, -2.5]
        out[1].reshape(-1)[::7] = 0
        out[0][1] = rng.uniform(-1, 1, size=(4, 5)).astype(npt)  # inside asin's domain
        return out
    info = np.iinfo(npt)
    out = [
        rng.integers(int(info.min), int(info.max), size=s, endpoint=True, dtype=npt) for s in shapes
    ]
    specials = [0, 1, int(info.max), int(info.min), 7]
    if info.min < 0:
        specials += [-1, -7]
    out[0].reshape(-1)[: len(specials)] = specials
    out[1].reshape(-1)[: len(specials)] = specials[::-1]
    out[1].reshape(-1)[::5] = 0
    out[0][1] = rng.integers(-9 if info.min < 0 else 0, 10, size=(4, 5))
    out[1][1] = rng.integers(-3 if info.min < 0 else 0, 4, size=(4, 5))
    if dtype.startswith("u"):  # shift amounts around the width
        bits = 8 * np.dtype(npt).itemsize
        out[1][2] = rng.integers(0, bits + 3, size=(4, 5))
        out[2][:] = [0, 1, bits - 1, bits, bits + 1]
    return out


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("c_elementwise")
    jobs, keys, progs = [], [], {}
    for dtype in DTYPES:
        module = program(dtype)
        progs[dtype] = module
        folder = root / dtype
        sources = emit(module, {}, folder, prefix=f"ew_{dtype}")
        for sanitize in (False, True) if dtype in SANITIZED else (False,):
            jobs.append((folder, sources, sanitize))
            keys.append((dtype, sanitize))
    return dict(zip(keys, build_all(jobs))), progs


@pytest.mark.parametrize(
    "dtype, sanitize",
    [(d, False) for d in DTYPES] + [(d, True) for d in SANITIZED],
    ids=DTYPES + [f"{d}-asan-ubsan" for d in SANITIZED],
)
def test_every_elementwise_op_matches_the_reference(builds, dtype: str, sanitize: bool) -> None:
    built, progs = builds
    module = progs[dtype]
    names = [v.name for v in module.get("main").ret.fields]
    for seed in (0, 1):
        args = inputs(dtype, seed)
        with np.errstate(all="ignore"):
            want = Interpreter(module, {}).run("main", args)
        got = run_c(built[(dtype, sanitize)], args, tag=f"s{seed}")
        for name, g, w in zip(names, got, want):
            assert_close([g], w, f"{dtype} %{name} (seed {seed})")


def test_comparisons_give_bools_in_c(builds) -> None:
    built, progs = builds
    got = run_c(built[("f32", False)], inputs("f32", 0), tag="b")
    names = [v.name for v in progs["f32"].get("main").ret.fields]
    eqs = got[names.index("eqs")]
    assert eqs.dtype == np.bool_
    # x == x is false exactly at the NaN.
    assert not eqs.reshape(-1)[0] and eqs.reshape(-1)[1:].all()


def test_celu_of_signed_zeros_is_plus_zero_as_the_interpreter(tmp_path: Path) -> None:
    """The sign of celu(-0) reaches the result through a reciprocal (fuzzer seed 138)."""
    text = """fn @main(%x: Tensor[(32,), f32]) -> Tensor[(32,), f32] {
  %c = celu(%x)
  %y = reciprocal(%c)
  return %y
}"""
    module = parse_module(text, "celu.rx")
    x = np.array([-0.0, 0.0] * 16, np.float32)
    want = Interpreter(module).run("main", [x])
    got = run_c(build(text, tmp_path), [x])
    np.testing.assert_array_equal(got[0], want)
    assert np.isposinf(got[0]).all()


U64_PROGRAM = """
fn @main(%a: Tensor[(8,), u64], %b: Tensor[(8,), u64], %f: Tensor[(8,), f64]) -> Tuple[Tensor[(8,), u64], Tensor[(8,), u64], Tensor[(8,), u64], Tensor[(8,), u64], Tensor[(8,), u64], Tensor[(8,), u64], Tensor[(8,), bool], Tensor[(8,), bool], Tensor[(8,), i64], Tensor[(8,), f64], Tensor[(8,), u64], Tensor[(8,), u8]] {
  %div = divide(%a, %b)
  %add = add(%a, %b)
  %sub = subtract(%a, %b)
  %mul = multiply(%a, %b)
  %mx = maximum(%a, %b)
  %mod = mod(%a, %b)
  %lt = less(%a, %b)
  %ge = greater_equal(%a, %b)
  %i = cast(%a, i64)
  %d = cast(%a, f64)
  %fu = cast(%f, u64)
  %u8 = cast(%a, u8)
  return (%div, %add, %sub, %mul, %mx, %mod, %lt, %ge, %i, %d, %fu, %u8)
}
"""  # noqa: E501


def test_u64_keeps_its_top_bit_in_c_and_on_the_interpreter(tmp_path) -> None:
    """u64 values at and above 2 ** 63 (which int64 and double cannot hold exactly): the
    arithmetic wraps modulo 2 ** 64, division is exact, comparisons are unsigned, and a
    float converts to u64 truncated and saturated at [0, 2 ** 64 - 1]."""
    top = 2**64 - 1
    a_vals = [top, 2**63 + 5, 2**63, 10, top - 1, 0, 7, 2**53 + 1]
    b_vals = [1, 2, 3, top, 0, 5, 2**63, 3]
    f_vals = [1.8e19, 9.3e18, -1.0, float("nan"), 3.7, 2.0**64, float("inf"), 2.0**63]
    a, b = np.array(a_vals, np.uint64), np.array(b_vals, np.uint64)
    f = np.array(f_vals, np.float64)
    m = 2**64
    want = [
        [x // y if y else 0 for x, y in zip(a_vals, b_vals)],
        [(x + y) % m for x, y in zip(a_vals, b_vals)],
        [(x - y) % m for x, y in zip(a_vals, b_vals)],
        [(x * y) % m for x, y in zip(a_vals, b_vals)],
        [max(x, y) for x, y in zip(a_vals, b_vals)],
        [x % y if y else 0 for x, y in zip(a_vals, b_vals)],
        [x < y for x, y in zip(a_vals, b_vals)],
        [x >= y for x, y in zip(a_vals, b_vals)],
        [x - m if x >= 2**63 else x for x in a_vals],
        [float(x) for x in a_vals],
        [
            0
            if v != v
            else min(top, max(0, int(v)))
            if abs(v) != float("inf")
            else (top if v > 0 else 0)
            for v in f_vals
        ],
        [x % 256 for x in a_vals],
    ]
    module = parse_module(U64_PROGRAM, "u64.rx")
    built = build(U64_PROGRAM, tmp_path, prefix="u64")
    interp = Interpreter(module, {}).run("main", [a, b, f])
    got_c = run_c(built, [a, b, f])
    for k, w in enumerate(want):
        for name, g in (("interpreter", interp[k]), ("C", got_c[k])):
            assert [x.item() for x in g] == w, f"{name} output {k}: {g}, expected {w}"

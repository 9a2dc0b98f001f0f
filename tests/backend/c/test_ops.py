"""Every kernel the C target has, for every dtype it supports, against the reference kernels.

One program per dtype computes every op (with broadcasting, odd attributes, padding, groups,
ceil mode, clipping indices, integer division by zero, NaN from log of negatives, ...) and
returns all results; it is compiled strict and sanitized, and run on the interpreter's
random inputs. Ops or dtypes the C target lacks must be refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.c import emit_c
from relaxc.backend.inputs import random_inputs
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Module
from relaxc.ir.types import TensorType, type_to_str
from relaxc.ir.verifier import verify_function

from .cbuild import assert_close, build, build_all, compile_module, emit, needs_cc, run_c

pytestmark = needs_cc

FLOATS = ["f32", "f64", "f16"]
INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]

PARAMS = (
    "%a: Tensor[(2, 3, 4, 5), {t}], %b: Tensor[(2, 3, 4, 5), {t}], %v: Tensor[(5,), {t}], "
    "%m: Tensor[(4, 5), {t}], %w: Tensor[(6, 5), {t}], %k: Tensor[(4, 3, 3, 3), {t}], "
    "%c: Tensor[(2, 3, 4, 5), bool], %idx: Tensor[(3,), i32]"
)

COMMON = """
  %concat = concat(%a, %b, axis=1)
  %parts = split(%a, 3, axis=1)
  %part1 = %parts.1
  %tr = transpose(%a, axes=(0, 2, 1, 3))
  %trr = transpose(%m)
  %ss = strided_slice(%a, begin=(0, 1), end=(2, 3), strides=(1, 2), axes=(1, 3))
  %ssn = strided_slice(%a, begin=(3,), end=(0,), strides=(-2,), axes=(2,))
  %take = take(%a, %idx, axis=2)
  %where = where(%c, %a, %b)
  %rs = reshape(%a, (6, 20))
  %flat = flatten(%a)
  %ex = expand_dims(%v, 0)
  %sq = squeeze(%ex, axes=0)
  %zeros = zeros(shape=(2, 3), dtype={t})
  %ones = ones(shape=(3,), dtype={t})
  %tobool = cast(%a, dtype=bool)
"""

NUMERIC = """
  %neg = negative(%a)
  %abs = abs(%a)
  %relu = relu(%a)
  %add = add(%a, %b)
  %sub = subtract(%a, %b)
  %mul = multiply(%a, %b)
  %div = divide(%a, %b)
  %pw = power(%a, %b)
  %mx = maximum(%a, %b)
  %mn = minimum(%a, %b)
  %badd = add(%a, %v)
  %bmul = multiply(%m, %a)
  %clip = clip(%a, -3.5, 4.5)
  %full = full(shape=(2, 2), fill_value=3, dtype={t})
  %sum = sum(%a, axes=(1, 3))
  %sumk = sum(%a, axes=2, keepdims=true)
  %max = max(%a, axes=(0, 2))
  %maxall = max(%a)
  %mm = matmul(%m, %trr)
  %bmm = matmul(%a, %trr)
  %dense = dense(%a, %w)
  %conv = conv2d(%a, %k, padding=(1, 2, 0, 1), strides=(1, 2))
  %mpool = max_pool2d(%a, pool_size=(2, 3), strides=(1, 2), padding=(1, 1), ceil_mode=true)
  %tof = cast(%a, dtype=f32)
  %toi8 = cast(%a, dtype=i8)
  %tou16 = cast(%a, dtype=u16)
"""

FLOAT_ONLY = """
  %exp = exp(%a)
  %log = log(%a)
  %sqrt = sqrt(%a)
  %rsqrt = rsqrt(%a)
  %tanh = tanh(%a)
  %sig = sigmoid(%a)
  %gelu = gelu(%a)
  %silu = silu(%a)
  %erf = erf(%a)
  %lrelu = leaky_relu(%a)
  %lrelu2 = leaky_relu(%a, 0.1)
  %lrelu3 = leaky_relu(%b, alpha=-1.5)
  %lrelu4 = leaky_relu(%a, alpha=1e+30)
  %densb = dense(%a, %w, %v6)
  %convd = conv2d(%a, %kd, padding=1, dilation=(2, 1), groups=3)
  %convb = conv2d(%a, %k, %v4, padding=1)
  %mpool2 = max_pool2d(%a, pool_size=2, dilation=(1, 2))
  %mpool3 = max_pool2d(%a, pool_size=3, strides=2, padding=1)
  %apool = avg_pool2d(%a, pool_size=(3, 2), strides=2, padding=(1, 1), ceil_mode=true)
  %apoolp = avg_pool2d(%a, pool_size=3, padding=1, count_include_pad=true)
  %gap = global_avg_pool2d(%a)
  %bn = batch_norm(%a, %g3, %b3, %m3, %var3, axis=1, epsilon=0.001)
  %ln = layer_norm(%a, %m, %m, axes=(-2, -1))
  %ln0 = layer_norm(%a, %g3, %b3, axes=1)
  %rms = rms_norm(%a, %v)
  %sm = softmax(%a, axis=1)
  %sml = softmax(%a)
  %lrn = lrn(%a, size=3, axis=1, alpha=0.01)
  %mean = mean(%a, axes=(0, 3), keepdims=true)
  %meanall = mean(%a)
  %toi32 = cast(%a, dtype=i32)
  %tou8 = cast(%a, dtype=u8)
  %tof64 = cast(%a, dtype=f64)
  %tof16 = cast(%a, dtype=f16)
"""

FLOAT_CONSTS = """
  %v6: Tensor[(6,), {t}] = const("v6")
  %v4: Tensor[(4,), {t}] = const("v4")
  %kd: Tensor[(6, 1, 2, 2), {t}] = const("kd")
  %g3: Tensor[(3,), {t}] = const("g3")
  %b3: Tensor[(3,), {t}] = const("b3")
  %m3: Tensor[(3,), {t}] = const("m3")
  %var3: Tensor[(3,), {t}] = const("var3")
"""

BOOL_ONLY = """
  %bmax = max(%c, axes=1)
  %ctof = cast(%c, dtype=f32)
  %ctoi = cast(%c, dtype=i16)
  %cconcat = concat(%c, %c, axis=0)
  %ctr = transpose(%c)
  %ctake = take(%c, %idx, axis=1)
  %cwhere = where(%c, %c, %c)
"""


def program(dtype: str) -> tuple[str, dict[str, np.ndarray]]:
    """The text of one program computing every op on ``dtype``, and its weights."""
    body = COMMON
    weights: dict[str, np.ndarray] = {}
    if dtype != "bool":
        body += NUMERIC
    if dtype in FLOATS:
        body = FLOAT_CONSTS + body + FLOAT_ONLY
        rng = np.random.default_rng(5)
        npt = {"f32": np.float32, "f64": np.float64, "f16": np.float16}[dtype]
        for name, shape in (
            ("v6", (6,)),
            ("v4", (4,)),
            ("kd", (6, 1, 2, 2)),
            ("g3", (3,)),
            ("b3", (3,)),
            ("m3", (3,)),
        ):
            weights[name] = rng.uniform(-1, 1, size=shape).astype(npt)
        weights["var3"] = rng.uniform(0.1, 2, size=(3,)).astype(npt)
    if dtype == "bool":
        body += BOOL_ONLY
    body = body.replace("{t}", dtype)
    params = PARAMS.replace("{t}", dtype)
    # The result type is every value's type: ask the verifier for them.
    names = [
        line.split("=")[0].strip().split(":")[0].lstrip("%")
        for line in body.splitlines()
        if line.strip()
    ]
    probe = parse_module(
        f"fn @main({params}) -> Tensor[(2, 3, 4, 5), {dtype}] {{{body}  return %a\n}}", "p.rx"
    )
    fn = probe.get("main")
    types = verify_function(fn, probe)
    rets = [n for n in names if n not in weights and isinstance(types[n], TensorType)]
    ret_type = "Tuple[" + ", ".join(type_to_str(types[n]) for n in rets) + "]"
    text = (
        f"fn @main({params}) -> {ret_type} {{{body}  return "
        f"({', '.join('%' + n for n in rets)})\n}}\n"
    )
    return text, weights


DTYPES = FLOATS + INTS + ["bool"]
SANITIZED = ["f32", "f16", "i8", "u32"]
"""Sanitized builds for one dtype of each code path (compiling all would double the test's time)."""


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("c_ops")
    jobs, keys, progs = [], [], {}
    for dtype in DTYPES:
        text, weights = program(dtype)
        module = parse_module(text, f"{dtype}.rx")
        progs[dtype] = (module, weights)
        folder = root / dtype
        sources = emit(module, weights, folder, prefix=f"ops_{dtype}")
        for sanitize in (False, True) if dtype in SANITIZED else (False,):
            jobs.append((folder, sources, sanitize))
            keys.append((dtype, sanitize))
    return dict(zip(keys, build_all(jobs))), progs


def special_inputs(module: Module, dtype: str, seed: int) -> list[np.ndarray]:
    """Random inputs, with zeros (division by zero), NaN and infinities mixed in for floats."""
    args = random_inputs(module.get("main"), {}, seed)
    a, b = args[0], args[1]
    b.reshape(-1)[::7] = 0
    if dtype in FLOATS:
        a.reshape(-1)[5] = np.nan
        a.reshape(-1)[7] = np.nan  # inside a max_pool2d window away from the border
        a.reshape(-1)[11] = np.inf
        a.reshape(-1)[17] = -np.inf
        a.reshape(-1)[23] = 0.0
    return args


@pytest.mark.parametrize(
    "dtype, sanitize",
    [(d, False) for d in DTYPES] + [(d, True) for d in SANITIZED],
    ids=[d for d in DTYPES] + [f"{d}-asan-ubsan" for d in SANITIZED],
)
def test_every_op_matches_the_reference(builds, dtype: str, sanitize: bool) -> None:
    built, progs = builds
    module, weights = progs[dtype]
    for seed in (0, 1):
        args = (
            special_inputs(module, dtype, seed)
            if seed
            else random_inputs(module.get("main"), {}, seed)
        )
        with np.errstate(all="ignore"):
            want = Interpreter(module, weights).run("main", args)
        got = run_c(built[(dtype, sanitize)], args, tag=f"s{seed}")
        names = [v.name for v in module.get("main").ret.fields]
        for name, g, w in zip(names, got, want):
            assert_close([g], w, f"{dtype} %{name} (seed {seed})")


ERF_LEAKY = """
fn @f(%a: Tensor[(4, 8), {t}]) -> Tensor[(4, 8), {t}] attrs {primitive = true} {
  %e = erf(%a)
  %r = leaky_relu(%e, alpha=0.2)
  return %r
}

fn @main(%x: Tensor[(4, 8), {t}]) -> Tuple[Tensor[(4, 8), {t}], Tensor[(4, 8), {t}], Tensor[(4, 8), {t}]] {
  %y = call @f(%x)
  %l = leaky_relu(%x)
  %n = leaky_relu(%x, -0.75)
  return (%y, %l, %n)
}
"""  # noqa: E501


@pytest.mark.parametrize("dtype", FLOATS)
def test_erf_and_leaky_relu_in_place_and_special_values(tmp_path: Path, dtype: str) -> None:
    """Inside a primitive function erf and leaky_relu compute in place (the only buffer is the
    output); NaN, infinities, signed zeros and large values agree with the interpreter."""
    text = ERF_LEAKY.replace("{t}", dtype)
    module = parse_module(text, "t.rx")
    built = build(text, tmp_path, prefix=f"el_{dtype}", sanitize=dtype == "f16")
    code = built.sources.files[f"el_{dtype}.c"]
    assert "erf((double)" in code
    assert "2.0e-01" in code and "1.0e-02" in code and "-7.5e-01" in code
    npt = {"f32": np.float32, "f64": np.float64, "f16": np.float16}[dtype]
    rng = np.random.default_rng(11)
    x = rng.normal(0, 2, size=(4, 8)).astype(npt)
    x.reshape(-1)[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-3, -1e-3, -6.0]
    want = Interpreter(module).run("main", [x])
    got = run_c(built, [x])
    assert_close(got, want, f"{dtype} erf/leaky_relu")
    # leaky_relu is plain IEEE arithmetic in the compute domain: identical bits (NaN aside).
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(g, w)
        assert (np.signbit(g) == np.signbit(w))[~np.isnan(w)].all()


def test_a_kernel_on_a_stored_only_dtype_is_refused_by_name() -> None:
    """C stores bf16 (and the low-precision types) and casts them; any other kernel on them
    is refused naming the op and the dtype."""
    m = parse_module(
        """
fn @main(%x: Tensor[(4,), bf16]) -> Tensor[(4,), bf16] {
  %y = exp(%x)
  return %y
}""",
        "t.rx",
    )
    with pytest.raises(RxError, match="does not support exp on bf16: dtype bf16 has no C repr"):
        emit_c(compile_module(m))


def test_bool_arithmetic_is_refused_by_name() -> None:
    m = parse_module(
        """
fn @main(%x: Tensor[(4,), bool]) -> Tensor[(4,), bool] {
  %y = add(%x, %x)
  return %y
}""",
        "t.rx",
    )
    with pytest.raises(RxError, match="the C target does not support add on bool"):
        emit_c(compile_module(m))

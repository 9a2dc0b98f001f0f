"""The blocked f32 kernels (backend/c/kernels/blocked.py) against the reference interpreter:
conv2d (1x1 read in place, im2col panels, strides, padding, dilation, groups, depthwise,
chunked reductions, partial tiles, a symbolic batch), matmul and dense (dot products and
micro-tiles), each built portable (-O2), for the host (-O3 -march=native: the 6-row tiles
and fused multiply-adds) and sanitized, with NaN and infinities in the inputs."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module

from .cbuild import CC, STRICT, compile_c, emit, needs_cc, run_c

pytestmark = needs_cc

# (name, parameters, body lines); every value the body binds is returned.
CONV_CASES: list[tuple[str, str, str]] = [
    # 1x1, unit strides, no padding: rows read in place; 7 x 9 = 63 positions (a partial
    # tile), 11 output channels (a partial micro-tile), bias.
    (
        "pointwise",
        "%x: Tensor[(1, 5, 7, 9), f32], %w: Tensor[(11, 5, 1, 1), f32], %b: Tensor[(11,), f32]",
        "%y = conv2d(%x, %w, %b)",
    ),
    # 1x1 with 64 positions (whole tiles) and 300 input channels (five chunks of 64 rows).
    (
        "pointwise_chunked",
        "%x: Tensor[(1, 300, 8, 8), f32], %w: Tensor[(13, 300, 1, 1), f32]",
        "%y = conv2d(%x, %w)",
    ),
    # 3x3, padding 1: 16 x 9 = 144 rows in panels; 20 positions per output row.
    (
        "same3x3",
        "%x: Tensor[(2, 16, 6, 20), f32], %w: Tensor[(8, 16, 3, 3), f32], %b: Tensor[(8,), f32]",
        "%y = conv2d(%x, %w, %b, padding=1)",
    ),
    # 3x3 over 40 channels: 360 rows, six chunks of the reduction; with a bias.
    (
        "chunked3x3",
        "%x: Tensor[(1, 40, 9, 9), f32], %w: Tensor[(7, 40, 3, 3), f32], %b: Tensor[(7,), f32]",
        "%y = conv2d(%x, %w, %b, padding=1)",
    ),
    # strides, asymmetric padding, dilation, a 1x1 with strides (packed)
    (
        "strided",
        "%x: Tensor[(1, 3, 17, 23), f32], %w: Tensor[(6, 3, 5, 3), f32], "
        "%w1: Tensor[(4, 3, 1, 1), f32]",
        "%y = conv2d(%x, %w, strides=(2, 3), padding=(2, 1, 0, 3))\n"
        "  %z = conv2d(%x, %w, dilation=(2, 3), padding=(1, 2))\n"
        "  %s = conv2d(%x, %w1, strides=2)",
    ),
    # groups: 2 groups of 3 -> 4; a channel multiplier (6 groups, 2 out each); depthwise
    # 3x3 stride 1 and 2, with a bias, and 5x5 dilated.
    (
        "groups",
        "%x: Tensor[(1, 6, 11, 19), f32], %wg: Tensor[(8, 3, 3, 3), f32], "
        "%wm: Tensor[(12, 1, 3, 3), f32], %wd: Tensor[(6, 1, 3, 3), f32], "
        "%wd5: Tensor[(6, 1, 5, 5), f32], %bd: Tensor[(6,), f32]",
        "%g = conv2d(%x, %wg, padding=1, groups=2)\n"
        "  %m = conv2d(%x, %wm, padding=1, groups=6)\n"
        "  %d = conv2d(%x, %wd, %bd, padding=1, groups=6)\n"
        "  %d2 = conv2d(%x, %wd, strides=2, padding=1, groups=6)\n"
        "  %d5 = conv2d(%x, %wd5, dilation=2, padding=(3, 1), groups=6)",
    ),
    # output rows of fewer than 16 positions (tiles span rows), a 7x7 stride-2 stem
    (
        "small_rows",
        "%x: Tensor[(1, 3, 29, 29), f32], %w: Tensor[(5, 3, 7, 7), f32], "
        "%w3: Tensor[(9, 3, 3, 3), f32]",
        "%y = conv2d(%x, %w, strides=2, padding=3)\n  %z = conv2d(%x, %w3, strides=4)",
    ),
]

SYMBOLIC = (
    "symbolic_batch",
    "%x: Tensor[(n, 4, 5, 6), f32], %w: Tensor[(3, 4, 3, 3), f32], %w1: Tensor[(5, 4, 1, 1), f32]",
    "%y = conv2d(%x, %w, padding=1)\n  %z = conv2d(%x, %w1)\n  %d = dense(%x, %m)",
)

LINALG_CASES: list[tuple[str, str, str]] = [
    (
        "matmul",
        "%a: Tensor[(13, 300), f32], %b: Tensor[(300, 37), f32], %c: Tensor[(2, 1, 7, 5), f32], "
        "%d: Tensor[(3, 5, 16), f32]",
        "%m = matmul(%a, %b)\n  %bm = matmul(%c, %d)",
    ),
    (
        "dense",
        "%x1: Tensor[(1, 37), f32], %x3: Tensor[(3, 40), f32], %x9: Tensor[(9, 300), f32], "
        "%w1: Tensor[(7, 37), f32], %w3: Tensor[(5, 40), f32], %w9: Tensor[(21, 300), f32], "
        "%b1: Tensor[(7,), f32], %b9: Tensor[(21,), f32]",
        "%d1 = dense(%x1, %w1, %b1)\n  %d3 = dense(%x3, %w3)\n  %d9 = dense(%x9, %w9, %b9)\n"
        "  %d9n = dense(%x9, %w9)",
    ),
]


def program(params: str, body: str, attrs: str = "") -> str:
    names = [ln.split("=")[0].strip().lstrip("%") for ln in body.splitlines() if ln.strip()]
    first, first_type = params.split("], %")[0].split(": ", 1)
    first_type += "" if first_type.endswith("]") else "]"
    probe = parse_module(
        f"fn @main({params}) -> {first_type}{attrs} {{\n  {body}\n  return {first}\n}}\n", "p.rx"
    )
    from relaxc.ir.types import type_to_str
    from relaxc.ir.verifier import verify_function

    types = verify_function(probe.get("main"), probe)
    ret = ", ".join(type_to_str(types[n]) for n in names)
    return (
        f"fn @main({params}) -> Tuple[{ret}]{attrs} {{\n  {body}\n  return "
        f"({', '.join('%' + n for n in names)})\n}}\n"
    )


def host_build(folder: Path, sources) -> Path:
    """The model built with -O3 -march=native (the recommended flags), warning-free."""
    p = sources.info.prefix
    exe = folder / f"{p}_native"
    flags = [f for f in STRICT if f != "-O2"] + ["-O3", "-march=native"]
    r = subprocess.run(
        [CC, *flags, f"{p}.c", f"{p}_main.c", "-lm", "-o", exe.name],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return exe


def special(args: list[np.ndarray]) -> list[np.ndarray]:
    out = [a.copy() for a in args]
    flat = out[0].reshape(-1)
    flat[3] = np.nan
    flat[min(10, flat.size - 1)] = np.inf
    flat[min(17, flat.size - 1)] = -np.inf
    return out


def reduction_lengths(module) -> list[int]:
    """Terms each returned value sums: CG*KH*KW (+1 with a bias) for conv2d, K (+1) for dense,
    K for matmul."""
    from relaxc.ir.verifier import verify_function

    fn = module.get("main")
    types = verify_function(fn, module)
    out = []
    for b in fn.body:
        args = [types[a.name].shape for a in b.value.args if hasattr(a, "name")]
        if b.value.op == "conv2d":
            _, cg, kh, kw = args[1]
            out.append(cg * kh * kw + (len(args) == 3))
        elif b.value.op == "dense":
            out.append(args[0][-1] + (len(args) == 3))
        else:
            out.append(args[0][-1])
    return out


def assert_close_sums(got, want, bound, lengths, what: str) -> None:
    """Each output within TOLERANCE of the reference, or within the worst-case error of a
    float sum of its n terms in any order: n * 2**-24 * (the sum of the terms' magnitudes),
    ``bound`` being the reference on the inputs' magnitudes (Higham's bound for recursive
    summation, with a product's rounding counted as a term's)."""
    u = 2.0**-24
    for i, (g, w, b, n) in enumerate(zip(got, want, bound, lengths)):
        g64, w64, b64 = (np.asarray(a, np.float64) for a in (g, w, b))
        finite = np.isfinite(w64)
        assert (np.isnan(g64) == np.isnan(w64)).all(), f"{what} output {i}: NaN differ"
        np.testing.assert_array_equal(g64[~finite], w64[~finite], err_msg=f"{what} output {i}")
        tol = 1e-6 + 1e-5 * np.abs(w64) + 2 * n * u * b64
        with np.errstate(invalid="ignore"):  # inf - inf where both are inf: checked above
            err = np.abs(g64 - w64)
        bad = finite & ~(err <= tol)
        assert not bad.any(), (
            f"{what} output {i}: {int(bad.sum())} of {g64.size} beyond the bound, worst "
            f"{float((err - tol)[bad].max()):.3g} over"
        )


def check(tmp_path: Path, name: str, text: str, dims: Sequence[dict[str, int]] = ({},)) -> None:
    """Build ``text`` three ways (-O2, sanitized, for the host) and run each build at every
    dims of ``dims``, on random and special inputs, against the interpreter."""
    module = parse_module(text, f"{name}.rx")
    fn = module.get("main")
    lengths = reduction_lengths(module)
    sources = emit(module, {}, tmp_path, prefix=name)
    code = sources.files[f"{name}.c"]
    assert f"{name}_sgemm" in code or "fmadd" in code  # the blocked kernels, not the loops
    builds = [compile_c(tmp_path, sources), compile_c(tmp_path, sources, sanitize=True)]
    native = host_build(tmp_path, sources)
    native_build = type(builds[0])(tmp_path, native, sources, False)
    for d in dims:
        env = resolve_dims(fn, d)
        for seed in (0, 1):
            args = random_inputs(fn, env, seed)
            if seed:
                args = special(args)
            with np.errstate(all="ignore"):
                want = Interpreter(module, {}).run("main", args, env)
                bound = Interpreter(module, {}).run("main", [np.abs(a) for a in args], env)
            for built, how in zip(builds + [native_build], ("-O2", "sanitized", "native")):
                got = run_c(built, args, env, tag=f"s{seed}")
                assert_close_sums(got, want, bound, lengths, f"{name} {how} seed {seed} {d}")


@pytest.mark.parametrize("name, params, body", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_blocked_conv2d_matches_the_interpreter(tmp_path: Path, name, params, body) -> None:
    check(tmp_path, name, program(params, body))


@pytest.mark.parametrize("name, params, body", LINALG_CASES, ids=[c[0] for c in LINALG_CASES])
def test_blocked_matmul_and_dense_match_the_interpreter(tmp_path: Path, name, params, body):
    check(tmp_path, name, program(params, body))


def test_blocked_kernels_with_a_symbolic_batch(tmp_path: Path) -> None:
    name, params, body = SYMBOLIC
    params += ", %m: Tensor[(7, 6), f32]"
    text = program(params, body, " attrs {upper_bounds = {n = 3}}")
    check(tmp_path, name, text, [{"n": 1}, {"n": 3}])  # one build of each kind, run at both


@pytest.mark.sanitize_model
def test_squeezenet_is_clean_under_asan_and_ubsan(tmp_path: Path) -> None:
    """SqueezeNet (random weights) built with the c pipeline, compiled -O0 with ASan and UBSan:
    no report, and the interpreter's output within the tolerance (slow: ``pytest -m
    sanitize_model tests/backend/c``)."""
    pytest.importorskip("onnx")
    from relaxc.backend.c import emit_c
    from relaxc.frontend.onnx import import_onnx

    from ...frontend.onnx.test_model_zoo import with_random_weights, zoo_model
    from .cbuild import assert_close, compile_module

    result = import_onnx(with_random_weights(zoo_model("squeezenet")))
    sources = emit_c(compile_module(result.module), result.weights, prefix="sq", emit_main=True)
    for name, text in sources.files.items():
        (tmp_path / name).write_text(text)
    built = compile_c(tmp_path, sources, sanitize=True)
    fn = result.module.get("main")
    args = random_inputs(fn, {}, 3)
    want = Interpreter(result.module, result.weights).run("main", args)
    assert_close(run_c(built, args), want, "squeezenet sanitized")

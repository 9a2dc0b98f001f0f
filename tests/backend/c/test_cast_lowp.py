"""``cast`` to and from bf16 and the low-precision types in C (backend/c/lowp.py) against
the reference kernel (ir/lowp.py, ml_dtypes), bit for bit: every code of each type, the
midpoints between neighbours (the ties), the overflow edges, and values hypothesis draws;
other kernels refuse the types by name."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError
from relaxc.ir.types import LOWP, numpy_dtype

from .cbuild import build, needs_cc, run_c

pytestmark = needs_cc
ml_dtypes = pytest.importorskip("ml_dtypes")

NARROW = ["bf16"] + [name for name, _, _ in LOWP]
F8 = ["f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz"]
SOURCES = ["f64", "f32", "f16", "i64"]


def _casts_to() -> list[tuple[str, str, str]]:
    """(name, source param, call) of every cast to a narrow type."""
    out = []
    for src in SOURCES:
        p = {"f64": "x", "f32": "y", "f16": "h", "i64": "i"}[src]
        for dst in NARROW:
            out.append((f"{p}_{dst}", p, f"cast(%{p}, {dst})"))
            if dst in F8:
                out.append((f"{p}_{dst}_ns", p, f"cast(%{p}, {dst}, saturate=false)"))
        for mode in ("down", "nearest"):
            out.append((f"{p}_e8m0_{mode}", p, f'cast(%{p}, f8e8m0, round_mode="{mode}")'))
        out.append(
            (f"{p}_e8m0_ns", p, "cast(%" + p + ', f8e8m0, saturate=false, round_mode="nearest")')
        )
    return out


def _casts_from() -> list[tuple[str, str, str]]:
    out = []
    for src in NARROW:
        for dst in ["f64", "f32", "f16", "i32", "u8", "bool", "f8e4m3fn", "f4e2m1", "i4"]:
            if dst != src:
                out.append((f"{src}_{dst}", src, f"cast(%{src}, {dst})"))
    return out


def _program(params: list[tuple[str, str]], casts: list[tuple[str, str, str]]) -> str:
    probe = parse_module(
        "fn @main("
        + ", ".join(f"%{p}: Tensor[(n,), {t}]" for p, t in params)
        + f") -> Tensor[(n,), {params[0][1]}] {{\n"
        + "".join(f"  %{name} = {call}\n" for name, _, call in casts)
        + f"  return %{params[0][0]}\n}}\n",
        "probe.rx",
    )
    from relaxc.ir.verifier import verify_function

    types = verify_function(probe.get("main"), probe)
    from relaxc.ir.types import type_to_str

    ret = "Tuple[" + ", ".join(type_to_str(types[n]) for n, _, _ in casts) + "]"
    return (
        "fn @main("
        + ", ".join(f"%{p}: Tensor[(n,), {t}]" for p, t in params)
        + f") -> {ret} {{\n"
        + "".join(f"  %{name} = {call}\n" for name, _, call in casts)
        + "  return ("
        + ", ".join(f"%{n}" for n, _, _ in casts)
        + ")\n}\n"
    )


TO = _casts_to()
TO_TEXT = _program([("x", "f64"), ("y", "f32"), ("h", "f16"), ("i", "i64")], TO)
FROM = _casts_from()
FROM_TEXT = _program([(t, t) for t in NARROW], FROM)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("c_cast_lowp")
    return (
        build(TO_TEXT, root / "to", prefix="lpto"),
        build(FROM_TEXT, root / "from", prefix="lpfrom"),
    )


def _same(g: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Equal bits, or NaN and NaN."""
    w = np.asarray(w)
    assert g.dtype == w.dtype and g.shape == w.shape
    if g.dtype.kind == "b":
        return g == w
    bits = f"u{g.dtype.itemsize}"
    same = g.view(bits) == w.view(bits)
    if g.dtype.name not in ("int4", "uint4", "int2", "uint2") and g.dtype.kind in "fV":
        with np.errstate(invalid="ignore"):
            same |= np.isnan(g.astype(np.float64)) & np.isnan(w.astype(np.float64))
    return same


def _check_to(built, x: np.ndarray) -> None:
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        i = np.nan_to_num(x, nan=0.0, posinf=1e18, neginf=-1e18)
        args = [
            x,
            x.astype(np.float32),
            x.astype(np.float16),
            np.clip(i, -1e18, 1e18).astype(np.int64),
        ]
        want = Interpreter(parse_module(TO_TEXT, "to.rx"), {}).run("main", args, {"n": len(x)})
    got = run_c(built[0], args, {"n": len(x)})
    for (name, _, _), g, w in zip(TO, got, want):
        same = _same(g, w)
        assert same.all(), (
            f"{name}: C {g[~same][:4]} for {args[0][~same][:4]}, "
            f"expected {np.asarray(w)[~same][:4]}"
        )


def _ties_and_edges() -> np.ndarray:
    """Every value of each narrow float type, the midpoints of neighbours and a little on
    each side of them, and the specials."""
    out = [np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e300, -1e300, 5e-324])]
    for name in NARROW:
        if name in ("i4", "u4", "i2", "u2"):
            continue
        count = 65536 if name == "bf16" else 256
        raw = np.arange(count, dtype=np.uint16 if name == "bf16" else np.uint8)
        v = raw.view(numpy_dtype(name)).astype(np.float64)
        v = np.unique(v[np.isfinite(v)])
        if name == "bf16":
            v = v[::97]  # a sample of bf16's values
        mid = (v[:-1] + v[1:]) / 2
        out += [v, mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)]
        top = v.max()
        gap = top - v[-2]
        out.append(np.array([top + gap / 2, top + gap / 2 * 1.0001, -(top + gap / 2)]))
    return np.concatenate(out)


def test_casts_to_the_narrow_types_at_every_tie_and_edge(built) -> None:
    _check_to(built, _ties_and_edges())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(width=64), min_size=1, max_size=64))
def test_casts_to_the_narrow_types_match_the_reference(built, xs: list[float]) -> None:
    _check_to(built, np.array(xs))


def test_casts_from_every_code_of_the_narrow_types(built) -> None:
    n = 256
    args = []
    for t in NARROW:
        if t == "bf16":
            codes = np.arange(0, 65536, 256, dtype=np.uint32).astype(np.uint16) | np.uint16(0x41)
        else:
            mask = 0xF if t in ("f4e2m1", "i4", "u4") else (0x3 if t in ("i2", "u2") else 0xFF)
            codes = (np.arange(n, dtype=np.uint16) & mask).astype(np.uint8)
        args.append(codes.view(numpy_dtype(t)))
    with np.errstate(all="ignore"):
        want = Interpreter(parse_module(FROM_TEXT, "from.rx"), {}).run("main", args, {"n": n})
    got = run_c(built[1], args, {"n": n})
    for (name, _, _), g, w in zip(FROM, got, want):
        same = _same(g, w)
        assert same.all(), f"{name}: C {g[~same][:4]}, expected {np.asarray(w)[~same][:4]}"


def test_other_kernels_refuse_the_narrow_types_by_name(tmp_path) -> None:
    text = """
fn @main(%a: Tensor[(4,), f8e4m3fn]) -> Tensor[(4,), f8e4m3fn] {
  %b = add(%a, %a)
  return %b
}
"""
    with pytest.raises(RxError, match="dtype f8e4m3fn has no C representation"):
        build(text, tmp_path, prefix="refuse")


CONSTANTS = """
fn @main(%a: Tensor[(4,), f32]) -> Tuple[Tensor[(4,), f32], Tensor[(4,), f8e4m3fn], Tensor[(2,), f32], Tensor[(3,), i4]] {
  %w: Tensor[(4,), f8e4m3fn] = const("w")
  %k = const([1.5, -2.0], f8e5m2)
  %q: Tensor[(3,), i4] = const("q")
  %b = cast(%w, f32)
  %s = add(%a, %b)
  %n = cast(%s, f8e4m3fn, saturate=false)
  %kk = cast(%k, f32)
  return (%s, %n, %kk, %q)
}
"""  # noqa: E501


@pytest.mark.parametrize("inline", [False, True])
def test_constants_of_the_narrow_types_hold_their_bits(tmp_path, inline: bool) -> None:
    weights = {
        "w": np.array([0.5, -448.0, 3.0, np.nan], np.float32).astype(ml_dtypes.float8_e4m3fn),
        "q": np.array([-8, 7, -1], np.int8).astype(ml_dtypes.int4),
    }
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    want = Interpreter(parse_module(CONSTANTS, "k.rx"), weights).run("main", [a])
    got = run_c(build(CONSTANTS, tmp_path, weights, prefix="k", unpacked=inline), [a])
    for g, w in zip(got, want):
        assert _same(g, w).all(), (g, w)


def test_the_conversions_are_clean_under_the_sanitizers(tmp_path) -> None:
    """No undefined behaviour at the edges (huge doubles, subnormals, NaN, infinities)."""
    built = (build(TO_TEXT, tmp_path / "to", prefix="lpsan", sanitize=True), None)
    _check_to(built, _ties_and_edges()[::3])
    _check_to(built, np.array([1e308, -1e308, 3e38, 4e38, -4e38, 1e-320, -5e-324]))

"""The Winograd F(2x2, 3x3) conv2d of the C target (backend/c/kernels/winograd.py):

* it computes the reference's conv2d (numpy, in float64) within the C tolerance, on shapes at
  the edges of its blocking: odd output sizes (partial tiles), asymmetric and large padding,
  block remainders of output and input channels and of tile rows, a bias or none, batches;
* on a scratch of exactly the planned size under ASan and UBSan (and a random property);
* an input or weight with an infinity or a NaN goes through the direct path (the same
  infinities and NaN as the reference);
* only eligible convolutions take it (not strided, grouped, dilated, 5x5, f16, too small).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.backend.c.helpers import Helpers
from relaxc.backend.c.kernels import generate, make_spec
from relaxc.backend.c.kernels.winograd import BUDGET, IO_FACTOR, WIDE_MIN_TILES, plan
from relaxc.ir.nodes import Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import bind_args
from relaxc.ir.types import TensorType

from .cbuild import needs_cc
from .test_kernel_scratch import Case, _run_cases

pytestmark = needs_cc


def _spec(shapes: list[tuple[int, ...]], attrs: dict, dtype: str = "f32"):
    op = REGISTRY.get("conv2d")
    assert op is not None
    bound = bind_args(op, tuple(Var(f"x{i}") for i in range(len(shapes))), tuple(attrs.items()))
    ins = [TensorType(s, dtype) for s in shapes]
    out = op.infer(ins, bound.attrs)
    return make_spec("conv2d", bound.attrs, ins, [out])


def _conv(shapes: list[tuple[int, ...]], pads=(1, 1), bias: bool = True) -> Case:
    k = shapes[1][0]
    return ("conv2d", shapes + ([(k,)] if bias else []), {"padding": pads})


CASES: list[Case] = [
    # odd output (partial tiles across and down), K = 13 (a partial micro-tile), C = 9;
    # 12 rows of tiles in blocks of 4
    _conv([(1, 9, 23, 25), (13, 9, 3, 3)]),
    # no padding (output 2 smaller), two images, rows of tiles in blocks of 7 and a rest of 2
    _conv([(2, 8, 20, 19), (8, 8, 3, 3)], (0, 0)),
    # asymmetric padding, no bias
    _conv([(1, 12, 19, 24), (10, 12, 3, 3)], (2, 0, 1, 3), bias=False),
    # C = 70: blocks of input channels 32, 32, 6; K = 100: blocks of 18 and a rest of 10
    _conv([(1, 70, 12, 12), (100, 70, 3, 3)]),
    # wide rows: 29 tiles a row, rows in blocks of 3 and a rest
    _conv([(1, 8, 40, 57), (9, 8, 3, 3)]),
    # padding larger than the kernel's reach: rows and columns of zeros
    _conv([(1, 8, 16, 17), (8, 8, 3, 3)], (3, 2, 2, 3)),
    # V holding every input channel (transformed once per block of tile rows): C = 40 in
    # blocks of 32 and 8, K = 100 in blocks of 12 and a rest of 4, tile rows 5 and 2
    _conv([(1, 40, 13, 13), (100, 40, 3, 3)]),
    # the same with asymmetric padding and no bias: K = 50 (a rest of 2), rows 7 and 4
    _conv([(1, 36, 21, 17), (50, 36, 3, 3)], (0, 1, 2, 1), bias=False),
]


def _planned(case: Case):
    _, shapes, attrs = case
    return plan(_spec(shapes, attrs))


def test_the_cases_take_winograd() -> None:
    plans = [_planned(case) for case in CASES]
    assert all(p is not None and p.scratch() <= BUDGET for p in plans), CASES
    assert {p.v_all for p in plans if p is not None} == {False, True}  # both loop orders


@pytest.mark.parametrize("sanitize", [False, True], ids=["O2", "asan"])
def test_winograd_matches_the_reference(tmp_path: Path, sanitize: bool) -> None:
    _run_cases(tmp_path, CASES, sanitize, need_scratch=True)


def test_winograd_with_the_recommended_flags(tmp_path: Path, monkeypatch) -> None:
    """-O3 -march=native: with AVX the layers of at least WIDE_MIN_TILES tiles keep Winograd
    (fused multiply-adds in the micro-tiles), the others go to the direct GEMM; both compute
    the reference."""
    from . import test_kernel_scratch
    from .cbuild import STRICT

    native = [f for f in STRICT if f != "-O2"] + ["-O3", "-march=native"]
    monkeypatch.setattr(test_kernel_scratch, "STRICT", native)
    wide = [c for c in CASES if (p := _planned(c)) is not None and p.th * p.tw >= WIDE_MIN_TILES]
    narrow = [c for c in CASES if c not in wide]
    assert wide and narrow
    _run_cases(tmp_path, wide + narrow[:2], sanitize=False, need_scratch=True)


def test_winograd_c1_and_one_input_channel_block(tmp_path: Path) -> None:
    """C = 1 is too few channels for Winograd (the direct path), C = 8 the fewest that take
    it (one block of input channels); both compute the reference."""
    few = _conv([(1, 1, 12, 12), (16, 1, 3, 3)])
    assert _planned(few) is None
    eight = _conv([(1, 8, 24, 24), (16, 8, 3, 3)])
    assert _planned(eight) is not None
    _run_cases(tmp_path, [few, eight], sanitize=True, need_scratch=True)


FORCED: list[Case] = [
    _conv([(1, 1, 5, 6), (1, 1, 3, 3)]),  # C = K = 1
    _conv([(1, 1, 2, 2), (3, 1, 3, 3)]),  # a 2 x 2 output: one tile
    _conv([(2, 3, 1, 9), (5, 3, 3, 3)], (1, 1, 2, 0), bias=False),  # one input row, 3 x 7
    _conv([(1, 2, 3, 3), (7, 2, 3, 3)], (2, 2)),  # 5 x 5: partial tiles both ways
]


def test_winograd_on_shapes_the_plan_would_not_choose(tmp_path: Path, monkeypatch) -> None:
    """The kernel is right where the plan's thresholds keep it off (C = 1, K = 1, one tile,
    one input row): with them lifted, under ASan on a scratch of exactly the stated size."""
    from relaxc.backend.c.kernels import winograd

    monkeypatch.setattr(winograd, "MIN_GAIN", 0.0)
    monkeypatch.setattr(winograd, "MIN_CHANNELS", 1)
    monkeypatch.setattr(winograd, "IO_FACTOR", 1000)
    assert all(_planned(case) is not None for case in FORCED)
    _run_cases(tmp_path, FORCED, sanitize=True, need_scratch=True)


def test_the_scratch_stays_in_budget_and_in_proportion() -> None:
    """At most BUDGET bytes, and at most IO_FACTOR times the convolution's own input and
    output: the blocks shrink to fit (the zoo's layers), or a small one keeps the direct
    path."""
    layers = [(64, 64, 56), (128, 128, 28), (256, 256, 14), (512, 512, 7), (48, 192, 13)]
    layers += [(16, 64, 55), (9, 13, 23), (8, 8, 10), (40, 40, 9)]
    taken = 0
    for c, k, hw in layers:
        p = plan(_spec([(1, c, hw, hw), (k, c, 3, 3)], {"padding": (1, 1)}))
        if p is None:
            continue
        taken += 1
        io = 4 * (c * hw * hw + k * hw * hw)
        assert p.scratch() <= min(BUDGET, IO_FACTOR * io), (c, k, hw)
    assert taken >= 6
    assert plan(_spec([(1, 8, 10, 10), (8, 8, 3, 3)], {"padding": (1, 1)})) is None


@pytest.mark.parametrize(
    "shapes, attrs, dtype",
    [
        ([(1, 16, 20, 20), (16, 16, 3, 3)], {"strides": (2, 2), "padding": (1, 1)}, "f32"),
        ([(1, 16, 20, 20), (16, 8, 3, 3)], {"groups": 2, "padding": (1, 1)}, "f32"),
        ([(1, 16, 20, 20), (16, 16, 3, 3)], {"dilation": (2, 2), "padding": (2, 2)}, "f32"),
        ([(1, 16, 20, 20), (16, 16, 5, 5)], {"padding": (2, 2)}, "f32"),
        ([(1, 16, 20, 20), (16, 16, 3, 1)], {"padding": (1, 0)}, "f32"),
        ([(1, 16, 20, 20), (16, 16, 3, 3)], {"padding": (1, 1)}, "f16"),
        ([(1, 16, 3, 3), (16, 16, 3, 3)], {"padding": (1, 1)}, "f32"),  # 2x2 tiles: no gain
        ([(1, 4, 20, 20), (16, 4, 3, 3)], {"padding": (1, 1)}, "f32"),  # too few channels
    ],
    ids=["stride2", "groups", "dilation", "5x5", "3x1", "f16", "tiny", "C4"],
)
def test_ineligible_convolutions_keep_the_direct_path(shapes, attrs, dtype) -> None:
    spec = _spec(shapes, attrs, dtype)
    assert plan(spec) is None
    text, _ = generate(spec, "k", Helpers("m"))
    assert "_vt(" not in text and "all_finite" not in text


def test_an_eligible_convolution_takes_it() -> None:
    text, need = generate(
        _spec([(1, 16, 20, 20), (16, 16, 3, 3)], {"padding": (1, 1)}), "k", Helpers("m")
    )
    assert "k_vt(" in text and "k_ot(" in text and "k_gemm(" in text
    p = plan(_spec([(1, 16, 20, 20), (16, 16, 3, 3)], {"padding": (1, 1)}))
    assert p is not None and need == max(p.scratch(), need) and need >= p.scratch()


def test_emission_is_deterministic() -> None:
    spec = _spec([(1, 70, 12, 12), (100, 70, 3, 3), (100,)], {"padding": (1, 1)})
    assert generate(spec, "k", Helpers("m")) == generate(spec, "k", Helpers("m"))


def test_infinities_and_nan_take_the_direct_path(tmp_path: Path) -> None:
    """The harness's inputs are finite; here an input holds inf, -inf and NaN: the result is
    the reference's (inf - inf would make NaN of a transform's infinities)."""
    import subprocess

    from .cbuild import CC, STRICT, assert_close
    from .test_kernel_scratch import _fill

    shapes = [(1, 8, 9, 10), (8, 8, 3, 3)]
    spec = _spec(shapes, {"padding": (1, 1)})
    helpers = Helpers("m")
    text, need = generate(spec, "k0", helpers)
    nx, nw = 8 * 9 * 10, 8 * 8 * 9
    fill = "(float)((double)((i * 7919u) % 201u) / 37.0 - 2.5)"  # test_kernel_scratch's _fill
    program = "\n".join(
        [
            "#include <math.h>",
            "#include <stdint.h>",
            "#include <stdio.h>",
            "#include <stdlib.h>",
            helpers.definitions(),
            text,
            "int main(void)",
            "{",
            "    uint64_t i;",
            f"    float *x = malloc({nx} * sizeof(float)), *w = malloc({nw} * sizeof(float));",
            f"    float *y = malloc({8 * 9 * 10} * sizeof(float));",
            f"    unsigned char *s = malloc({need});",
            f"    for (i = 0; i < {nx}; ++i) x[i] = {fill};",
            f"    for (i = 0; i < {nw}; ++i) w[i] = {fill};",
            "    x[3] = INFINITY; x[100] = -INFINITY; x[400] = NAN;",
            "    k0(x, w, y, s);",
            f"    fwrite(y, sizeof(float), {8 * 9 * 10}, stdout);",
            "    free(x); free(w); free(y); free(s);",
            "    return 0;",
            "}",
        ]
    )
    src = tmp_path / "inf.c"
    src.write_text(program)
    exe = tmp_path / "inf"
    subprocess.run([CC, *STRICT, str(src), "-o", str(exe), "-lm"], check=True)
    run = subprocess.run([str(exe)], capture_output=True, check=True)
    got = np.frombuffer(run.stdout, dtype=np.float32).reshape(1, 8, 9, 10)
    x = _fill(nx).reshape(shapes[0]).copy()
    x.reshape(-1)[[3, 100, 400]] = [np.inf, -np.inf, np.nan]
    w = _fill(nw).reshape(shapes[1])
    op = REGISTRY.get("conv2d")
    assert op is not None and op.kernel is not None
    with np.errstate(all="ignore"):
        want = op.kernel([x, w], dict(spec.attrs))
    assert np.isinf(want).any() and np.isnan(want).any()
    assert_close([got], want, "conv2d with inf and NaN")


@st.composite
def winograd_cases(draw: st.DrawFn) -> Case:
    """A random small conv2d that takes Winograd: channels, sizes, padding, a bias."""
    c, k = draw(st.integers(8, 40)), draw(st.integers(8, 60))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    h = draw(st.integers(max(8, 3 - pads[0] - pads[2]), 30))
    w = draw(st.integers(max(8, 3 - pads[1] - pads[3]), 40))
    n = draw(st.integers(1, 2))
    shapes = [(n, c, h, w), (k, c, 3, 3)] + ([(k,)] if draw(st.booleans()) else [])
    case: Case = ("conv2d", shapes, {"padding": pads})
    from hypothesis import assume

    assume(_planned(case) is not None)
    return case


@settings(max_examples=3, deadline=None, derandomize=True, database=None)
@given(st.lists(winograd_cases(), min_size=4, max_size=4))
def test_random_winograd_convolutions_under_asan(found: list[Case]) -> None:
    """Property: whatever the shape, Winograd stays inside the scratch it states (ASan on a
    scratch of exactly that size) and computes the reference's conv2d."""
    with tempfile.TemporaryDirectory() as tmp:
        _run_cases(Path(tmp), found, sanitize=True, need_scratch=True)

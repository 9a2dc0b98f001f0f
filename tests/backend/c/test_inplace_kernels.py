"""In-place safety of the C kernels: ComputeInPlace (and the primitive emitter) compute an
op's output over an input its record lists in ``OpDef.inplace`` -- the kernel is then called
with the output pointer equal to that input pointer. Each such kernel, for each input it may
overwrite (of the output's dtype and shape), is called both ways on the same data, built
portable (-O2), for the host (-O3 -march=native) and sanitized: the aliased call must give
the very bits of the separate one (each element read before it is written; a normalization
reads its row before writing it)."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.backend.c import dtypes as T
from relaxc.backend.c.helpers import Helpers
from relaxc.backend.c.kernels import Spec, generate, same_shape
from relaxc.frontend.parser import parse_module
from relaxc.ir.nodes import Call, DType
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import bind_args
from relaxc.ir.types import TensorType
from relaxc.ir.verifier import verify_function

from .cbuild import CC, SAN_ENV, SANITIZE, STRICT, needs_cc

pytestmark = needs_cc

PARAMS = (
    "%a: Tensor[(2, 3, 4, 5), {t}], %b: Tensor[(2, 3, 4, 5), {t}], %v: Tensor[(5,), {t}], "
    "%c: Tensor[(2, 3, 4, 5), bool], %g3: Tensor[(3,), {t}], %p3: Tensor[(3,), {t}], "
    "%q: Tensor[(3,), {t}], %m: Tensor[(4, 5), {t}], %m1: Tensor[(4, 5), {t}], "
    "%m2: Tensor[(4, 5), {t}], %w: Tensor[(2, 3, 4, 37), {t}], %w1: Tensor[(37,), {t}]"
)

ARITH = [
    "add(%a, %b)",
    "subtract(%a, %b)",
    "multiply(%a, %b)",
    "divide(%a, %b)",
    "maximum(%a, %b)",
    "minimum(%a, %b)",
    "power(%a, %b)",
    "add(%a, %v)",
    "multiply(%v, %a)",
    "subtract(%m, %a)",
    "negative(%a)",
    "abs(%a)",
    "relu(%a)",
    "relu(%w)",
    "clip(%a, -0.5, 0.25)",
    "where(%c, %a, %b)",
    "where(%c, %v, %a)",
]

FLOAT = [
    "exp(%a)",
    "log(%a)",
    "sqrt(%a)",
    "rsqrt(%a)",
    "tanh(%a)",
    "sigmoid(%a)",
    "silu(%a)",
    "gelu(%a)",
    "erf(%a)",
    "leaky_relu(%a, 0.1)",
    "batch_norm(%a, %g3, %g3, %p3, %p3, axis=1)",
    "batch_norm(%q, %g3, %p3, %g3, %p3, axis=0)",
    "softmax(%a, axis=1)",
    "softmax(%a)",
    "softmax(%w)",
    "layer_norm(%a, %m, %m1, axes=(-2, -1))",
    "layer_norm(%m, %m1, %m2, axes=(0, 1))",
    "layer_norm(%w, %w1, %w1)",
    "rms_norm(%a, %v)",
    "rms_norm(%m, %m1, axes=(0, 1))",
]


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, DType):
        return v.name
    return v


def cases(
    dtype: str, calls: list[str] | None = None, params: str = PARAMS
) -> list[tuple[Spec, list[int]]]:
    """(kernel instance, the inputs its output may be computed over) for each op call
    (default: ARITH, and FLOAT for a float dtype); ``params`` spells the dtype ``{t}`` and
    has a parameter ``%v`` of shape (5,)."""
    if calls is None:
        calls = ARITH + (FLOAT if T.kind(dtype) == "float" else [])
    body = "".join(f"  %r{i} = {c}\n" for i, c in enumerate(calls))
    params = params.replace("{t}", dtype)
    text = f"fn @main({params}) -> Tensor[(5,), {dtype}] {{\n{body}  return %v\n}}\n"
    m = parse_module(text, "p.rx")
    fn = m.get("main")
    types = verify_function(fn, m)
    out = []
    for b in fn.body:
        call = b.value
        assert isinstance(call, Call)
        op = REGISTRY.get(call.op)
        bound = bind_args(op, call.args, call.kwargs)
        ins = tuple(types[a.name] for a in bound.inputs)
        res = types[b.name]
        assert isinstance(res, TensorType)
        attrs = tuple(sorted((k, _hashable(v)) for k, v in bound.attrs.items()))
        spec = Spec(call.op, attrs, ins, (res,))
        alias = [
            i
            for i in op.inplace
            if i < len(ins) and ins[i].dtype == res.dtype and same_shape(ins[i], res)
        ]
        assert alias, f"{call.op}: no input to compute over"
        out.append((spec, alias))
    return out


FILL = {
    "float": "(double)((i * 7919u) % 201u) / 37.0 - 2.5",
    "int": "(double)((i * 7919u) % 21u) - 10.0",
}


def program(dtype: str, found: list[tuple[Spec, list[int]]] | None = None) -> str:
    """A C program that calls each kernel of ``found`` (default: :func:`cases`) both ways and
    exits 1 (printing which) if an aliased call differs from the separate one."""
    h = Helpers("m")
    kernels, tests = [], []
    for n, (spec, alias) in enumerate(cases(dtype) if found is None else found):
        text, scratch = generate(spec, f"k{n}", h)
        assert scratch == 0, f"{spec.op}: an in-place kernel takes no scratch"
        kernels.append(text)
        decls, args = [], []
        for i, t in enumerate(spec.ins):
            count = max(1, math.prod(t.shape))
            ct = T.c_type(t.dtype)
            decls.append(f"    static {ct} in{i}[{count}];")
            if t.dtype == "bool":
                fill = "(uint8_t)(i % 3 == 0)"
            else:
                expr = FILL["float" if T.kind(t.dtype) == "float" else "int"]
                fill = f"({ct})({expr})" if t.dtype != "f16" else "0"
            decls.append(f"    for (i = 0; i < {count}; ++i) in{i}[i] = {fill};")
            args.append(f"in{i}")
        res = spec.outs[0]
        count = max(1, math.prod(res.shape))
        ct = T.c_type(res.dtype)
        decls.append(f"    static {ct} ref[{count}], buf[{count}];")
        body = decls + [f"    k{n}({', '.join(args)}, ref);"]
        for a in alias:
            call = [("buf" if i == a else x) for i, x in enumerate(args)]
            body += [
                f"    memcpy(buf, in{a}, sizeof buf);",
                f"    k{n}({', '.join(call)}, buf);",
                f'    if (memcmp(buf, ref, sizeof buf) != 0) {{ printf("{spec.op} #{n} over '
                f'input {a} differs\\n"); ++bad; }}',
            ]
        tests.append("  {\n" + "\n".join(body) + "\n  }")
    return (
        "#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n\n"
        + h.definitions()
        + "\n\n"
        + "\n\n".join(kernels)
        + "\n\nint main(void)\n{\n    int bad = 0;\n    uint32_t i;\n"
        + "\n".join(tests)
        + "\n    return bad != 0;\n}\n"
    )


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32"])
def test_inplace_kernels_give_the_bits_of_the_separate_call(tmp_path: Path, dtype: str) -> None:
    src = tmp_path / f"inplace_{dtype}.c"
    src.write_text(program(dtype))
    native = [f for f in STRICT if f != "-O2"] + ["-O3", "-march=native"]
    for tag, flags in (("O2", STRICT), ("native", native), ("san", SANITIZE)):
        exe = tmp_path / f"inplace_{dtype}_{tag}"
        r = subprocess.run(
            [CC, *flags, src.name, "-lm", "-o", exe.name],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0 and r.stderr == "", r.stderr
        env = dict(os.environ, **SAN_ENV) if tag == "san" else None
        run = subprocess.run([str(exe)], cwd=tmp_path, capture_output=True, text=True, env=env)
        assert run.returncode == 0 and run.stderr == "", f"{tag}:\n{run.stdout}{run.stderr}"


def test_inplace_kernels_never_declare_restrict() -> None:
    """restrict on a kernel whose output may be its input would let the compiler assume they
    never overlap."""
    for spec, _ in cases("f32"):
        text, _ = generate(spec, "k", Helpers("m"))
        assert "restrict" not in text.split("{", 1)[0], spec.op


UNARY_DRAWN = [
    "relu({x})",
    "exp({x})",
    "sigmoid({x})",
    "leaky_relu({x}, 0.2)",
    "clip({x}, -1.0, 1.0)",
]
BINARY_DRAWN = ["add", "subtract", "multiply", "maximum", "divide"]


@st.composite
def aliased_calls(draw: st.DrawFn) -> tuple[str, list[str]]:
    """(parameters, op calls) whose output may be computed over ``%x``: a random shape (rank
    1 to 4, dims 1 to 37: runs shorter and longer than the 16- and 64-wide blocks), a
    broadcast operand of a random suffix or of ones, and normalizations over random axes."""
    shape = draw(st.lists(st.integers(1, 37), min_size=1, max_size=4))
    rank = len(shape)
    cut = draw(st.integers(0, rank))
    bshape = [1 if draw(st.booleans()) else d for d in shape[cut:]] or [1]
    dims = lambda s: "(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"  # noqa: E731
    params = (
        f"%x: Tensor[{dims(shape)}, {{t}}], %y: Tensor[{dims(shape)}, {{t}}], "
        f"%z: Tensor[{dims(bshape)}, {{t}}], %v: Tensor[(5,), {{t}}]"
    )
    calls = [u.format(x="%x") for u in draw(st.lists(st.sampled_from(UNARY_DRAWN), max_size=3))]
    for op in draw(st.lists(st.sampled_from(BINARY_DRAWN), min_size=1, max_size=3)):
        other = draw(st.sampled_from(["%y", "%z"]))
        calls.append(f"{op}(%x, {other})" if draw(st.booleans()) else f"{op}({other}, %x)")
    axis = draw(st.integers(-rank, rank - 1))
    calls.append(f"softmax(%x, axis={axis})")
    axes = sorted({draw(st.integers(0, rank - 1)) for _ in range(draw(st.integers(1, rank)))})
    g = dims([shape[i] for i in axes])
    params += f", %g: Tensor[{g}, {{t}}]"
    calls.append(f"layer_norm(%x, %g, %g, axes={dims(axes)})")
    calls.append(f"rms_norm(%x, %g, axes={dims(axes)})")
    return params, calls


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=aliased_calls())
def test_inplace_kernels_on_random_shapes_give_the_bits_of_the_separate_call(
    tmp_path_factory: pytest.TempPathFactory, drawn: tuple[str, list[str]]
) -> None:
    """The property behind the examples above: on any shape (blocked runs with tails,
    broadcasts, any normalization axes), a kernel called with its output over ``%x`` gives
    the bits of the separate call, at -O3 -march=native (the widest blocks)."""
    params, calls = drawn
    found = [(spec, alias) for spec, alias in cases("f32", calls, params) if alias]
    folder = tmp_path_factory.mktemp("drawn")
    (folder / "p.c").write_text(program("f32", found))
    native = [f for f in STRICT if f != "-O2"] + ["-O3", "-march=native"]
    r = subprocess.run(
        [CC, *native, "p.c", "-lm", "-o", "p"], cwd=folder, capture_output=True, text=True
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    run = subprocess.run(["./p"], cwd=folder, capture_output=True, text=True)
    assert run.returncode == 0, f"{calls}:\n{run.stdout}"

"""The C kernels' working memory is the scratch PlanKernelScratch plans, nothing else:

* each kernel that uses scratch stays inside exactly the bytes it states (ASan on a scratch
  of exactly that size, not a byte more) and computes the reference's result with it;
* no function of a compiled model but the runner (whose packed-call structs are the IR's own
  ``tir.stack_alloca``) takes more than a few hundred bytes of stack (``gcc -fstack-usage``);
* a model's kernel calls get the scratch their kernels need, and the file holds no other.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.backend.c.helpers import Helpers
from relaxc.backend.c.kernels import generate, make_spec
from relaxc.ir.nodes import Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import bind_args
from relaxc.ir.types import TensorType
from relaxc.cli.target_facts import pipeline_context
from relaxc.passes.assemble import assemble_pipeline
from relaxc.passes.pipeline import Pipeline, VerifyInstrument

from .cbuild import CC, SAN_ENV, SANITIZE, STRICT, assert_close, needs_cc

pytestmark = needs_cc

SAMPLES = Path(__file__).resolve().parents[3] / "samples"

# (op, input shapes, attributes): every family of kernel that carves scratch, at the edges of
# its blocking (a reduction longer than one panel, partial tiles, wide rows, groups).
CASES: list[tuple[str, list[tuple[int, ...]], dict]] = [
    ("conv2d", [(1, 5, 7, 9), (11, 5, 1, 1), (11,)], {}),
    ("conv2d", [(1, 40, 9, 9), (7, 40, 3, 3)], {"padding": (1, 1)}),
    ("conv2d", [(2, 3, 17, 23), (6, 3, 5, 3)], {"strides": (2, 3), "padding": (2, 1, 0, 3)}),
    ("conv2d", [(1, 6, 8, 8), (4, 3, 3, 3)], {"groups": 2, "dilation": (2, 1)}),
    ("conv2d", [(1, 8, 12, 12), (8, 1, 3, 3), (8,)], {"groups": 8, "padding": (1, 1)}),
    ("conv2d", [(1, 4, 20, 30), (4, 1, 3, 3)], {"groups": 4, "strides": (2, 2), "padding": (1, 1)}),
    ("dense", [(7, 70), (9, 70), (9,)], {}),
    ("dense", [(13, 100), (21, 100)], {}),
    ("matmul", [(3, 7, 130), (3, 130, 19)], {}),
    ("max_pool2d", [(1, 3, 11, 37)], {"pool_size": (3, 3), "strides": (2, 2)}),
]


def _fill(count: int) -> np.ndarray:
    """The inputs the C harness makes: the same formula on both sides."""
    i = np.arange(count, dtype=np.uint64)
    return (((i * 7919) % 201).astype(np.float64) / 37.0 - 2.5).astype(np.float32)


Case = tuple[str, list[tuple[int, ...]], dict]


def _harness(
    found: list[Case], need_scratch: bool = True
) -> tuple[str, list[tuple[str, dict, list[np.ndarray], TensorType, int]]]:
    """A C program that runs every case on a scratch of exactly its stated size (malloc'd,
    so ASan sees a byte past it) and writes the outputs to stdout."""
    helpers = Helpers("m")
    kernels, calls, cases = [], [], []
    for n, (op_name, shapes, kwargs) in enumerate(found):
        op = REGISTRY.get(op_name)
        assert op is not None
        args = tuple(Var(f"x{i}") for i in range(len(shapes)))
        bound = bind_args(op, args, tuple(kwargs.items()))
        ins = [TensorType(s, "f32") for s in shapes]
        out = op.infer(ins, bound.attrs)
        assert isinstance(out, TensorType)
        text, need = generate(make_spec(op_name, bound.attrs, ins, [out]), f"k{n}", helpers)
        assert need > 0 or not need_scratch, f"{op_name} {shapes}: meant to use scratch"
        kernels.append(text)
        body = []
        names = []
        arrays = []
        for i, t in enumerate(ins):
            count = int(np.prod(t.shape))
            body.append(f"    float *in{n}_{i} = malloc({count} * sizeof(float));")
            body.append(
                f"    for (i = 0; i < {count}; ++i) in{n}_{i}[i] = "
                "(float)((double)((i * 7919u) % 201u) / 37.0 - 2.5);"
            )
            names.append(f"in{n}_{i}")
            arrays.append(_fill(count).reshape(t.shape))
        ocount = int(np.prod(out.shape))
        body += [
            f"    float *out{n} = malloc({ocount} * sizeof(float));",
            f"    unsigned char *s{n} = malloc({max(need, 1)});",
            f"    k{n}({', '.join(names + [f'out{n}'] + ([f's{n}'] if need else []))});",
            f"    fwrite(out{n}, sizeof(float), {ocount}, stdout);",
            f"    free(s{n}); free(out{n});",
        ]
        body += [f"    free({x});" for x in names]
        calls.append("\n".join(body))
        cases.append((op_name, bound.attrs, arrays, out, need))
    program = "\n".join(
        [
            "#include <math.h>",
            "#include <stdint.h>",
            "#include <stdio.h>",
            "#include <stdlib.h>",
            "#include <string.h>",
            helpers.definitions(),
            *kernels,
            "int main(void)",
            "{",
            "    uint64_t i;",
            *calls,
            "    return 0;",
            "}",
        ]
    )
    return program, cases


def _run_cases(tmp_path: Path, found: list[Case], sanitize: bool, need_scratch: bool) -> None:
    """Compile :func:`_harness` of ``found`` (-O2 or sanitized), run it, and compare every
    output with the op's reference kernel within the C tolerance."""
    program, cases = _harness(found, need_scratch)
    src = tmp_path / "scratch.c"
    src.write_text(program)
    exe = tmp_path / "scratch"
    flags = SANITIZE if sanitize else STRICT
    subprocess.run([CC, *flags, str(src), "-o", str(exe), "-lm"], check=True)
    run = subprocess.run([str(exe)], capture_output=True, env=SAN_ENV if sanitize else None)
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    data = np.frombuffer(run.stdout, dtype=np.float32)
    at = 0
    for op_name, attrs, arrays, out, _ in cases:
        count = int(np.prod(out.shape))
        got = data[at : at + count].reshape(out.shape)
        at += count
        op = REGISTRY.get(op_name)
        assert op is not None and op.kernel is not None
        assert_close([got], op.kernel(arrays, attrs), f"{op_name} {[a.shape for a in arrays]}")
    assert at == data.size


@pytest.mark.parametrize("sanitize", [False, True], ids=["O2", "asan"])
def test_kernels_stay_inside_the_scratch_they_state(tmp_path: Path, sanitize: bool) -> None:
    _run_cases(tmp_path, CASES, sanitize, need_scratch=True)


@st.composite
def scratch_cases(draw: st.DrawFn) -> Case:
    """A conv2d (plain, grouped or depthwise; strides, dilation, padding, a bias), dense,
    matmul or max pool of random shape: every kernel family that may carve scratch."""
    kind = draw(st.sampled_from(["conv2d", "depthwise", "dense", "matmul", "max_pool2d"]))
    if kind in ("conv2d", "depthwise"):
        groups = draw(st.integers(1, 3))
        cg = 1 if kind == "depthwise" else draw(st.integers(1, 7))
        og = 1 if kind == "depthwise" else draw(st.integers(1, 5))
        kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
        sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
        pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
        h = draw(st.integers(max(1, (kh - 1) * dh + 1 - pads[0] - pads[2]), 24))
        w = draw(st.integers(max(1, (kw - 1) * dw + 1 - pads[1] - pads[3]), 40))
        shapes = [(draw(st.integers(1, 2)), cg * groups, h, w), (og * groups, cg, kh, kw)]
        if draw(st.booleans()):
            shapes.append((og * groups,))
        attrs = {"strides": (sh, sw), "dilation": (dh, dw), "padding": pads, "groups": groups}
        return ("conv2d", shapes, attrs)
    if kind == "dense":
        rows, k, n = draw(st.integers(1, 20)), draw(st.integers(1, 150)), draw(st.integers(1, 40))
        return ("dense", [(rows, k), (n, k)] + ([(n,)] if draw(st.booleans()) else []), {})
    if kind == "matmul":
        b, m = draw(st.integers(1, 3)), draw(st.integers(1, 12))
        k, n = draw(st.integers(1, 150)), draw(st.integers(1, 40))
        return ("matmul", [(b, m, k), (b, k, n)], {})
    ph, pw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    pads = (draw(st.integers(0, ph - 1)), draw(st.integers(0, pw - 1)))
    h, w = draw(st.integers(ph, 20)), draw(st.integers(pw, 60))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    return (
        "max_pool2d",
        [(1, 2, h, w)],
        {"pool_size": (ph, pw), "strides": strides, "padding": pads},
    )


@settings(max_examples=4, deadline=None, derandomize=True, database=None)
@given(st.lists(scratch_cases(), min_size=6, max_size=6))
def test_random_kernels_stay_inside_their_scratch_under_asan(found: list[Case]) -> None:
    """Property: whatever the shapes, a kernel reads and writes only the scratch it states
    (ASan on a scratch of exactly that size; none where it states none) and computes the
    reference's result."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        _run_cases(Path(tmp), found, sanitize=True, need_scratch=False)


def _stack_usage(c_file: Path, tmp_path: Path) -> dict[str, int]:
    subprocess.run(
        [CC, "-std=c99", "-O2", "-fstack-usage", "-c", str(c_file), "-o", str(tmp_path / "m.o")],
        check=True,
        cwd=tmp_path,
    )
    usage: dict[str, int] = {}
    for line in (tmp_path / "m.su").read_text().splitlines():  # file:line:col:name\tbytes\tkind
        where, nbytes, _ = line.split("\t")
        usage[where.rsplit(":", 1)[-1].split(".")[0]] = int(nbytes)
    return usage


@pytest.mark.parametrize("sample", ["cnn", "mlp", "transformer"])
def test_no_kernel_keeps_working_arrays_on_the_stack(tmp_path: Path, sample: str) -> None:
    from click.testing import CliRunner

    from relaxc.cli.main import cli

    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["build", str(SAMPLES / f"{sample}.rx"), "-t", "c", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    c_file = out / f"{sample}.c"
    usage = _stack_usage(c_file, out)
    assert usage, "gcc wrote no stack usage"
    runner = (f"{sample}_run", f"{sample}_run_body")  # the run function and its body
    big = {f: n for f, n in usage.items() if n > 512 and f not in runner}
    assert not big, f"functions with more than 512 bytes of stack: {big}"
    # and the kernels that carve scratch are the ones whose calls the plan gave one
    text = c_file.read_text()
    takers = set(re.findall(r"static void (\w+)\([^)]*unsigned char \*restrict scratch\)", text))
    assert all(re.search(rf"\b{k}\(", text.split(k, 1)[1]) for k in takers)


def test_model_calls_get_exactly_what_their_kernels_state() -> None:
    from relaxc.backend.c.kernels import scratch_bytes
    from relaxc.frontend.parser import parse_module
    from relaxc.ir.nodes import Invoke
    from relaxc.ir.verifier import verify_module

    module = parse_module((SAMPLES / "cnn.rx").read_text(), "cnn.rx")
    passes = assemble_pipeline("c", "ManifestAlloc,PlanKernelScratch", context=pipeline_context())
    out = Pipeline(passes, [VerifyInstrument()]).run(module)
    types = verify_module(out)["main"]
    seen = 0
    for stmt in out.get("main").body:  # type: ignore[union-attr]
        e = stmt.value
        if not isinstance(e, Invoke):
            continue
        op = REGISTRY.get(e.target)
        assert op is not None
        bound = bind_args(op, e.args, e.kwargs)
        ins = [types[v.name] for v in bound.inputs]
        need = scratch_bytes(e.target, bound.attrs, ins, [types[v.name] for v in e.outs])
        if need == 0:
            assert e.scratch is None, f"{e.target} got a scratch it does not use"
            continue
        assert e.scratch is not None, f"{e.target} needs {need} bytes and got none"
        t = types[e.scratch.name]
        assert isinstance(t, TensorType) and t.shape == (need,) and t.dtype == "u8"
        seen += 1
    assert seen >= 5  # the sample's convolutions, the max pool and the dense


PRIMITIVE = """
fn @convpool(%x: Tensor[(1, 8, 10, 10), f32], %w: Tensor[(8, 8, 3, 3), f32]) -> Tensor[(1, 8, 10, 10), f32]
    attrs {primitive = true} {
  %y = conv2d(%x, %w, padding=(1, 1))
  %z = relu(%y)
  %p = max_pool2d(%z, pool_size=(3, 3), strides=(1, 1), padding=(1, 1))
  return %p
}

fn @main(%x: Tensor[(1, 8, 10, 10), f32], %w: Tensor[(8, 8, 3, 3), f32]) -> Tensor[(1, 8, 10, 10), f32] {
  %a = call @convpool(%x, %w)
  %b = call @convpool(%a, %w)
  return %b
}
"""  # noqa: E501


@pytest.mark.parametrize("unpacked", [False, True], ids=["packed", "unpacked"])
def test_a_primitive_function_passes_its_scratch_to_its_kernels(
    tmp_path: Path, unpacked: bool
) -> None:
    """A primitive function whose conv2d and max pool need scratch takes the most of them
    (``attrs {scratch = N}``); each call passes one from the arena; C computes the
    interpreter's result, sanitized too."""
    from relaxc.backend.inputs import random_inputs
    from relaxc.backend.interpreter import Interpreter
    from relaxc.frontend.parser import parse_module
    from relaxc.ir.nodes import Invoke

    from .cbuild import compile_c, compile_module, emit, run_c

    module = parse_module(PRIMITIVE, "prim.rx")
    planned = compile_module(module, unpacked=True)
    callee = planned.get("convpool")
    from relaxc.backend.c.kernels import scratch_bytes

    def need(op_name: str, ins: list[TensorType], **kwargs) -> int:
        op = REGISTRY.get(op_name)
        assert op is not None
        args = tuple(Var(f"x{i}") for i in range(len(ins)))
        bound = bind_args(op, args, tuple(kwargs.items()))
        return scratch_bytes(op_name, bound.attrs, ins, [ins[0]])

    x = TensorType((1, 8, 10, 10), "f32")
    conv = need("conv2d", [x, TensorType((8, 8, 3, 3), "f32")], padding=(1, 1))
    pool = need("max_pool2d", [x], pool_size=(3, 3), strides=(1, 1), padding=(1, 1))
    assert conv > pool > 0  # the conv2d's (Winograd's blocks), the larger
    assert callee is not None and callee.attr("scratch") == conv
    invokes = [s.value for s in planned.get("main").body if isinstance(s.value, Invoke)]  # type: ignore[union-attr]
    assert len(invokes) == 2 and all(i.scratch is not None for i in invokes)
    sources = emit(module, {}, tmp_path, prefix="prim", unpacked=unpacked)
    args = random_inputs(module.get("main"), {}, 0)  # type: ignore[arg-type]
    want = Interpreter(module, {}).run("main", args, {})
    for sanitize in (False, True):
        got = run_c(compile_c(tmp_path, sources, sanitize), args, tag=f"s{sanitize}")
        assert_close(got, want, f"sanitize={sanitize}")

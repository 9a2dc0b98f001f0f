"""relaxc build --target c from the command line, the C target's refusals, and the runtime
checks of the emitted code (bounds, NULL pointers, the generated main's usage errors)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from relaxc.cli.report.analysis import memory_report
from click.testing import CliRunner

from relaxc.backend.c import emit_c
from relaxc.cli.main import cli
from relaxc.cli.units import short_bytes
from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError

from .cbuild import CC, STRICT, build, compile_module, needs_cc, run_c, run_c_raw

SAMPLES_DIR = Path(__file__).resolve().parents[3] / "samples"


def invoke(*args: object):
    return CliRunner().invoke(
        cli,
        [str(a) for a in args],
        env={"RELAXC_DEBUG": None},
        prog_name="relaxc",
        catch_exceptions=False,
    )


def assert_user_error(result, *needles: str) -> None:
    assert result.exit_code == 1, f"exit {result.exit_code}:\n{result.output}"
    for n in needles:
        assert n in result.stderr, f"{n!r} not in:\n{result.stderr}"
    assert "Traceback" not in result.output and "internal error" not in result.output


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    folder = tmp_path / "samples"
    shutil.copytree(
        SAMPLES_DIR,
        folder,
        ignore=shutil.ignore_patterns("*.py", "__pycache__", "*.rxb", "*.lowered.rx"),
    )
    return folder


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ---------------------------------------------------------------------------------------
# The command.


def test_build_writes_the_model_into_a_folder(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "deeper"
    result = invoke("build", samples / "cnn.rx", "-t", "c", "-o", out)
    assert result.exit_code == 0, result.output
    assert files_in(out) == ["cnn.c", "cnn.h"]
    h, c = out / "cnn.h", out / "cnn.c"  # each file with its size (cnn's weights are inline)
    sizes = f"{h} ({short_bytes(h.stat().st_size)}), {c} ({short_bytes(c.stat().st_size)})"
    assert f"wrote {sizes}" in result.stderr
    # (80 KiB: batch norm and relu write over their conv's output, the branches into the
    # concat's halves, and the residual add over the concat; plus the 128-byte row buffer of
    # the max pool's C kernel, planned where it runs, at the peak)
    assert "arena 80.1 KiB (82,048 B)" in result.stderr  # the memory summary, as for every target
    c = (out / "cnn.c").read_text()
    assert (
        "cnn_fp_conv2d(" in c
        and "static uint8_t cnn_arena[82048] __attribute__((aligned(64)));" in c
    )
    assert "int32_t cnn_run(const float *image, float *logits)" in (out / "cnn.h").read_text()


def test_build_defaults_to_the_input_folder(samples: Path) -> None:
    result = invoke("build", samples / "mlp.rx", "-t", "c", "--emit-main")
    assert result.exit_code == 0, result.output
    assert {"mlp.c", "mlp.h", "mlp_main.c"} <= set(files_in(samples))
    assert result.stderr.splitlines()[-1].startswith(f"wrote {samples}")
    quiet = invoke("build", samples / "mlp.rx", "-t", "c", "--emit-main", "-q")
    assert quiet.exit_code == 0 and quiet.output == ""  # -q: nothing but errors (issue 18)


def test_unpacked_and_prefix(samples: Path, tmp_path: Path) -> None:
    result = invoke(
        "build", samples / "cnn.rx", "-t", "c", "-o", tmp_path, "--unpacked", "--prefix", "net"
    )
    assert result.exit_code == 0, result.output
    c = (tmp_path / "net.c").read_text()
    assert "TVMValue" not in c and "net_f_" not in c and "net_k0_conv2d(image, " in c
    assert "int32_t net_run(" in (tmp_path / "net.h").read_text()


def test_unpacked_with_a_pipeline_without_legalize(samples: Path, tmp_path: Path) -> None:
    # Kills are fine for the C target (they free nothing in a static arena), and the scratch
    # of its kernels is planned by PlanKernelScratch.
    pipeline = "ManifestAlloc,PlanKernelScratch,PlanMemory,KillAfterLastUse"
    result = invoke(
        "build", samples / "mlp.rx", "-t", "c", "-p", pipeline, "-o", tmp_path, "--unpacked"
    )
    assert result.exit_code == 0, result.output
    assert "TVMValue" not in (tmp_path / "mlp.c").read_text()


def test_a_pipeline_without_kernel_scratch_is_refused_for_c(samples: Path, tmp_path: Path) -> None:
    # -p vm plans no scratch: the C kernel of dense needs some, and nothing is taken silently
    # from the stack instead.
    out = tmp_path / "out"
    result = invoke("build", samples / "mlp.rx", "-t", "c", "-p", "vm", "-o", out)
    assert result.exit_code == 1
    assert "the C kernel of dense needs 4992 bytes of scratch and this call passes none" in (
        result.stderr
    )
    assert "run PlanKernelScratch before PlanMemory" in result.stderr
    assert "Traceback" not in result.output and not out.exists()


def test_a_pipeline_without_plan_workspace_is_refused_for_c(samples: Path, tmp_path: Path) -> None:
    # @fused_add_subtract computes %0, which it does not return: only PlanWorkspace places it
    # (the C target decides no memory), so without the pass the build stops at %0.
    out = tmp_path / "out"
    src = samples / "relay_memory.rx"
    pipeline = "ManifestAlloc,PlanMemory,LegalizePackedCalls"
    result = invoke("build", src, "-t", "c", "-p", pipeline, "-o", out)
    assert_user_error(
        result,
        f"{src}:6:3: error: the C target needs lowered primitive functions",
        "@fused_add_subtract computes %0",
        "run PlanWorkspace",
        "%0 = add(%p0, %p0)",
    )
    assert not out.exists()
    with_pass = "ManifestAlloc,PlanWorkspace,PlanMemory,LegalizePackedCalls"
    result = invoke("build", src, "-t", "c", "-p", with_pass, "-o", out)
    assert result.exit_code == 0, result.output
    assert (out / "relay_memory.c").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (("-t", "vm", "--unpacked"), "--unpacked is only for --target c"),
        (("-t", "ir", "--emit-main"), "--emit-main is only for --target c"),
        (("--prefix", "x"), "--prefix is only for --target c"),
    ],
)
def test_c_options_need_the_c_target(samples: Path, args: tuple, message: str) -> None:
    result = invoke("build", samples / "mlp.rx", *args)
    assert result.exit_code == 2 and message in result.stderr


@pytest.mark.parametrize("prefix", ["int", "a b", "_x", "x__y", "9lives", "x" * 33])
def test_bad_prefix(samples: Path, tmp_path: Path, prefix: str) -> None:
    assert_user_error(
        invoke("build", samples / "mlp.rx", "-t", "c", "-o", tmp_path, "--prefix", prefix),
        "is not usable as a C identifier prefix",
    )
    assert files_in(tmp_path) == ["samples"]


def test_output_must_be_a_folder(samples: Path) -> None:
    (samples / "notes.txt").write_text("not a folder")
    before = files_in(samples)
    assert_user_error(
        invoke("build", samples / "mlp.rx", "-t", "c", "-o", samples / "notes.txt"),
        "--target c writes into a folder, and this is a file",
    )
    assert_user_error(
        invoke("build", samples / "mlp.rx", "-t", "c", "-o", "-"), "give a folder with -o, not '-'"
    )
    assert files_in(samples) == before


def test_never_writes_over_an_input(tmp_path: Path) -> None:
    # A model whose file name is the header the build would write.
    src = tmp_path / "m.h"
    src.write_text((SAMPLES_DIR / "relay_memory.rx").read_text())
    result = invoke("build", src, "-t", "c", "--prefix", "m", "-o", tmp_path)
    assert_user_error(result, f"refusing to write {tmp_path / 'm.h'}: it is one of the inputs")
    assert files_in(tmp_path) == ["m.h"]


UNBOUNDED = """
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  %a = exp(%x)
  %b = relu(%a)
  return %b
}"""


def test_unbounded_dynamic_allocation_is_a_clear_error(tmp_path: Path) -> None:
    src = tmp_path / "dyn.rx"
    src.write_text(UNBOUNDED)
    out = tmp_path / "out"
    # relaxc build refuses it before emitting anything (whatever --allow-unbounded says),
    # naming the dim, the parameter it comes from and the attribute that bounds it
    for extra in ((), ("--allow-unbounded",)):
        result = invoke("build", src, "-t", "c", "-o", out, *extra)
        assert_user_error(
            result,
            "error: @main's memory cannot be planned: the dim n (axis 0 of %x) has no upper bound",
            "%a_storage: 64 * ((16 * n + 63) / 64) bytes",
            "note: the C target needs every allocation in static memory",
            "@main attrs {upper_bounds = {n = ...}}",
        )
        assert not out.exists()
    # emit_c itself (a caller of the API) says where and names both ways to bound it
    with pytest.raises(RxError) as e:
        emit_c(compile_module(parse_module(UNBOUNDED, "dyn.rx")))
    assert str(e.value.loc) == "dyn.rx:3:3"
    assert e.value.message == (
        "the C target needs every allocation planned into static memory, "
        "but %a_storage has the unbounded size 64 * ((16 * n + 63) / 64) (n without "
        "an upper bound); give @main attrs {upper_bounds = {n = ...}} (for an ONNX model: "
        "relaxc build --bound n=...)"
    )


def test_unplanned_ir_is_refused() -> None:
    m = parse_module((SAMPLES_DIR / "relay_memory.rx").read_text(), "r.rx")
    with pytest.raises(
        RxError, match="the C target needs planned memory, but @main was not planned"
    ) as info:
        emit_c(compile_module(m, passes="ManifestAlloc"))
    # the hint names the c pipeline and every pass the C target needs before it
    assert "-p c" in info.value.message
    assert all(p in info.value.message for p in ("ManifestAlloc", "PlanWorkspace", "PlanMemory"))
    with pytest.raises(RxError, match="needs planned memory"):
        emit_c(m)


def test_calls_of_non_primitive_functions_are_refused() -> None:
    m = parse_module(
        """
fn @helper(%a: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %b = exp(%a)
  return %b
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = call @helper(%x)
  return %y
}""",
        "t.rx",
    )
    with pytest.raises(
        RxError,
        match="the C target cannot call @helper: only primitive functions become C functions",
    ):
        emit_c(compile_module(m))


def test_primitive_intermediates_without_room_live_in_a_planned_workspace() -> None:
    """%u dies where the (non in-place) transpose writes the output: PlanWorkspace gives it
    workspace bytes that the caller's arena holds (this used to be refused: "a kernel gets
    no scratch memory"); the C prints the placement and its static memory is the report's."""
    m = parse_module(
        """
fn @f(%a: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] attrs {primitive = true} {
  %t = transpose(%a)
  %u = exp(%t)
  %r = transpose(%u)
  return %r
}

fn @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  %y = call @f(%x)
  return %y
}""",
        "t.rx",
    )
    compiled = compile_module(m)
    f = compiled.get("f")
    assert f.attr("workspace") == 64 and f.attr("outputs") == 1
    report = {r.name: r for r in memory_report(compiled)}["main"]
    assert report.arena_bytes == 64  # the workspace: %t and %u share the output and 24 bytes of it
    text = emit_c(compiled).files["model.c"]
    assert (
        "uint8_t *v_workspace" in text
        and "MODEL_WORKSPACE_BYTES 64" in emit_c(compiled).files["model.h"]
    )


# ---------------------------------------------------------------------------------------
# Runtime checks of the emitted code.

BOUNDED = """
fn @main(%x: Tensor[(n, 4), f32], %y: Tensor[(4,), f32]) -> Tuple[Tensor[(n, 4), f32], Tensor[(4,), f32]]
    attrs {upper_bounds = {n = 8}} {
  %a = exp(%x)
  %b = add(%a, %y)
  return (%b, %y)
}"""  # noqa: E501


@needs_cc
def test_bounds_and_usage_at_run_time(tmp_path: Path) -> None:
    built = build(BOUNDED, tmp_path, prefix="bnd", sanitize=True)
    x = np.ones((9, 4), np.float32)
    y = np.arange(4, dtype=np.float32)
    x.tofile(tmp_path / "x9.bin")
    y.tofile(tmp_path / "y.bin")
    r = run_c_raw(built, ["x9.bin", "y.bin", "b.bin", "yy.bin", "n=9"])
    assert r.returncode == 1 and r.stderr == "dimension 'n' is larger than its upper bound 8\n"
    r = run_c_raw(built, ["x9.bin", "y.bin", "b.bin", "yy.bin", "n=8"])
    assert r.returncode == 1 and "x9.bin: expected 128 bytes" in r.stderr
    r = run_c_raw(built, ["x9.bin", "y.bin", "b.bin"])
    assert (
        r.returncode == 2
        and "usage: " in r.stderr
        and "bnd_san X.bin Y.bin B.bin OUT_Y.bin n=N" in r.stderr
    )
    r = run_c_raw(built, ["x9.bin", "y.bin", "b.bin", "yy.bin"])
    assert r.returncode == 2 and "missing dimension n=N" in r.stderr
    r = run_c_raw(built, ["x9.bin", "y.bin", "b.bin", "yy.bin", "m=3"])
    assert r.returncode == 2 and "unknown dimension in 'm=3'" in r.stderr
    # n = 0: empty tensors are fine.
    b, yy = run_c(built, [np.zeros((0, 4), np.float32), y], {"n": 0})
    assert b.shape == (0, 4) and yy.tolist() == y.tolist()


@needs_cc
def test_run_function_checks_its_pointers(tmp_path: Path) -> None:
    build(BOUNDED, tmp_path, prefix="bnd")
    (tmp_path / "probe.c").write_text("""
#include "bnd.h"
#include <stdio.h>
int main(void)
{
    float x[8] = {0}, y[4] = {0}, b[8], yy[4];
    printf("%d %d %d %d|%s\\n", (int)bnd_run(NULL, y, b, yy, 2), (int)bnd_run(x, y, b, NULL, 2),
           (int)bnd_run(x, y, b, yy, 9), (int)bnd_run(x, y, b, yy, 2), bnd_strerror(BND_ERR_NULL_ARGUMENT));
    return 0;
}
""")  # noqa: E501
    subprocess.run(
        [CC, *STRICT, "bnd.c", "probe.c", "-lm", "-o", "probe"], cwd=tmp_path, check=True
    )
    out = subprocess.run(
        ["./probe"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert out == "1 1 3 0|an input or output pointer is NULL\n"
    assert "#define BND_MAX_N 8 /* upper bound of n */" in (tmp_path / "bnd.h").read_text()


@needs_cc
def test_unbounded_dims_are_runtime_parameters(tmp_path: Path) -> None:
    # Only the caller's output depends on n: no allocation needs a bound.
    built = build(
        """
fn @main(%x: Tensor[(n, 2), f32]) -> Tensor[(n, 2), f32] {
  %y = tanh(%x)
  return %y
}""",
        tmp_path,
        prefix="tanhm",
    )
    x = np.linspace(-1, 1, 10, dtype=np.float32).reshape(5, 2)
    (y,) = run_c(built, [x], {"n": 5})
    np.testing.assert_allclose(y, np.tanh(x), rtol=1e-6)
    header = (tmp_path / "tanhm.h").read_text()
    assert (
        " *   n: no upper bound\n" in header
        and "#define TANHM_ERR_DIM_N 3 /* dimension 'n' is larger than 2147483647 */" in header
    )


# ---------------------------------------------------------------------------------------
# Static memory beyond one arena.

RUNTIME_CALLS = """
fn @main(%x: Tensor[(4, 4), f32]) -> Tensor[(16,), f32] {
  %a = exp(%x)
  %r: Tensor[(16,), f32] = call_packed("vm.builtin.reshape", %a, (16,))
  %b = relu(%r)
  %c = tanh(%b)
  call_packed("relaxc.copy", %c, %b)
  %d = add(%b, %r)
  return %d
}"""


@needs_cc
@pytest.mark.parametrize("planner", ["best", "none"])
def test_runtime_calls_and_unplanned_allocations(tmp_path: Path, planner: str) -> None:
    from relaxc.backend.interpreter import Interpreter

    from .cbuild import assert_close, compile_c

    m = parse_module(RUNTIME_CALLS, "t.rx")
    planned = compile_module(m, passes=f"ManifestAlloc,PlanMemory{{planner={planner}}}")
    sources = emit_c(planned, {}, prefix="rt", emit_main=True)
    for name, text in sources.files.items():
        (tmp_path / name).write_text(text)
    built = compile_c(tmp_path, sources, sanitize=True)
    x = np.linspace(-2, 2, 16, dtype=np.float32).reshape(4, 4)
    assert_close(run_c(built, [x]), Interpreter(m).run("main", [x]))
    info = sources.info
    header = sources.files["rt.h"]
    if planner == "none":  # every storage is a static array of its own, reported as such
        assert (
            info.workspace_bytes == 0
            and info.static_bytes == 192
            and "other allocation %a_storage" in header
        )
    else:
        assert (
            info.workspace_bytes == 192 and info.static_bytes == 192
        )  # %a, %b and %c all live at once
    assert f"#define RT_STATIC_BYTES {info.static_bytes}" in header


@needs_cc
def test_one_arena_per_memory_scope(tmp_path: Path) -> None:
    text = """
fn @main(%x: Tensor[(8,), f32]) -> Tensor[(8,), f32] attrs {planned = true} {
  %s1 = memory.alloc_storage(32, align=16, scope="global")
  %a = memory.alloc_tensor(%s1, 0, (8,), f32)
  invoke exp(%x) outs (%a)
  %s2 = memory.alloc_storage(32, align=64, scope="shared")
  %b = memory.alloc_tensor(%s2, 0, (8,), f32)
  invoke relu(%a) outs (%b)
  %o_storage = memory.alloc_storage(32, external=true)
  %o = memory.alloc_tensor(%o_storage, 0, (8,), f32)
  invoke add(%a, %b) outs (%o)
  return %o
}"""
    from relaxc.passes.plan_memory import PlanMemory

    from .cbuild import compile_c

    planned = PlanMemory()(parse_module(text, "t.rx"))
    sources = emit_c(planned, {}, prefix="sc", emit_main=True)
    c = sources.files["sc.c"]
    assert "static uint8_t sc_arena[32] __attribute__((aligned(16)));" in c
    assert "static uint8_t sc_arena_shared[64] __attribute__((aligned(64)));" in c
    for name, t in sources.files.items():
        (tmp_path / name).write_text(t)
    built = compile_c(tmp_path, sources)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    (y,) = run_c(built, [x])
    np.testing.assert_allclose(y, np.exp(x) + np.maximum(np.exp(x), 0), rtol=1e-6)

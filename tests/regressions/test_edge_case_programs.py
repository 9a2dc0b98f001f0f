"""Regressions for the wrong results of issue 14 ("Wrong results to fix"), each as the issue
states it, through the same commands a user runs (click's CliRunner, in-process) or cc."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from relaxc.cli.main import cli
from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError
from relaxc.ir.verifier import verify_module

CC = shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc) on this machine")
STRICT = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def relaxc(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, list(args))
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.output


def write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text)
    return p


# -- 1. Killed 0-d tensors -------------------------------------------------------------------

ZERO_D = """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = sum(%x)
  %y = add(%x, %s)
  return %y
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f64", "i16", "u8"])
def test_killed_0d_tensor_runs_checked_and_lowered(tmp_path: Path, dtype: str) -> None:
    src = write(tmp_path, "k.rx", ZERO_D.replace("f32", dtype))
    assert relaxc("build", str(src), "-q")[0] == 0
    code, out = relaxc("run", str(tmp_path / "k.rxb"), "--check", "--poison")
    assert code == 0, out
    assert "bit-identical" in out
    lowered = tmp_path / "k.lowered.rx"
    assert relaxc("build", str(src), "-t", "ir", "-o", str(lowered), "-q")[0] == 0
    assert "memory.kill_tensor(%s)" in lowered.read_text()  # the 0-d value really is killed
    code, out = relaxc("run", str(lowered))
    assert code == 0, out


# -- 2 and 10. The --emit-main driver ---------------------------------------------------------

NO_PARAMS = """
fn @main() -> Tensor[(), i32] {
  %c = const(7, dtype=i32)
  %y = add(%c, %c)
  return %y
}
"""

ONE_INPUT = """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = add(%x, %x)
  return %y
}
"""


@needs_cc
def test_emit_main_without_parameters_builds_with_werror_and_runs(tmp_path: Path) -> None:
    src = write(tmp_path, "em.rx", NO_PARAMS)
    assert (
        relaxc("build", str(src), "-t", "c", "--emit-main", "-o", str(tmp_path / "c"), "-q")[0] == 0
    )
    c = tmp_path / "c"
    assert "read_file" not in (c / "em_main.c").read_text()
    subprocess.run([CC, *STRICT, "em.c", "em_main.c", "-lm", "-o", "em"], cwd=c, check=True)
    subprocess.run(["./em", "out.bin"], cwd=c, check=True)
    assert np.fromfile(c / "out.bin", "<i4").tolist() == [14]


@needs_cc
def test_emit_main_frees_every_buffer_on_a_wrong_sized_input(tmp_path: Path) -> None:
    """LeakSanitizer found the driver's buffers leaked when an input file had the wrong size."""
    src = write(tmp_path, "one.rx", ONE_INPUT)
    assert (
        relaxc("build", str(src), "-t", "c", "--emit-main", "-o", str(tmp_path / "c"), "-q")[0] == 0
    )
    c = tmp_path / "c"
    flags = ["-std=c99", "-O0", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined"]
    if (
        subprocess.run([CC, *flags, "one.c", "one_main.c", "-lm", "-o", "one"], cwd=c).returncode
        != 0
    ):
        pytest.skip("this cc cannot build with AddressSanitizer")
    (c / "short.bin").write_bytes(b"\0" * 8)
    env = {"ASAN_OPTIONS": "detect_leaks=1:exitcode=99", "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        ["./one", "short.bin", "out.bin"], cwd=c, capture_output=True, text=True, env=env
    )
    assert r.returncode == 1, r.stderr  # the driver's own failure, not LeakSanitizer's 99
    assert "expected 16 bytes" in r.stderr and "LeakSanitizer" not in r.stderr
    np.arange(4, dtype="<f4").tofile(c / "x.bin")
    r = subprocess.run(
        ["./one", "x.bin", "out.bin"], cwd=c, capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    assert np.fromfile(c / "out.bin", "<f4").tolist() == [0.0, 2.0, 4.0, 6.0]


# -- 3. A tuple field that never reaches the return --------------------------------------------

DEAD_FIELD = """
fn @k(%x: Tensor[(256,), f32]) -> Tuple[Tensor[(256,), f32], Tensor[(256,), f32]] attrs {primitive = true} {
  %a = exp(%x)
  %b = add(%a, %x)
  %t = (%a, %b)
  return %t
}

fn @main(%x: Tensor[(256,), f32]) -> Tensor[(256,), f32] {
  %r = call @k(%x)
  %y = %r.1
  return %y
}
"""  # noqa: E501


def test_tuple_field_not_returned_is_planned_and_counted(tmp_path: Path) -> None:
    src = write(tmp_path, "tf.rx", DEAD_FIELD)
    code, out = relaxc("report", str(src), "--json")
    assert code == 0, out
    import json

    main = next(f for f in json.loads(out)["functions"] if f["name"] == "main")
    assert main["arena_bytes"] == 1024
    code, out = relaxc("build", str(src), "--max-arena", "64", "-q")
    assert code == 1 and "memory budget exceeded" in out
    ir = tmp_path / "tf.out.rx"
    assert relaxc("build", str(src), "-t", "ir", "-o", str(ir), "-q")[0] == 0
    text = ir.read_text()
    assert text.count("external=true") == 1  # field 1 only
    assert relaxc("build", str(src), "-q")[0] == 0
    code, out = relaxc("run", str(tmp_path / "tf.rxb"), "--check", "--poison")
    assert code == 0 and "bit-identical" in out


@needs_cc
def test_tuple_field_not_returned_is_in_the_c_arena(tmp_path: Path) -> None:
    src = write(tmp_path, "tf.rx", DEAD_FIELD)
    assert relaxc("build", str(src), "-t", "c", "-o", str(tmp_path / "c"), "-q")[0] == 0
    subprocess.run([CC, *STRICT, "-c", "tf.c"], cwd=tmp_path / "c", check=True)
    sizes = subprocess.run(
        ["size", "-A", "tf.o"], cwd=tmp_path / "c", capture_output=True, text=True
    ).stdout
    bss = next(int(line.split()[1]) for line in sizes.splitlines() if line.startswith(".bss"))
    assert bss == 1024  # the arena, which the report counts: nothing unreported


# -- 4. A tuple whose alias is returned ---------------------------------------------------------

TUPLE_ALIAS = """
fn @main(%x: Tensor[(4,), f32]) -> Tuple[Tensor[(4,), f32], Tensor[(4,), f32]] {
  %a = exp(%x)
  %t = (%a, %x)
  %u = %t
  return %u
}
"""


def test_kill_after_last_use_never_kills_a_tuple_whose_alias_is_returned(tmp_path: Path) -> None:
    src = write(tmp_path, "t.rx", TUPLE_ALIAS)
    for target in ("vm", "c"):
        code, out = relaxc("passes", str(src), "-t", target)
        assert code == 0, out
        assert "vm.kill_object" not in out


def test_kill_checker_rejects_a_kill_of_an_object_returned_under_another_name() -> None:
    text = TUPLE_ALIAS.replace("  %u = %t\n", "  %u = %t\n  vm.kill_object(%t)\n")
    with pytest.raises(
        RxError,
        match=r"vm.kill_object\(%t\) releases an object the function returns "
        r"\(as %u\)",
    ) as e:
        verify_module(parse_module(text, "t.rx"))
    assert e.value.loc is not None and e.value.loc.line == 6


def test_kill_checker_rejects_a_use_of_another_name_of_a_released_object() -> None:
    text = """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %t = (%x, %x)
  %u = %t
  vm.kill_object(%t)
  %y = %u.0
  return %y
}
"""
    with pytest.raises(RxError, match=r"%u is used after the kill of %t at line 5 released it"):
        verify_module(parse_module(text, "t.rx"))


def test_kill_after_last_use_kills_a_tuple_once_after_its_aliases_last_use() -> None:
    from relaxc.passes.kill_after_last_use import KillAfterLastUse

    text = """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %t = (%x, %x)
  %u = %t
  %v = %u
  %y = %v.0
  %z = exp(%y)
  return %z
}
"""
    out = KillAfterLastUse()(parse_module(text, "t.rx"))
    body = [s for s in out.get("main").body]
    kills = [s for s in body if "kill_object" in repr(s)]
    assert len(kills) == 1
    verify_module(out)  # and the kill checker agrees
    index = body.index(kills[0])
    assert body[index - 1].name == "y"  # right after the last use of any name of the object


# -- 5. Running the C pipeline's IR -------------------------------------------------------------

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_running_c_lowered_ir_is_refused_with_a_sentence(tmp_path: Path) -> None:
    code, legal = relaxc("passes", str(SAMPLES / "relay_memory.rx"), "-t", "c")
    assert code == 0
    src = write(tmp_path, "legal.rx", legal)
    code, out = relaxc("run", str(src))
    assert code == 1
    assert "lowered for the C target" in out and "LegalizePackedCalls" in out
    assert "legal.rx:" in out  # located
    code, out = relaxc("build", str(src), "-p", "none", "-o", str(tmp_path / "legal.rxb"))
    assert code == 1 and "lowered for the C target" in out
    assert not (tmp_path / "legal.rxb").exists()
    assert (
        relaxc("build", str(src), "-t", "c", "-p", "none", "-o", str(tmp_path / "c"), "-q")[0] == 0
    )


# -- 6. Inline constants out of range -----------------------------------------------------------


@pytest.mark.parametrize(
    "literal, message",
    [
        ("[-3, 1], dtype=u8", "-3 is out of range for u8 (0 to 255)"),
        ("[300], dtype=i8", "300 is out of range for i8 (-128 to 127)"),
        ("[9223372036854775808], dtype=i64", "9223372036854775808 is out of range for i64"),
        ("[1.5], dtype=i32", "1.5 is not an integer"),
        ("[1e6], dtype=f16", "1000000.0 is out of range for f16"),
        ("[2], dtype=bool", "2 is not a bool"),
    ],
)
def test_inline_constant_out_of_range_is_a_located_check_error(
    tmp_path: Path, literal: str, message: str
) -> None:
    n = literal.count(",")  # elements: commas before dtype=
    dtype = literal.split("dtype=")[1]
    src = write(
        tmp_path,
        "c.rx",
        f"fn @main() -> Tensor[({n},), {dtype}] {{\n  %c = const({literal})\n  return %c\n}}\n",
    )
    code, out = relaxc("check", str(src))
    assert code == 1
    assert "c.rx:2:8: error: const: " + message in out


@pytest.mark.parametrize(
    "literal",
    [
        "[0, 255], dtype=u8",
        "[-128, 127], dtype=i8",
        "[2.0], dtype=i32",
        "[true, 0], dtype=bool",
        "[65504.0], dtype=f16",
        "[inf], dtype=f32",
    ],
)
def test_inline_constants_in_range_are_accepted(tmp_path: Path, literal: str) -> None:
    n = literal.count(",")
    dtype = literal.split("dtype=")[1]
    src = write(
        tmp_path,
        "c.rx",
        f"fn @main() -> Tensor[({n},), {dtype}] {{\n  %c = const({literal})\n  return %c\n}}\n",
    )
    code, out = relaxc("check", str(src))
    assert code == 0, out


# -- 7. alloc_tensor outside its storage ---------------------------------------------------------


def test_alloc_tensor_overrunning_static_storage_is_refused_by_check_and_c(tmp_path: Path) -> None:
    text = """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = memory.alloc_storage(16)
  %t = memory.alloc_tensor(%s, 8, (4,), f32)
  invoke add(%x, %x) outs (%t)
  return %t
}
"""
    src = write(tmp_path, "ov.rx", text)
    for args in (
        ("check", str(src)),
        ("build", str(src), "-t", "c", "-p", "none", "-o", str(tmp_path / "c")),
    ):
        code, out = relaxc(*args)
        assert code == 1
        assert (
            "ov.rx:4:8: error: memory.alloc_tensor: %t at bytes [8, 24) does not fit in "
            "storage %s of 16" in out
        )
    assert not (tmp_path / "c").exists()


# -- 8. Alignments ------------------------------------------------------------------------------


@pytest.mark.parametrize("align", [2**62, 8192, 3])
def test_alignment_beyond_the_limit_is_a_check_error(tmp_path: Path, align: int) -> None:
    text = f"""
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {{
  %s = memory.alloc_storage(16, align={align})
  %t = memory.alloc_tensor(%s, 0, (4,), f32)
  invoke add(%x, %x) outs (%t)
  return %t
}}
"""
    code, out = relaxc("check", str(write(tmp_path, "al.rx", text)))
    assert code == 1
    assert f"align={align} is not a power of two from 1 to 4096" in out


def test_alignment_at_the_limit_runs(tmp_path: Path) -> None:
    text = """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = memory.alloc_storage(16, align=4096)
  %t = memory.alloc_tensor(%s, 0, (4,), f32)
  invoke add(%x, %x) outs (%t)
  return %t
}
"""
    src = write(tmp_path, "al.rx", text)
    assert relaxc("check", str(src))[0] == 0
    assert relaxc("run", str(src))[0] == 0

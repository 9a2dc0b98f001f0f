"""One named test per bug the hostile inputs found; each failed before its fix.

Each docstring gives the input, the symptom, the cause and the fix.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tempfile
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.vm import codegen, load_file
from relaxc.backend.vm import loader as vm_loader

from .harness import SAMPLES, changed, check_problems, crash_problems, invoke, run_subprocesses, snapshot

RELAY = (SAMPLES / "relay_memory.rx").read_text()


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _fn(params: str, body: str = "", ret: str = "Tensor[(1,), f32]", result: str = "%x", bounds: str = "") -> str:
    attrs = f" attrs {{upper_bounds = {{{bounds}}}}}" if bounds else ""
    return f"fn @main({params}) -> {ret}{attrs} {{\n{body}  return {result}\n}}\n"


def _ones(rank: int) -> str:
    return "(" + ", ".join(["1"] * rank) + ")"


# ---------------------------------------------------------------------------------------
# 1. A dtype (or inf/nan) inside a dimension expression


@pytest.mark.parametrize("expr, col, word", [
    ("u32 * 10", 22, "'u32' is a dtype"),
    ("n * f32", 26, "'f32' is a dtype"),
    ("max(n, i8)", 29, "'i8' is a dtype"),
    ("-f32", 23, "'f32' is a dtype"),
    ("inf * 2", 22, "'inf' is a number"),
    ("n + -nan", 27, "'nan' is a number"),
])
@pytest.mark.parametrize("command", ["check", "run", "report"])
def test_dtype_in_a_dimension_expression(tmp_path: Path, expr: str, col: int, word: str, command: str) -> None:
    """``reshape(%x1, (u32 * 10,))`` (a mutation of relay_memory.rx): every command ended in
    "internal error: AttributeError: 'DType' object has no attribute 'lhs'" (exit 3). The
    parser built ``BinOp('*', DType('u32'), 10)``: a dimension's name may be a dtype or
    inf/nan, and arithmetic took any value. Now the parser refuses it at the operand."""
    path = _write(tmp_path, "m.rx", RELAY.replace("(n * 10,))", f"({expr},))"))
    o = invoke(command, path)
    assert crash_problems(o, codes=(1,)) == [], o
    assert o.stderr.startswith(f"{path}:14:{col}: error: {word}, not a dimension"), o
    assert check_problems(invoke("check", path), path, path.read_text()) == []


# ---------------------------------------------------------------------------------------
# 2. .rxb files the loader refuses


def _nested_tuple(depth: int) -> str:
    t = "Tensor[(2,), f32]"
    for _ in range(depth):
        t = f"Tuple[{t}]"
    return t


BEYOND_THE_FORMAT = {
    "rank_33": (_fn("%x: Tensor[" + _ones(33) + ", f32]", ret="Tensor[" + _ones(33) + ", f32]"),
                ":1:10:", "a tensor type has rank 33; .rxb files hold tensors of rank at most 32"),
    "type_nested_50_deep": (_fn(f"%x: {_nested_tuple(50)}", ret=_nested_tuple(50)),
                            ":1:10:", "a type nests deeper than the 48 levels .rxb files hold"),
    "dim_nested_60_deep": (_fn("%n: Tensor[(n,), f32], %x: Tensor[(n" + " + 1" * 60 + ",), f32]",
                               ret="Tensor[(n,), f32]", result="%n", bounds="n = 4"),
                           ":1:33:", "a value nests deeper than the 48 levels .rxb files hold"),
    "literal_of_rank_40": (_fn("%x: Tensor[(1,), f32]", "  %c = const(" + "[" * 40 + "1.0" + "]" * 40 + ", f32)\n"),
                           ":2:3:", "the literal has rank 40; .rxb files hold arrays of rank at most 32"),
    "dim_of_8192_terms": (_fn(", ".join(f"%a{i}: Tensor[(a{i},), f32], %b{i}: Tensor[(b{i},), f32]" for i in range(13))
                              + ", %x: Tensor[(1,), f32]",
                              "  %s = memory.alloc_storage(" + " * ".join(f"(a{i} + b{i})" for i in range(13)) + ")\n",
                              bounds=", ".join(f"a{i} = 1, b{i} = 1" for i in range(13))),
                          ":2:3:", "a dimension expression (or a shape's product) expands to more than 4,096 terms"),
}


@pytest.mark.parametrize("name", list(BEYOND_THE_FORMAT))
def test_build_never_writes_an_rxb_its_loader_refuses(tmp_path: Path, name: str) -> None:
    """Programs that check fine but exceed a limit of the .rxb format (rank 32, nesting 48,
    4,096 terms per dim): ``relaxc build`` wrote the file and said so, then ``relaxc run``
    and ``disasm`` refused it ("... is not a valid relaxc bytecode file: rank is 33, more than
    the 32 allowed"). The writer did not check the limits the loader checks. Now it does,
    and the error points at the value; nothing is written."""
    text, where, words = BEYOND_THE_FORMAT[name]
    path = _write(tmp_path, "m.rx", text)
    assert invoke("check", path).code == 0
    o = invoke("build", path, "-p", "none", "-q")
    assert crash_problems(o, codes=(1,)) == [], o
    assert o.stderr.startswith(f"{path}{where} error: @main cannot be written as VM bytecode: {words}"), o
    assert not (tmp_path / "m.rxb").exists()
    stats = invoke("run", path, "--stats")  # compiles in memory (vm pipeline): fine, or the same error
    assert crash_problems(stats) == [] and "is not a valid relaxc bytecode file" not in stats.stderr, stats
    assert stats.code == 0 or words in stats.stderr, stats
    assert invoke("build", path, "-t", "ir", "-o", "-", "-q").code == 0  # other targets are not limited


def test_an_inline_literal_larger_than_the_format_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for inline literals (more than 2**20 elements; the limit is lowered here so
    the test stays small): built, then refused by the loader."""
    monkeypatch.setattr(codegen, "MAX_INLINE_ELEMENTS", 8)
    monkeypatch.setattr(vm_loader, "MAX_INLINE_ELEMENTS", 8)
    path = _write(tmp_path, "m.rx", _fn("%x: Tensor[(1,), f32]", "  %c = const([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, "
                                                                 "7.0, 8.0, 9.0], f32)\n"))
    o = invoke("build", path, "-p", "none", "-q")
    assert crash_problems(o, codes=(1,)) == [], o
    assert "the literal has 9 elements; .rxb files hold inline literals of at most 8" in o.stderr
    assert not (tmp_path / "m.rxb").exists()
    path.write_text(path.read_text().replace(", 9.0", ""))
    assert invoke("build", path, "-p", "none", "-q").code == 0
    load_file(tmp_path / "m.rxb")


# ---------------------------------------------------------------------------------------
# 3. .npz files


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


@pytest.fixture
def mlp(tmp_path: Path) -> Path:
    for suffix in (".rx", ".npz"):
        shutil.copy(SAMPLES / f"mlp{suffix}", tmp_path / f"mlp{suffix}")
    return tmp_path / "mlp.rx"


@pytest.mark.parametrize("command", ["check", "run", "build", "report"])
def test_a_weights_member_that_is_not_an_npy_array(mlp: Path, command: str) -> None:
    """A weights .npz whose member ``fc1.weight.npy`` is not a .npy array (numpy hands such
    a member back as raw bytes): "internal error: AttributeError: 'bytes' object has no
    attribute 'dtype'" (exit 3). Now every member is checked to be a .npy array."""
    params = mlp.parent / "w.npz"
    params.write_bytes(_zip({"fc1.weight.npy": b"not an npy array"}))
    o = invoke(command, mlp, "--params", params)
    assert crash_problems(o, codes=(1,)) == [], o
    assert f"weights file {params}: fc1.weight.npy is not a .npy array relaxc can read" in o.stderr


def _huge_npy() -> bytes:
    text = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }"
    text += b" " * (64 - (10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + b"\0" * 16


@pytest.mark.parametrize("option", ["--inputs", "--params"])
def test_an_npy_header_that_claims_a_huge_shape(mlp: Path, option: str) -> None:
    """An .npz member whose header claims shape (10**12,) over 16 bytes of data: numpy
    tried to allocate 3.6 TiB, "internal error: MemoryError" (exit 3). Now headers are read
    first and checked against the bytes the member holds."""
    path = mlp.parent / "huge.npz"
    path.write_bytes(_zip({"x.npy": _huge_npy()}))
    o = invoke("run", mlp, option, path)
    assert crash_problems(o, codes=(1,)) == [], o
    assert "x.npy declares shape (1000000000000,) of float32 (4,000,000,000,000 bytes) but holds only 16" in o.stderr


@pytest.mark.parametrize("content", [b"PK", b"PK\x03", b"\x80\x04\x95"])
def test_a_short_file_is_not_called_a_pickle(mlp: Path, content: bytes) -> None:
    """A 2-byte file ``PK`` as --inputs: "holds an array relaxc cannot load safely (This
    file contains pickled (object) data. If you trust the file you can load it unsafely
    using the `allow_pickle=` keyword argument ...)" — numpy's advice to unpickle, for a
    file that is no pickle. Only the first two bytes of the zip magic were checked."""
    path = mlp.parent / "short.npz"
    path.write_bytes(content)
    o = invoke("run", mlp, "--inputs", path)
    assert crash_problems(o, codes=(1,)) == [], o
    assert "is not a readable .npz archive (it is not a zip file)" in o.stderr
    assert "pickle" not in o.stderr


# ---------------------------------------------------------------------------------------
# 4. run and build: ranks numpy cannot make, option values, -o onto the weights or after a failed check


@pytest.mark.parametrize("text, where, rank", [
    (_fn("%x: Tensor[" + _ones(65) + ", f32]", "  %y = relu(%x)\n", "Tensor[" + _ones(65) + ", f32]", "%y"), ":1:10:", 65),
    (_fn("%x: Tensor[" + _ones(64) + ", f32]", "  %y = expand_dims(%x, 0)\n  %z = relu(%y)\n",
         "Tensor[" + _ones(65) + ", f32]", "%z"), ":2:3:", 65),
], ids=["parameter", "expand_dims"])
def test_a_rank_numpy_cannot_make(tmp_path: Path, text: str, where: str, rank: int) -> None:
    """A parameter of rank 65, or expand_dims of a rank-64 tensor: ``relaxc run`` ended in
    "internal error: ValueError: maximum supported dimension for an ndarray is currently 64"
    (exit 3). The verifier allows any rank; numpy stops at 64. Now run refuses the program
    before running it, at the value."""
    path = _write(tmp_path, "m.rx", text)
    o = invoke("run", path)
    assert crash_problems(o, codes=(1,)) == [], o
    assert o.stderr.startswith(f"{path}{where} error: ") and f"rank {rank}; relaxc runs tensors of rank at most" in o.stderr


def test_rank_64_still_runs(tmp_path: Path) -> None:
    path = _write(tmp_path, "m.rx", _fn("%x: Tensor[" + _ones(64) + ", f32]", "  %y = relu(%x)\n",
                                        "Tensor[" + _ones(64) + ", f32]", "%y"))
    assert invoke("run", path).code == 0


def test_a_negative_seed(mlp: Path) -> None:
    """``relaxc run m.rx --seed -1``: "internal error: ValueError: expected non-negative
    integer" (numpy's generator). Now a usage error (exit 2)."""
    o = invoke("run", mlp, "--seed", "-1")
    assert crash_problems(o, codes=(2,)) == [], o
    assert "-1 is not in the range x>=0" in o.stderr


@pytest.mark.parametrize("budget", ["9" * 400, "1" + "0" * 310 + "GiB"], ids=["400_nines", "1e310GiB"])
def test_a_budget_too_large_for_a_float(mlp: Path, budget: str) -> None:
    """``--max-arena 999...9`` (400 digits): a Python traceback ending in "OverflowError:
    cannot convert float infinity to integer" (the size was parsed as a float). Now sizes
    are parsed exactly (fractions): a huge budget is just a budget the plan meets."""
    o = invoke("build", mlp, "-t", "ir", "-o", "-", "-q", "--max-arena", budget)
    assert crash_problems(o, codes=(0,)) == [], o


def test_an_exact_size_is_not_rounded() -> None:
    from relaxc.cli.units import parse_bytes

    assert parse_bytes("9007199254740993") == 9007199254740993  # 2**53 + 1 (a float would round it)




def test_run_never_overwrites_the_weights_beside_the_model(mlp: Path) -> None:
    """``relaxc run mlp.rx -o mlp.npz`` replaced the model's own weights with its outputs
    (docs/run.md even said so: -o did not protect FILE.npz when --params was not given).
    Now the weights beside FILE (and beside --source) are inputs like the others."""
    weights = mlp.with_suffix(".npz").read_bytes()
    o = invoke("run", mlp, "-o", mlp.with_suffix(".npz"))
    assert crash_problems(o, codes=(1,)) == [], o
    assert "refusing to write" in o.stderr
    assert mlp.with_suffix(".npz").read_bytes() == weights
    assert invoke("build", mlp, "-q").code == 0
    o = invoke("run", mlp.with_suffix(".rxb"), "--check", "--source", mlp, "-o", mlp.with_suffix(".npz"))
    assert crash_problems(o, codes=(1,)) == [], o
    assert mlp.with_suffix(".npz").read_bytes() == weights


def test_a_run_whose_check_fails_writes_no_output(mlp: Path) -> None:
    """``run m.rxb --check --source other.rx -o y.npz`` where the check finds a difference:
    exit 1, but y.npz had been written (and an older y.npz replaced) before the check ran.
    Now -o is written last."""
    assert invoke("build", mlp, "-q").code == 0
    other = _write(mlp.parent, "other.rx", mlp.read_text().replace("softmax(%logits, axis=-1)", "relu(%logits)"))
    shutil.copy(mlp.with_suffix(".npz"), mlp.parent / "other.npz")
    out = mlp.parent / "y.npz"
    out.write_bytes(b"an older output")
    o = invoke("run", mlp.with_suffix(".rxb"), "--check", "--source", other, "-o", out)
    assert crash_problems(o, codes=(1,)) == [], o
    assert "check failed" in o.stderr
    assert out.read_bytes() == b"an older output"

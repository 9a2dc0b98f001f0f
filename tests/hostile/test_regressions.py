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

import pytest

from relaxc.backend.vm import codegen, load_file
from relaxc.backend.vm import loader as vm_loader

from .harness import (
    SAMPLES,
    changed,
    check_problems,
    crash_problems,
    invoke,
    run_subprocesses,
    snapshot,
)

RELAY = (SAMPLES / "relay_memory.rx").read_text()


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _fn(
    params: str,
    body: str = "",
    ret: str = "Tensor[(1,), f32]",
    result: str = "%x",
    bounds: str = "",
) -> str:
    attrs = f" attrs {{upper_bounds = {{{bounds}}}}}" if bounds else ""
    return f"fn @main({params}) -> {ret}{attrs} {{\n{body}  return {result}\n}}\n"


def _ones(rank: int) -> str:
    return "(" + ", ".join(["1"] * rank) + ")"


# ---------------------------------------------------------------------------------------
# 1. A dtype (or inf/nan) inside a dimension expression


@pytest.mark.parametrize(
    "expr, col, word",
    [
        ("u32 * 10", 22, "'u32' is a dtype"),
        ("n * f32", 26, "'f32' is a dtype"),
        ("max(n, i8)", 29, "'i8' is a dtype"),
        ("-f32", 23, "'f32' is a dtype"),
        ("inf * 2", 22, "'inf' is a number"),
        ("n + -nan", 27, "'nan' is a number"),
    ],
)
@pytest.mark.parametrize("command", ["check", "run", "report"])
def test_dtype_in_a_dimension_expression(
    tmp_path: Path, expr: str, col: int, word: str, command: str
) -> None:
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
    "rank_33": (
        _fn("%x: Tensor[" + _ones(33) + ", f32]", ret="Tensor[" + _ones(33) + ", f32]"),
        ":1:10:",
        "a tensor type has rank 33; .rxb files hold tensors of rank at most 32",
    ),
    "type_nested_50_deep": (
        _fn(f"%x: {_nested_tuple(50)}", ret=_nested_tuple(50)),
        ":1:10:",
        "a type nests deeper than the 48 levels .rxb files hold",
    ),
    "dim_nested_60_deep": (
        _fn(
            "%n: Tensor[(n,), f32], %x: Tensor[(n" + " + 1" * 60 + ",), f32]",
            ret="Tensor[(n,), f32]",
            result="%n",
            bounds="n = 4",
        ),
        ":1:33:",
        "a value nests deeper than the 48 levels .rxb files hold",
    ),
    "literal_of_rank_40": (
        _fn("%x: Tensor[(1,), f32]", "  %c = const(" + "[" * 40 + "1.0" + "]" * 40 + ", f32)\n"),
        ":2:3:",
        "the literal has rank 40; .rxb files hold arrays of rank at most 32",
    ),
    "dim_of_8192_terms": (
        _fn(
            ", ".join(
                f"%a{i}: Tensor[(a{i},), f32], %b{i}: Tensor[(b{i},), f32]" for i in range(13)
            )
            + ", %x: Tensor[(1,), f32]",
            "  %s = memory.alloc_storage("
            + " * ".join(f"(a{i} + b{i})" for i in range(13))
            + ")\n",
            bounds=", ".join(f"a{i} = 1, b{i} = 1" for i in range(13)),
        ),
        ":2:3:",
        "a dimension expression (or a shape's product) expands to more than 4,096 terms",
    ),
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
    assert o.stderr.startswith(
        f"{path}{where} error: @main cannot be written as VM bytecode: {words}"
    ), o
    assert not (tmp_path / "m.rxb").exists()
    stats = invoke(
        "run", path, "--stats"
    )  # compiles in memory (vm pipeline): fine, or the same error
    assert (
        crash_problems(stats) == [] and "is not a valid relaxc bytecode file" not in stats.stderr
    ), stats
    assert stats.code == 0 or words in stats.stderr, stats
    assert (
        invoke("build", path, "-t", "ir", "-o", "-", "-q").code == 0
    )  # other targets are not limited


def test_an_inline_literal_larger_than_the_format_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for inline literals (more than 2**20 elements; the limit is lowered here so
    the test stays small): built, then refused by the loader."""
    monkeypatch.setattr(codegen, "MAX_INLINE_ELEMENTS", 8)
    monkeypatch.setattr(vm_loader, "MAX_INLINE_ELEMENTS", 8)
    path = _write(
        tmp_path,
        "m.rx",
        _fn(
            "%x: Tensor[(1,), f32]",
            "  %c = const([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], f32)\n",
        ),
    )
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
    assert (
        "x.npy declares shape (1000000000000,) of float32 (4,000,000,000,000 bytes) "
        "but holds only 16" in o.stderr
    )


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
# 4. run and build: ranks numpy cannot make, option values, -o onto the weights or after a
# failed check


@pytest.mark.parametrize(
    "text, where, rank",
    [
        (
            _fn(
                "%x: Tensor[" + _ones(65) + ", f32]",
                "  %y = relu(%x)\n",
                "Tensor[" + _ones(65) + ", f32]",
                "%y",
            ),
            ":1:10:",
            65,
        ),
        (
            _fn(
                "%x: Tensor[" + _ones(64) + ", f32]",
                "  %y = expand_dims(%x, 0)\n  %z = relu(%y)\n",
                "Tensor[" + _ones(65) + ", f32]",
                "%z",
            ),
            ":2:3:",
            65,
        ),
    ],
    ids=["parameter", "expand_dims"],
)
def test_a_rank_numpy_cannot_make(tmp_path: Path, text: str, where: str, rank: int) -> None:
    """A parameter of rank 65, or expand_dims of a rank-64 tensor: ``relaxc run`` ended in
    "internal error: ValueError: maximum supported dimension for an ndarray is currently 64"
    (exit 3). The verifier allows any rank; numpy stops at 64. Now run refuses the program
    before running it, at the value."""
    path = _write(tmp_path, "m.rx", text)
    o = invoke("run", path)
    assert crash_problems(o, codes=(1,)) == [], o
    assert (
        o.stderr.startswith(f"{path}{where} error: ")
        and f"rank {rank}; relaxc runs tensors of rank at most" in o.stderr
    )


def test_rank_64_still_runs(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "m.rx",
        _fn(
            "%x: Tensor[" + _ones(64) + ", f32]",
            "  %y = relu(%x)\n",
            "Tensor[" + _ones(64) + ", f32]",
            "%y",
        ),
    )
    assert invoke("run", path).code == 0


def test_a_negative_seed(mlp: Path) -> None:
    """``relaxc run m.rx --seed -1``: "internal error: ValueError: expected non-negative
    integer" (numpy's generator). Now a usage error (exit 2)."""
    o = invoke("run", mlp, "--seed", "-1")
    assert crash_problems(o, codes=(2,)) == [], o
    assert "-1 is not in the range x>=0" in o.stderr


@pytest.mark.parametrize(
    "budget", ["9" * 400, "1" + "0" * 310 + "GiB"], ids=["400_nines", "1e310GiB"]
)
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
    o = invoke(
        "run", mlp.with_suffix(".rxb"), "--check", "--source", mlp, "-o", mlp.with_suffix(".npz")
    )
    assert crash_problems(o, codes=(1,)) == [], o
    assert mlp.with_suffix(".npz").read_bytes() == weights


def test_a_run_whose_check_fails_writes_no_output(mlp: Path) -> None:
    """``run m.rxb --check --source other.rx -o y.npz`` where the check finds a difference:
    exit 1, but y.npz had been written (and an older y.npz replaced) before the check ran.
    Now -o is written last."""
    assert invoke("build", mlp, "-q").code == 0
    other = _write(
        mlp.parent,
        "other.rx",
        mlp.read_text().replace("softmax(%logits, axis=-1)", "relu(%logits)"),
    )
    shutil.copy(mlp.with_suffix(".npz"), mlp.parent / "other.npz")
    out = mlp.parent / "y.npz"
    out.write_bytes(b"an older output")
    o = invoke("run", mlp.with_suffix(".rxb"), "--check", "--source", other, "-o", out)
    assert crash_problems(o, codes=(1,)) == [], o
    assert "check failed" in o.stderr
    assert out.read_bytes() == b"an older output"


# ---------------------------------------------------------------------------------------
# 5. Writing outputs: devices and pipes, folders that cannot be written, C sources all or none


def test_an_output_that_is_a_pipe_is_written_through(mlp: Path) -> None:
    """``relaxc build m.rx -o /dev/null`` (as root) replaced /dev/null with a regular file:
    the atomic writer wrote a temporary file beside the target and renamed it over the
    device. Now a target that exists and is not a regular file (a device, a named pipe) is
    written to directly. A named pipe stands in for /dev/null here."""
    fifo = mlp.parent / "out.fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a reader, so the writer does not block
    try:
        o = invoke("build", mlp, "-t", "ir", "-q", "-o", fifo)
        assert crash_problems(o, codes=(0,)) == [], o
        assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the named pipe was replaced by a file"
        got = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    assert got.startswith(b"fn @main(")


def test_dev_null_stays_a_device(mlp: Path) -> None:
    if not Path("/dev/null").is_char_device() or not os.access("/dev", os.W_OK):
        pytest.skip("needs a writable /dev (root) to show the bug")
    o = invoke("build", mlp, "-t", "ir", "-q", "-o", "/dev/null")
    assert o.code == 0, o
    assert Path("/dev/null").is_char_device()


def test_a_folder_that_cannot_be_written(mlp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``relaxc build m.rx -o /proc/m.rxb`` (or any folder without write permission):
    "internal error: FileNotFoundError/PermissionError" (exit 3): the temporary file was
    created outside the ``try`` that turns OSError into a message."""
    out = mlp.parent / "out"
    out.mkdir()

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    for args in (
        ("build", mlp, "-o", out / "m.rxb"),
        ("run", mlp, "-o", out / "y.npz"),
        ("build", mlp, "-t", "c", "-o", out),
        ("report", mlp, "--svg", out / "m.svg"),
    ):
        o = invoke(*args)
        assert crash_problems(o, codes=(1,)) == [], o
        assert "cannot write" in o.stderr and "Permission denied" in o.stderr, o
    assert list(out.iterdir()) == []


def test_proc_in_a_real_process(mlp: Path) -> None:
    if not Path("/proc/self").exists():
        pytest.skip("no /proc")
    (o,) = run_subprocesses([("build", mlp, "-q", "-o", "/proc/relaxc-test.rxb")])
    assert crash_problems(o, codes=(1,)) == [], o
    assert o.stderr.startswith("error: cannot write /proc/relaxc-test.rxb: ")


@pytest.mark.parametrize("blocked", ["mlp.c", "mlp_main.c"])
def test_the_c_files_are_written_all_or_none(mlp: Path, blocked: str) -> None:
    """``build -t c -o out`` where out/mlp.c cannot be written (here: it is a folder): exit 1,
    but out/mlp.h had been written (and an older mlp.h replaced), so the folder held a
    header of one build next to the sources of another. Now every file is staged first and
    renamed only when all are ready; a folder the build created is removed again."""
    out = mlp.parent / "out"
    out.mkdir()
    (out / "mlp.h").write_text("/* an older build */\n")
    (out / blocked).mkdir()
    before = snapshot(out)
    o = invoke("build", mlp, "-t", "c", "-o", out, "--emit-main", "-q")
    assert crash_problems(o, codes=(1,)) == [], o
    assert not changed(before, snapshot(out)), sorted(changed(before, snapshot(out)))
    fresh = mlp.parent / "new" / "deeper"
    (mlp.parent / "mlp.c").mkdir()  # a folder of the same name as an output, one level up: no harm
    o = invoke("build", mlp, "-t", "c", "-o", fresh, "-q")
    assert o.code == 0, o
    # (mlp's 104 KB of weights are above the inline limit: they go to the weights file)
    assert sorted(p.name for p in fresh.iterdir()) == [
        "mlp.c",
        "mlp.h",
        "mlp_weights.S",
        "mlp_weights.bin",
    ]


def test_a_c_build_that_fails_leaves_no_new_folder(
    mlp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import relaxc.cli.files as files

    def refuse(path, data):
        raise files.RxError(f"cannot write {path}: No space left on device")

    monkeypatch.setattr(files, "_stage", refuse)
    o = invoke("build", mlp, "-t", "c", "-o", mlp.parent / "a" / "b", "-q")
    assert crash_problems(o, codes=(1,)) == [], o
    assert not (mlp.parent / "a").exists()


# ---------------------------------------------------------------------------------------
# 6. Reading sources: endless devices, CR line endings, bytes that are not UTF-8


@pytest.mark.parametrize(
    "command", [("check",), ("fmt",), ("run",), ("disasm",), ("build", "-t", "ir", "-o", "-")]
)
def test_an_endless_device_as_the_input(command: tuple[str, ...]) -> None:
    """``relaxc check /dev/zero``: read until memory ran out (killed). ``relaxc run
    /dev/zero`` and ``disasm /dev/zero`` the same. The size check used ``st_size``, which
    is 0 for a device. Now sources are read in bounded chunks (and stop at a NUL byte),
    .rxb files no further than their header says."""
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    o = invoke(command[0], "/dev/zero", *command[1:], timeout=30)
    assert crash_problems(o, codes=(1,)) == [], o
    assert "/dev/zero" in o.stderr


def test_a_program_read_from_a_pipe(tmp_path: Path, mlp: Path) -> None:
    """Reading through a pipe still works (``relaxc check <(cat m.rx)``)."""
    fifo = tmp_path / "prog.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write(mlp.read_bytes())

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    o = invoke("check", fifo, "--params", mlp.with_suffix(".npz"), timeout=30)
    t.join(5)
    assert o.code == 0, o


def test_cr_line_endings(tmp_path: Path) -> None:
    """An .rx file with old Mac line endings (CR only) was one long line, so its first
    comment ran to the end of the file: ``check`` said "ok (0 function(s))" and ``build``
    wrote an empty program, silently. Now a lone CR ends a line, like LF and CRLF."""
    shutil.copy(SAMPLES / "mlp.npz", tmp_path / "m.npz")
    path = tmp_path / "m.rx"
    path.write_bytes((SAMPLES / "mlp.rx").read_bytes().replace(b"\n", b"\r"))
    o = invoke("check", path)
    assert o.code == 0 and "ok (1 function(s), 12 statement(s)" in o.stdout, o
    assert invoke("run", path).code == 0
    bad = tmp_path / "bad.rx"
    bad.write_bytes(
        (SAMPLES / "mlp.rx").read_bytes().replace(b"relu(%h1)", b"relu(%zz)").replace(b"\n", b"\r")
    )
    o = invoke("check", bad)
    assert o.stderr.startswith(f"{bad}:7:14: error: %zz is not defined\n    %a1 = relu(%zz)\n"), o
    fmt = invoke("fmt", path)
    assert fmt.code == 0 and b"\r" not in path.read_bytes()


def test_the_column_of_a_byte_that_is_not_utf8_counts_characters(tmp_path: Path) -> None:
    """``# ééé \\xe9`` (valid UTF-8 accents, then a Latin-1 byte): the error's column
    counted bytes (23), not characters (20), and no source line or caret was shown."""
    path = tmp_path / "m.rx"
    path.write_bytes(
        b"fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  return %x  # "
        b"\xc3\xa9\xc3\xa9\xc3\xa9 "
        b"\xe9\n}\n"
    )
    o = invoke("check", path)
    assert o.stderr == (
        f"{path}:2:20: error: not UTF-8 text: invalid byte 0xe9\n"
        "    return %x  # \u00e9\u00e9\u00e9 \ufffd\n                     ^\n"
    ), o


# ---------------------------------------------------------------------------------------
# 7. Showing errors: too deep, control characters


@pytest.mark.parametrize(
    "text, where",
    [
        (_fn("%x: " + "Tuple[" * 3000 + "Tensor[(1,), f32]" + "]" * 3000), ":1:199:"),
        (
            _fn(
                "%x: Tensor[(1,), f32]",
                "  %c = const(" + "[" * 3000 + "1.0" + "]" * 3000 + ", f32)\n",
            ),
            ":2:43:",
        ),
    ],
    ids=["tuple_type", "list_literal"],
)
def test_too_deep_has_a_location(tmp_path: Path, text: str, where: str) -> None:
    """A type or literal nested 3,000 deep: "FILE: error: the program nests expressions too
    deeply for relaxc (split long dimension expressions into several bindings)" — no line,
    no column, and advice about dimension expressions for a list literal. Now the error
    points into the brackets and says how deep they go."""
    path = _write(tmp_path, "m.rx", text)
    o = invoke("check", path)
    assert crash_problems(o, codes=(1,)) == [], o
    assert o.stderr.startswith(f"{path}{where} error: brackets nest 3,00"), o
    assert check_problems(o, path, text) == []


def test_control_characters_never_reach_the_terminal(tmp_path: Path) -> None:
    """A source line holding an escape sequence (``\\x1b[2J`` clears the screen) or a bidi
    override was quoted raw under its error, so a hostile file could drive the terminal and
    the caret landed in the wrong column. Now such characters are shown as U+FFFD."""
    path = tmp_path / "m.rx"
    path.write_text(
        "fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n"
        "  %y = relu(%x)  # \x1b[2J \u202e\n  return %y\x07\n}\n"
    )
    (o,) = run_subprocesses([("check", path)])
    assert o.code == 1, o
    assert "\x1b" not in o.stderr and "\x07" not in o.stderr and "\u202e" not in o.stderr
    assert o.stderr.startswith(
        f"{path}:3:12: error: unexpected character U+0007\n    return %y\ufffd\n             ^"
    ), o

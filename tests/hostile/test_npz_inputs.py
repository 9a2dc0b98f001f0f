"""Malformed ``.npz`` files given to ``relaxc run`` as ``--inputs`` and as ``--params``.

Wrong names, missing and extra arrays, wrong shapes, ranks and dtypes, object arrays and
raw pickles (which must never be unpickled: a pickle here would create a marker file),
a .npy instead of an .npz, not a zip at all, truncated zips, zero-size files, members that
are not .npy arrays, headers that claim more data than they hold (or less: trailing bytes),
folders, missing files,
links to nowhere and ``/dev/zero``. Each ends in exit status 1 with one sentence naming
the file, and never in an allocation of what a header merely claims.
"""

from __future__ import annotations

import io
import os
import pickle
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from .harness import SAMPLES, crash_problems, invoke, report, run_subprocesses

X = np.linspace(-1, 1, 8 * 64, dtype=np.float32).reshape(8, 64)
MARKER = Path("/tmp") / f"relaxc-hostile-pickle-ran-{os.getpid()}"


class Evil:
    """Unpickling this runs code: it creates MARKER."""

    def __reduce__(self):
        return (Path.touch, (MARKER,))


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=True)
    return buf.getvalue()


def _zip(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _header(shape: tuple, descr: str = "<f4") -> bytes:
    """A .npy header declaring ``shape`` (the data after it is up to the caller)."""
    text = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode("latin1")
    pad = 64 - (10 + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text


GOOD = _zip({"x.npy": _npy(X)})

# name -> (file contents, words the error must contain); None contents: made by the test.
FILES: dict[str, tuple[bytes, str]] = {
    "wrong_name": (_zip({"y.npy": _npy(X)}), "missing x; unexpected y"),
    "missing_array": (_zip({}), "missing x"),
    "extra_array": (_zip({"x.npy": _npy(X), "z.npy": _npy(X)}), "unexpected z"),
    "empty_name": (_zip({"x.npy": _npy(X), ".npy": _npy(X)}), "unexpected ''"),
    "nested_name": (_zip({"dir/x.npy": _npy(X)}), "unexpected 'dir/x'"),
    "wrong_shape": (
        _zip({"x.npy": _npy(np.zeros((8, 63), np.float32))}),
        "has shape (8, 63), expected (8, 64)",
    ),
    "wrong_rank": (_zip({"x.npy": _npy(np.zeros((8, 64, 1), np.float32))}), "has rank 3"),
    "scalar": (_zip({"x.npy": _npy(np.float32(1))}), "has rank 0"),
    "zero_size_array": (_zip({"x.npy": _npy(np.zeros((0, 64), np.float32))}), "has shape (0, 64)"),
    "float64": (_zip({"x.npy": _npy(X.astype(np.float64))}), "has dtype float64"),
    "int64": (_zip({"x.npy": _npy(X.astype(np.int64))}), "has dtype int64"),
    "float16": (_zip({"x.npy": _npy(X.astype(np.float16))}), "has dtype float16"),
    "complex": (_zip({"x.npy": _npy(X.astype(np.complex64))}), "has dtype complex64"),
    "strings": (_zip({"x.npy": _npy(np.full((8, 64), "a"))}), "has dtype <U1"),
    "structured": (_zip({"x.npy": _npy(np.zeros((8, 64), dtype=[("a", "<f4")]))}), "has dtype"),
    "datetime": (
        _zip({"x.npy": _npy(np.zeros((8, 64), dtype="datetime64[s]"))}),
        "has dtype datetime64",
    ),
    "big_endian": (_zip({"x.npy": _npy(X.astype(">f4"))}), "has dtype >f4"),
    "object_array": (
        _zip({"x.npy": _npy(np.array([Evil()], dtype=object))}),
        "holds Python objects (a pickle)",
    ),
    "object_field": (
        _zip({"x.npy": _npy(np.zeros(2, dtype=[("a", "O")]))}),
        "holds Python objects (a pickle)",
    ),
    "raw_pickle_member": (
        _zip({"x.npy": pickle.dumps(Evil())}),
        "x.npy is not a .npy array relaxc can read",
    ),
    "pickle_file": (
        pickle.dumps({"x": Evil()}),
        "is not a readable .npz archive (it is not a zip file)",
    ),
    "text_member": (_zip({"x.txt": b"hello"}), "holds 'x.txt', which is not a .npy array"),
    "npy_not_npz": (_npy(X), "is a single .npy array, not an .npz archive"),
    "not_a_zip": (b"hello, world", "is not a readable .npz archive (it is not a zip file)"),
    "zero_bytes": (b"", "is not a readable .npz archive (it is not a zip file)"),
    "just_pk": (b"PK", "is not a readable .npz archive (it is not a zip file)"),
    "zip_magic_only": (b"PK\x03\x04", "is not a readable .npz archive"),
    "truncated_zip": (GOOD[: len(GOOD) // 2], "is not a readable .npz archive"),
    "truncated_end_record": (GOOD[:-10], "is not a readable .npz archive"),
    "corrupted_member": (GOOD[:60] + bytes(b ^ 0xFF for b in GOOD[60:200]) + GOOD[200:], "x"),
    "npy_header_cut": (_zip({"x.npy": _npy(X)[:20]}), "x.npy is not a .npy array relaxc can read"),
    "npy_data_cut": (
        _zip({"x.npy": _npy(X)[:-100]}),
        "x.npy declares shape (8, 64) of float32 (2,048 bytes)",
    ),
    "npy_trailing_bytes": (
        _zip({"x.npy": _npy(X) + b"\0\0\0\0"}),
        "x.npy declares shape (8, 64) of float32 (2,048 bytes) but holds 2,052 bytes after its "
        "header (4 bytes too many)",
    ),
    "npy_one_trailing_byte_deflated": (
        _zip({"x.npy": _npy(X) + b"\1"}, zipfile.ZIP_DEFLATED),
        "(1 byte too many)",
    ),
    "npy_bad_version": (
        _zip({"x.npy": b"\x93NUMPY\x09\x00" + _npy(X)[8:]}),
        "x.npy is not a .npy array relaxc can read",
    ),
    "npy_header_too_long": (
        _zip({"x.npy": b"\x93NUMPY\x01\x00\xff\xff" + b" " * 65535}),
        "x.npy is not a .npy array",
    ),
    "npy_header_not_a_dict": (
        _zip({"x.npy": b"\x93NUMPY\x01\x00\x10\x00__import__('os')\n"}),
        "x.npy is not a .npy array relaxc can read",
    ),
    "claims_a_huge_shape": (
        _zip({"x.npy": _header((1 << 40,)) + b"\0" * 64}),
        "declares shape (1099511627776,) of float32 (4,398,046,511,104 bytes) but holds only",
    ),
    "claims_2_to_the_62": (
        _zip({"x.npy": _header((1 << 62, 1 << 62)) + b"\0" * 64}),
        "but holds only",
    ),
    "compressed_claims_a_huge_shape": (
        _zip({"x.npy": _header((1 << 40,)) + b"\0" * 4096}, zipfile.ZIP_DEFLATED),
        "but holds only",
    ),
}


def _write(folder: Path, name: str) -> Path:
    path = folder / f"{name}.npz"
    path.write_bytes(FILES[name][0])
    return path


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    """mlp.rx with its weights, and mlp.rxb built from them."""
    folder = tmp_path_factory.mktemp("npz")
    for suffix in (".rx", ".npz"):
        (folder / f"mlp{suffix}").write_bytes((SAMPLES / f"mlp{suffix}").read_bytes())
    built = invoke("build", folder / "mlp.rx", "-q")
    assert built.code == 0, built
    return {"rx": folder / "mlp.rx", "rxb": folder / "mlp.rxb"}


def test_a_good_inputs_file_runs(programs, tmp_path) -> None:
    path = tmp_path / "good.npz"
    path.write_bytes(GOOD)
    for prog in programs.values():
        o = invoke("run", prog, "--inputs", path)
        assert o.code == 0, o


@pytest.mark.parametrize("name", list(FILES))
@pytest.mark.parametrize("kind", ["rx", "rxb"])
def test_malformed_inputs_file(programs, tmp_path, name: str, kind: str) -> None:
    path = _write(tmp_path, name)
    out = tmp_path / "y.npz"
    out.write_bytes(b"stale")
    o = invoke("run", programs[kind], "--inputs", path, "-o", out)
    problems = crash_problems(o, codes=(1,))
    first = o.stderr.split("\n")[0]
    if not first.startswith("error: "):
        problems.append(f"not a plain sentence: {first[:200]!r}")
    if FILES[name][1] not in o.stderr:
        problems.append(f"{FILES[name][1]!r} is not in the message")
    if "inputs file" in first and str(path) not in first:
        problems.append("the message does not name the file")
    if "allow_pickle" in o.stderr:
        problems.append("the message suggests unpickling")
    if out.read_bytes() != b"stale":
        problems.append("the -o file was changed")
    if MARKER.exists():
        MARKER.unlink()
        problems.append("A PICKLE WAS UNPICKLED")
    report([f"{p}\n{o}" for p in problems], f"run --inputs {name}")


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in FILES
        if not n.startswith(
            (
                "wrong_",
                "missing",
                "extra",
                "empty_name",
                "nested",
                "scalar",
                "zero_size",
                "float",
                "int64",
                "complex",
                "strings",
                "structured",
                "datetime",
                "big_endian",
            )
        )
    ],
)
@pytest.mark.parametrize("command", ["run", "check", "build", "report"])
def test_malformed_weights_file(programs, tmp_path, name: str, command: str) -> None:
    """The same files as ``--params`` of every command that reads weights."""
    path = _write(tmp_path, name)
    args = [command, programs["rx"], "--params", path]
    if command == "build":
        args += ["-o", tmp_path / "m.rxb"]
    o = invoke(*args)
    problems = crash_problems(o, codes=(1,))
    if "weights file" not in o.stderr or str(path) not in o.stderr:
        problems.append("the message does not name the weights file")
    if MARKER.exists():
        MARKER.unlink()
        problems.append("A PICKLE WAS UNPICKLED")
    if (tmp_path / "m.rxb").exists():
        problems.append("build wrote an output")
    report([f"{p}\n{o}" for p in problems], f"{command} --params {name}")


def test_weights_of_another_model(programs, tmp_path) -> None:
    path = tmp_path / "other.npz"
    np.savez(path, **{"fc1.weight": np.zeros((3, 3), np.float32)})
    o = invoke("check", programs["rx"], "--params", path)
    assert o.code == 1, o
    assert "weight 'fc1.weight' has shape (3, 3)" in o.stderr, o


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.symlink_to(p.parent / "nowhere.npz"), "does not exist"),
    ],
)
@pytest.mark.parametrize("option", ["--inputs", "--params"])
def test_missing_folder_and_dangling_link(
    programs, tmp_path, make, needle: str, option: str
) -> None:
    path = tmp_path / "inputs.npz"
    make(path)
    o = invoke("run", programs["rx"], option, path)
    assert crash_problems(o, codes=(1,)) == [], o
    assert needle in o.stderr and str(path) in o.stderr, o


@pytest.mark.parametrize("option", ["--inputs", "--params"])
def test_dev_zero_is_not_a_zip(programs, option: str) -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    o = invoke("run", programs["rx"], option, "/dev/zero", timeout=20)
    assert crash_problems(o, codes=(1,)) == [], o
    assert "is not a readable .npz archive (it is not a zip file)" in o.stderr


def test_a_huge_claimed_shape_allocates_nothing(programs, tmp_path) -> None:
    path = _write(tmp_path, "claims_a_huge_shape")
    tracemalloc.start()
    try:
        o = invoke("run", programs["rx"], "--inputs", path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert o.code == 1, o
    assert peak < 64 << 20, f"{peak:,} bytes allocated for a file that is refused"


def test_pickles_in_a_real_process(programs, tmp_path) -> None:
    """A pickle in every form, through a real process: refused, and never run."""
    paths = [_write(tmp_path, n) for n in ("object_array", "raw_pickle_member", "pickle_file")]
    outcomes = run_subprocesses(
        [("run", programs["rx"], "--inputs", p) for p in paths]
        + [("run", programs["rx"], "--params", paths[0])]
    )
    for o in outcomes:
        assert crash_problems(o, codes=(1,)) == [], o
        assert o.stderr.startswith("error: "), o
    assert not MARKER.exists(), "a pickle was unpickled"


TRAILING = 300 << 20


def _zip_with_trailing_zeros(path: Path, trailing: int) -> None:
    """An .npz whose x.npy is X followed by ``trailing`` zero bytes, deflated (a few
    hundred KiB on disk) and streamed, so the test never holds the member whole."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("x.npy", "w", force_zip64=True) as f:
            f.write(_npy(X))
            chunk = bytes(1 << 20)
            for _ in range(trailing // len(chunk)):
                f.write(chunk)


@pytest.mark.parametrize("option", ["--inputs", "--params"])
def test_300_mib_after_the_data_is_refused_without_reading_them(
    programs, tmp_path, option: str
) -> None:
    """An .npy member followed by 300 MiB of zeros was accepted (numpy reads what the
    header declares and ignores the rest). Now the member's size in the zip directory is
    compared with the header's: refused, naming the member and both sizes, and without
    reading (or inflating) the 300 MiB."""
    path = tmp_path / "trailing.npz"
    _zip_with_trailing_zeros(path, TRAILING)
    assert path.stat().st_size < 4 << 20
    tracemalloc.start()
    try:
        o = invoke("run", programs["rx"], option, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert crash_problems(o, codes=(1,)) == [], o
    what = "inputs" if option == "--inputs" else "weights"
    assert o.stderr.startswith(f"error: {what} file {path}: x.npy declares shape (8, 64)"), o
    assert f"holds {2048 + TRAILING:,} bytes after its header ({TRAILING:,} bytes too many)" in (
        o.stderr
    ), o
    assert peak < 64 << 20, f"{peak:,} bytes allocated for a file that is refused"

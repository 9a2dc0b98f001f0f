"""Malformed ``.rxb`` files through the commands that read them: ``run`` (with ``--check``,
``--stats``, ``--poison``), ``disasm`` and ``disasm --ir``.

tests/backend/vm/test_format.py drives the loader directly, field by field; this file
checks what a person sees: exit status 1, one sentence naming the file, nothing else
written, never a traceback or a hang, and for the corruptions that still make a valid
program (a checksum recomputed over a flipped bit that lands in a weight, say) a clean run.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from relaxc.backend.vm import compile_module, load_bytes
from relaxc.backend.vm import format as F

from ..backend.vm.util import KITCHEN_SINK, KITCHEN_WEIGHTS, compile_text, rehash
from .harness import SAMPLES, crash_problems, invoke, report, run_subprocesses

GOOD = compile_module(compile_text(KITCHEN_SINK), KITCHEN_WEIGHTS)
_TRACE: list = []
load_bytes(GOOD, trace=_TRACE)


def _sections(data: bytes) -> list[int]:
    out, pos = [], F.HEADER_SIZE
    for _ in F.SECTIONS:
        out.append(pos)
        pos += F.SECTION_HEAD + struct.unpack_from("<Q", data, pos + 4)[0]
    return out


def _with(data: bytes, offset: int, value: bytes) -> bytes:
    b = bytearray(data)
    b[offset : offset + len(value)] = value
    return bytes(b)


def _corpus() -> dict[str, bytes]:
    rng = random.Random(9)
    cases: dict[str, bytes] = {
        "empty": b"",
        "magic_only": F.MAGIC,
        "header_only": GOOD[: F.HEADER_SIZE],
        "wrong_magic": b"\x89RXC" + GOOD[4:],
        "zip_magic": b"PK\x03\x04" + GOOD[4:],
        "rx_text": KITCHEN_SINK.encode(),
        "npz": (SAMPLES / "mlp.npz").read_bytes(),
        "version_0": _with(GOOD, 8, struct.pack("<I", 0)),
        "version_2": _with(GOOD, 8, struct.pack("<I", 2)),
        "version_max": _with(GOOD, 8, b"\xff" * 4),
        "flags": _with(GOOD, 12, struct.pack("<I", 1)),
        "length_2_to_the_60": _with(GOOD, 16, struct.pack("<Q", 1 << 60)),
        "length_zero": _with(GOOD, 16, struct.pack("<Q", 0)),
        "checksum": _with(GOOD, 24, bytes(32)),
        "one_byte_more": GOOD + b"\0",
        "one_byte_more_rehashed": rehash(GOOD + b"\0"),
        "nul_bytes": bytes(len(GOOD)),
        "ff_bytes": b"\xff" * len(GOOD),
    }
    for i, off in enumerate(_sections(GOOD)):
        cases[f"cut_at_section_{i}"] = GOOD[:off]
        cases[f"cut_at_section_{i}_rehashed"] = rehash(GOOD[:off])
        cases[f"cut_inside_section_{i}_rehashed"] = rehash(GOOD[: off + F.SECTION_HEAD + 3])
        cases[f"section_{i}_tag"] = rehash(_with(GOOD, off, b"XXXX"))
        cases[f"section_{i}_length_huge"] = rehash(_with(GOOD, off + 4, struct.pack("<Q", 1 << 62)))
    for cut in sorted(rng.sample(range(F.HEADER_SIZE + 1, len(GOOD)), 20)):
        cases[f"cut_at_{cut}_rehashed"] = rehash(GOOD[:cut])
    for i in sorted(rng.sample(range(F.HEADER_SIZE, len(GOOD)), 40)):
        cases[f"flip_{i}"] = _with(GOOD, i, bytes([GOOD[i] ^ (1 << (i % 8))]))
        cases[f"flip_{i}_rehashed"] = rehash(_with(GOOD, i, bytes([GOOD[i] ^ (1 << (i % 8))])))
    for off, size, kind in rng.sample(_TRACE, 45):
        for fill in (0x00, 0xFF):
            cases[f"{kind}_at_{off}_{fill:02x}"] = rehash(_with(GOOD, off, bytes([fill]) * size))
    return cases


CORPUS = _corpus()


def test_corpus_size() -> None:
    assert len(CORPUS) >= 220


@pytest.mark.parametrize("chunk", range(4))
def test_every_malformed_file(tmp_path: Path, chunk: int) -> None:
    """run, run --check --stats --poison, disasm, disasm --ir: exit 0 (the corruption made
    another valid program) or 1 with one sentence naming the file; -o untouched on error."""
    failures = []
    names = sorted(CORPUS)[chunk::4]
    out = tmp_path / "y.npz"
    for name in names:
        path = tmp_path / "model.rxb"
        path.write_bytes(CORPUS[name])
        for args in (
            ("run", path, "-o", out),
            ("run", path, "--check", "--stats", "--poison", "-o", out),
            ("disasm", path),
            ("disasm", "--ir", path),
        ):
            out.write_bytes(b"stale")
            o = invoke(*args)
            problems = crash_problems(o)
            if o.code == 1:
                first, _, rest = o.stderr.partition("\n")
                if not first.startswith("error: "):
                    problems.append(f"not a plain sentence: {first[:200]!r}")
                if rest.strip() and args[0] == "disasm":
                    problems.append(f"more than one line: {o.stderr[:300]!r}")
                if out.read_bytes() != b"stale":
                    problems.append("a failed run changed its -o file")
                if args[0] == "disasm" and not first.startswith(f"error: {path} "):
                    problems.append(
                        "the message does not name the file"
                    )  # (run: an error of the program's own)
            if path.read_bytes() != CORPUS[name]:
                problems.append("the input was changed")
            failures += [f"[{name}] {p}\n{o}" for p in problems]
    report(failures, "commands on malformed .rxb files")


def test_the_header_errors_say_what_is_wrong(tmp_path: Path) -> None:
    expect = {
        "empty": "is not a relaxc bytecode file (it does not start with the .rxb magic bytes)",
        "rx_text": "is not a relaxc bytecode file",
        "version_2": "uses bytecode format version 2, but this relaxc reads version 1 only",
        "flags": "sets header flags 0x1",
        "length_2_to_the_60": "is truncated: the header declares 1,152,921,504,606,846,976 bytes",
        "checksum": "is corrupted: the SHA-256 checksum",
        "one_byte_more": "is longer than its header says",
        "section_1_tag": "expected section CNST here",
    }
    for name, needle in expect.items():
        path = tmp_path / f"{name}.rxb"
        path.write_bytes(CORPUS[name])
        o = invoke("disasm", path)
        assert o.code == 1 and o.stderr.startswith(f"error: {path} ") and needle in o.stderr, o


@pytest.mark.parametrize("command", ["run", "disasm"])
def test_not_a_file(tmp_path: Path, command: str) -> None:
    missing = tmp_path / "missing.rxb"
    folder = tmp_path / "folder.rxb"
    folder.mkdir()
    dangling = tmp_path / "dangling.rxb"
    dangling.symlink_to(tmp_path / "nowhere.rxb")
    for path, needle in (
        (missing, "does not exist"),
        (folder, "is a directory"),
        (dangling, "does not exist"),
    ):
        o = invoke(command, path)
        assert crash_problems(o, codes=(1,)) == [], o
        assert needle in o.stderr and str(path) in o.stderr, o


def test_an_endless_device_is_refused_at_once() -> None:
    """``/dev/zero`` is not read for ever (it does not start with the magic bytes)."""
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    for args in (("disasm", "/dev/zero"), ("run", "/dev/zero"), ("run", "--check", "/dev/zero")):
        o = invoke(*args, timeout=20)
        assert crash_problems(o, codes=(1,)) == [], o
        assert "/dev/zero" in o.stderr


def test_malformed_files_in_a_real_process(tmp_path: Path) -> None:
    names = ["version_2", "cut_at_section_2_rehashed", "section_3_length_huge"]
    commands = []
    for i, name in enumerate(names):
        path = tmp_path / f"{name}.rxb"
        path.write_bytes(CORPUS[name])
        commands.append(("run", path) if i % 2 else ("disasm", path))
    for o in run_subprocesses(commands):
        assert crash_problems(o, codes=(1,)) == [], o
        assert o.stderr.startswith("error: ") and o.stderr.count("\n") == 1, o

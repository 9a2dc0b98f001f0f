"""The .rxb container: deterministic bytes, an exact round trip, and a loader that refuses
every malformed file with one clear RxError (no other exception, no hang, no huge
allocation).

The corpus is generated here from a program that uses every instruction: truncations
(at every section boundary and at many offsets, with the header left as is and with it
made consistent again), bit flips (with the stale checksum, and with a recomputed one),
every field of a chosen kind set out of range with a recomputed checksum (registers,
constants, functions, strings, counts, sizes of 2**60 bytes, opcodes, tags, dtypes), and
wrong magic bytes, version and flags.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from relaxc.backend.inputs import random_inputs
from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes
from relaxc.backend.vm import codegen
from relaxc.backend.vm import format as F
from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError
from relaxc.ir.types import TensorType

from .util import (
    KITCHEN_SINK,
    KITCHEN_WEIGHTS,
    PIPELINES,
    SAMPLE_STEMS,
    SAMPLES,
    compile_text,
    rehash,
    sample,
)


@pytest.fixture(scope="module")
def good() -> bytes:
    return compile_module(compile_text(KITCHEN_SINK), KITCHEN_WEIGHTS)


@pytest.fixture(scope="module")
def fields(good: bytes) -> list[tuple[int, int, str]]:
    trace: list = []
    load_bytes(good, "k.rxb", trace=trace)
    return trace


def rejected(data: bytes, *needles: str) -> str:
    """``data`` is refused with one RxError naming the file; returns its message."""
    with pytest.raises(RxError) as e:
        load_bytes(data, "model.rxb")
    msg = e.value.message
    assert msg.startswith("model.rxb "), msg
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg
    return msg


def loads_or_rejected(data: bytes) -> None:
    """Either a valid program (which then runs or fails with an RxError) or an RxError."""
    try:
        exe = load_bytes(data, "model.rxb")
    except RxError:
        return
    fn = exe.module.get("main")
    if fn is None:
        return
    dims = {
        d.name: 2
        for p in fn.params
        if isinstance(p.type, TensorType)
        for d in p.type.shape
        if isinstance(d, D.Sym)
    }
    try:
        args = random_inputs(fn, dims, 0)
        VirtualMachine(exe).run(
            "main", args
        )  # no poison: a corrupted size may be large (lazily mapped)
    except RxError:
        pass


# ---------------------------------------------------------------------------------------
# Determinism and round trip


@pytest.mark.parametrize("stem", SAMPLE_STEMS)
def test_same_input_same_bytes(stem: str) -> None:
    text = (SAMPLES / f"{stem}.rx").read_text()
    _, weights = sample(stem)
    a = compile_module(compile_text(text), weights)
    b = compile_module(compile_text(text), dict(reversed(list(weights.items()))))
    assert a == b


@pytest.mark.parametrize("passes", list(PIPELINES))
def test_the_bytecode_holds_the_program_exactly(passes: str) -> None:
    module = compile_text(KITCHEN_SINK, passes)
    exe = load_bytes(compile_module(module, KITCHEN_WEIGHTS))
    assert exe.module == module
    assert print_module(exe.module) == print_module(module)
    assert compile_module(exe.module, exe.weights()) == compile_module(module, KITCHEN_WEIGHTS)


def test_constants_are_raw_little_endian_bytes(good: bytes) -> None:
    exe = load_bytes(good)
    named = {c.name: c.array for c in exe.constants if not c.inline}
    assert list(named) == ["bias"]
    np.testing.assert_array_equal(named["bias"], KITCHEN_WEIGHTS["bias"])
    assert np.asarray(KITCHEN_WEIGHTS["bias"]).astype("<f4").tobytes() in good
    inline = [c.array for c in exe.constants if c.inline]
    assert any(a.dtype == np.int32 and a.tolist() == [[1, 0], [0, 1]] for a in inline)
    assert all(not c.array.flags.writeable for c in exe.constants)
    assert b"pickle" not in good and b"\x80\x04\x95" not in good  # no pickle protocol header


def test_header_layout(good: bytes) -> None:
    magic, version, flags, length, digest = F.HEADER.unpack_from(good, 0)
    assert magic == b"\x89RXB\r\n\x1a\n" and version == F.FORMAT_VERSION and flags == 0
    assert length == len(good) - F.HEADER_SIZE
    assert [good[i : i + 4] for i in section_offsets(good)] == list(F.SECTIONS)


def section_offsets(data: bytes) -> list[int]:
    out, pos = [], F.HEADER_SIZE
    for _ in F.SECTIONS:
        out.append(pos)
        pos += F.SECTION_HEAD + struct.unpack_from("<Q", data, pos + 4)[0]
    assert pos == len(data)
    return out


def test_a_weight_missing_at_compile_time() -> None:
    with pytest.raises(RxError, match="weight 'bias' was not provided"):
        compile_module(compile_text(KITCHEN_SINK), {})


# ---------------------------------------------------------------------------------------
# Header


def test_wrong_magic(good: bytes) -> None:
    rejected(b"PK\x03\x04" + good[4:], "is not a relaxc bytecode file")
    rejected(b"", "is not a relaxc bytecode file")
    rejected(KITCHEN_SINK.encode(), "is not a relaxc bytecode file")


@pytest.mark.parametrize("version", [0, 2, 7, 0xFFFFFFFF])
def test_wrong_version(good: bytes, version: int) -> None:
    data = bytearray(good)
    struct.pack_into("<I", data, 8, version)
    rejected(
        bytes(data), f"uses bytecode format version {version}, but this relaxc reads version 1 only"
    )


def test_unknown_flags(good: bytes) -> None:
    data = bytearray(good)
    struct.pack_into("<I", data, 12, 1)
    rejected(bytes(data), "header flags 0x1")


def test_header_cut_short(good: bytes) -> None:
    for n in range(len(F.MAGIC), F.HEADER_SIZE):
        rejected(good[:n], "is truncated")


def test_declared_length_2_to_the_60(good: bytes) -> None:
    data = bytearray(good)
    struct.pack_into("<Q", data, 16, 1 << 60)
    rejected(bytes(data), "is truncated", f"{1 << 60:,} bytes")


def test_trailing_bytes(good: bytes) -> None:
    rejected(good + b"\0", "longer than its header says")
    rejected(rehash(good + b"\0"), "after the last section")


# ---------------------------------------------------------------------------------------
# Truncation


def test_truncated_at_every_section_boundary(good: bytes) -> None:
    cuts = set()
    for off in section_offsets(good):
        cuts |= {off, off + 4, off + F.SECTION_HEAD, off + F.SECTION_HEAD + 1}
    for cut in sorted(c for c in cuts if c < len(good)):
        rejected(good[:cut], "is truncated")
        rejected(rehash(good[:cut]), "is not a valid relaxc bytecode file")


def test_truncated_at_many_offsets(good: bytes) -> None:
    for cut in range(F.HEADER_SIZE, len(good), 3):
        rejected(good[:cut], "is truncated")
    for cut in range(F.HEADER_SIZE, len(good), 11):
        rejected(rehash(good[:cut]), "is not a valid relaxc bytecode file")


def test_truncated_inside_every_field(good: bytes, fields) -> None:
    """A file cut inside a field, its header made consistent: the field's read is refused."""
    for off, size, kind in fields[::3]:
        if size > 1:
            rejected(rehash(good[: off + size // 2]), "is not a valid relaxc bytecode file")


# ---------------------------------------------------------------------------------------
# Corruption


def test_bit_flips_break_the_checksum(good: bytes) -> None:
    for i in range(F.HEADER_SIZE, len(good), 5):
        data = bytearray(good)
        data[i] ^= 1 << (i % 8)
        rejected(bytes(data), "is corrupted: the SHA-256 checksum")


def test_bit_flips_with_a_valid_checksum_never_crash(good: bytes) -> None:
    for i in range(F.HEADER_SIZE, len(good), 7):
        data = bytearray(good)
        data[i] ^= 1 << (i % 8)
        loads_or_rejected(rehash(data))


OUT_OF_RANGE = {
    "reg": (0xFFFFFFFE, "is out of range"),
    "const": (0xFFFFFFFE, "is out of range"),
    "func": (0xFFFFFFFE, "is out of range"),
    "str": (0xFFFFFFFE, "is out of range"),
    "count": (0x7FFFFFFF, "2,147,483,647"),
    "size": (1 << 60, ""),
    "opcode": (0xEE, "unknown opcode"),
    "tag": (0xEE, "tag"),
    "dtype": (0xEE, "unknown dtype code"),
}


@pytest.mark.parametrize("kind", list(OUT_OF_RANGE))
def test_every_field_of_a_kind_out_of_range(good: bytes, fields, kind: str) -> None:
    """Indices past their tables, counts past the bytes, sizes of 2**60: each refused before
    anything is allocated (the checksum is recomputed, so only validation can catch it)."""
    value, needle = OUT_OF_RANGE[kind]
    hits = [(off, size) for off, size, k in fields if k == kind]
    assert hits, f"no field of kind {kind}"
    for off, size in hits:
        data = bytearray(good)
        data[off : off + size] = min(value, (1 << 8 * size) - 1).to_bytes(size, "little")
        rejected(rehash(data), "is not a valid relaxc bytecode file", needle)


def test_every_field_at_its_extremes_never_crashes(good: bytes, fields) -> None:
    for off, size, kind in fields:
        for fill in (0x00, 0xFF):
            data = bytearray(good)
            data[off : off + size] = bytes([fill]) * size
            loads_or_rejected(rehash(data))


def test_section_order_and_tags(good: bytes) -> None:
    offs = section_offsets(good)
    data = bytearray(good)
    data[offs[1] : offs[1] + 4] = b"XXXX"
    rejected(rehash(data), "expected section CNST here")


@pytest.mark.parametrize(
    "pos, sentence",
    [
        ("dst", "is already written by instruction"),
    ],
)
def test_register_written_twice(pos: str, sentence: str) -> None:
    text = """\
fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  %a = relu(%x)
  %b = exp(%a)
  return %b
}
"""
    data = bytearray(compile_module(compile_text(text, "none")))
    trace: list = []
    load_bytes(bytes(data), trace=trace)
    dsts = [off for off, size, kind in trace if kind == "reg"]
    # Registers in order: dst of relu (1), its operand (0), dst of exp (2), its operand (1),
    # ret (2).
    second_dst = dsts[2]
    data[second_dst : second_dst + 4] = (1).to_bytes(4, "little")
    rejected(rehash(data), sentence)


def test_a_program_that_does_not_verify() -> None:
    text = """\
fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  %a = relu(%x)
  %b = exp(%a)
  return %b
}
"""
    data = bytearray(compile_module(compile_text(text, "none")))
    # Make exp read register 2 (%b itself): defined after its use.
    trace: list = []
    load_bytes(bytes(data), trace=trace)
    regs = [off for off, size, kind in trace if kind == "reg"]
    data[regs[3] : regs[3] + 4] = (2).to_bytes(4, "little")
    rejected(rehash(data), "its program does not verify: %b is not defined")


def test_weight_of_the_wrong_type() -> None:
    text = """\
fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  %w: Tensor[(2,), f32] = const("w")
  %a = add(%x, %w)
  return %a
}
"""
    data = bytearray(compile_module(compile_text(text, "none"), {"w": np.ones(2, np.float32)}))
    trace: list = []
    load_bytes(bytes(data), trace=trace)
    dtype_fields = [off for off, size, kind in trace if kind == "dtype"]
    for off in dtype_fields:  # the constant's dtype becomes f64 (and its bytes no longer fit)
        data2 = bytearray(data)
        data2[off] = F.DTYPE_CODES.index("i8")
        rejected(rehash(data2), "is not a valid relaxc bytecode file")


def test_dims_that_expand_exponentially_are_refused_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The IR's canonical form multiplies sums out: (a0+b0)*(a1+b1)*... has 2**k terms and
    would keep the verifier busy for hours. The loader refuses it before verifying."""
    k = 20
    syms = [f"a{i}" for i in range(k)] + [f"b{i}" for i in range(k)]
    expr = " * ".join(f"(a{i} + b{i})" for i in range(k))
    params = ", ".join(f"%p{j}: Tensor[({s},), f32]" for j, s in enumerate(syms))
    text = (
        f"fn @main(%x: Tensor[({expr},), f32], {params}) -> Tensor[({expr},), f32] {{\n  "
        f"return %x\n}}\n"
    )
    module = parse_module(text, "exp.rx")
    fn = module.get("main")
    types = {
        "main": {p.name: p.type for p in fn.params}
    }  # compiled without verifying (it would not end)
    # The writer refuses it too (it never writes a file the loader refuses) ...
    with pytest.raises(RxError, match="expands to more than 4,096 terms"):
        compile_module(module, {}, types=types)
    # ... so the file is made with the writer's check turned off.
    monkeypatch.setattr(codegen, "_check_terms", lambda dims: None)
    data = compile_module(module, {}, types=types)
    rejected(data, "a dimension expression (or a shape's product) expands to more than 4,096 terms")

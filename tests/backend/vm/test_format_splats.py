"""Splat weights in the ``.rxb`` constant pool (kind 2): a named weight whose elements all
have the same bytes is written as that one element (a folded ``ConstantOfShape`` costs its
element, not its size) and loads back bit for bit; a file that lies about a splat is
refused with a sentence, before anything is allocated."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.backend.vm import compile_module, load_bytes
from relaxc.backend.vm import format as F
from relaxc.backend.vm.codegen import is_splat
from relaxc.ir.diagnostics import RxError

from .util import compile_text, rehash

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32, "u8": np.uint8}


def program(shape: tuple[int, ...], dtype: str) -> str:
    s = "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"
    return (
        f"fn @main(%x: Tensor[{s}, {dtype}]) -> Tensor[{s}, {dtype}] {{\n"
        f'  %w: Tensor[{s}, {dtype}] = const("w")\n'
        "  %y = maximum(%x, %w)\n"
        "  return %y\n"
        "}\n"
    )


def build(arr: np.ndarray, dtype: str) -> bytes:
    return compile_module(compile_text(program(arr.shape, dtype)), {"w": arr})


def weight_kind(data: bytes) -> tuple[int, int]:
    """(offset of the first constant's kind byte, its kind)."""
    trace: list = []
    load_bytes(data, "m.rxb", trace=trace)
    off = next(o for o, n, what in trace if what == "flag")
    return off, data[off]


@given(
    st.sampled_from(sorted(DTYPES)),
    st.lists(st.integers(1, 5), min_size=1, max_size=3),
    st.sampled_from(["random", "splat", "zero", "negzero", "nan", "almost"]),
    st.integers(0, 2**16),
)
@settings(max_examples=60, deadline=None)
def test_weights_load_back_bit_for_bit_and_splats_are_one_element(dtype, shape, fill, seed):
    dt = np.dtype(DTYPES[dtype])
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    arr = (rng.standard_normal(size) * 50).astype(dt).reshape(shape)
    if fill == "splat":
        arr[...] = arr.flat[0]
    elif fill == "zero":
        arr[...] = 0
    elif fill == "negzero" and dt.kind == "f":
        arr[...] = -0.0
    elif fill == "nan" and dt.kind == "f":
        arr[...] = np.frombuffer(np.array([-1], "<i8").tobytes()[: dt.itemsize], dt)[0]
    elif fill == "almost":
        arr[...] = arr.flat[0]
        arr.flat[-1] = arr.flat[0] + 1
    data = build(arr, dtype)
    exe = load_bytes(data, "m.rxb")
    (w,) = [c.array for c in exe.constants if c.name == "w"]
    assert w.shape == arr.shape and w.dtype == arr.dtype
    assert w.tobytes() == arr.tobytes()  # NaN payloads and signed zeros included
    splat = (
        size > 1
        and len({arr.tobytes()[i : i + dt.itemsize] for i in range(0, arr.nbytes, dt.itemsize)})
        == 1
    )
    assert is_splat(np.ascontiguousarray(arr)) == splat
    assert (weight_kind(data)[1] == F.CONST_SPLAT) == splat
    if splat:
        assert build(np.zeros(1, dt).repeat(size).reshape(shape), dtype).__len__() == len(data)


def test_a_large_splat_costs_its_element() -> None:
    big = np.full((512, 1024), 0.25, np.float32)  # 2 MiB of one value
    data = build(big, "f32")
    assert len(data) < 4096
    (w,) = [c.array for c in load_bytes(data).constants if c.name == "w"]
    assert not w.flags.writeable and (w == 0.25).all()


def splat_file() -> tuple[bytes, int]:
    data = build(np.full((4, 8), 3.0, np.float32), "f32")
    off, kind = weight_kind(data)
    assert kind == F.CONST_SPLAT
    return data, off


def patched(data: bytes, at: int, new: bytes) -> bytes:
    return rehash(data[:at] + new + data[at + len(new) :])


def refused(data: bytes, *needles: str) -> None:
    with pytest.raises(RxError) as e:
        load_bytes(data, "m.rxb")
    for n in needles:
        assert n in e.value.message, e.value.message


def test_a_splat_declaring_more_than_one_element_is_refused() -> None:
    data, off = splat_file()
    nbytes_at = off + 1 + 4 + 1 + 4 + 8 * 2  # kind, name, dtype, rank, two dims
    refused(patched(data, nbytes_at, struct.pack("<Q", 128)), "a splat declares 128 bytes")


def test_a_splat_of_one_element_is_refused() -> None:
    data, off = splat_file()
    dims_at = off + 1 + 4 + 1 + 4
    refused(patched(data, dims_at, struct.pack("<QQ", 1, 1)), "a splat of 1 element")


def test_a_splat_larger_than_a_run_may_allocate_is_refused_before_allocating() -> None:
    data, off = splat_file()
    dims_at = off + 1 + 4 + 1 + 4
    refused(patched(data, dims_at, struct.pack("<QQ", 1 << 20, 1 << 20)), "byte limit")


def test_an_unknown_kind_is_refused() -> None:
    data, off = splat_file()
    refused(patched(data, off, bytes([3])), "kind 3 is neither")

"""The weights archive: exact round trips, splats recorded as one value, compression only
where it pays, deterministic bytes, and headers read without the data."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from relaxc.frontend.weights import (
    SPLATS_MEMBER,
    WeightsArchive,
    load_npz,
    npz_bytes,
    open_npz,
    splat_value,
)
from relaxc.ir.diagnostics import RxError

DTYPES = ["f4", "f8", "f2", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "?"]


def roundtrip(tmp_path: Path, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    path = tmp_path / "w.npz"
    path.write_bytes(npz_bytes(arrays))
    return load_npz(path)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


arrays_st = st.sampled_from(DTYPES).flatmap(
    lambda dt: hnp.arrays(
        np.dtype(dt),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
        elements=hnp.from_dtype(np.dtype(dt), allow_nan=True) if np.dtype(dt).kind == "f" else None,
    )
)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.from_regex(r"[a-z][a-z0-9._]{0,8}", fullmatch=True), arrays_st, max_size=4)
)
def test_round_trip_is_bit_exact(tmp_path_factory, arrays: dict[str, np.ndarray]) -> None:
    got = roundtrip(tmp_path_factory.mktemp("w"), arrays)
    assert sorted(got) == sorted(arrays)
    for name, arr in arrays.items():
        assert same_bits(got[name], arr), name


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(DTYPES),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=7),
    st.data(),
)
def test_a_splat_is_recorded_as_one_value_and_loads_exactly(
    tmp_path_factory, dtype: str, shape: tuple[int, ...], data
) -> None:
    value = data.draw(hnp.from_dtype(np.dtype(dtype)))
    arr = np.full(shape, value, dtype)
    data_bytes = npz_bytes({"s": arr})
    with zipfile.ZipFile(io.BytesIO(data_bytes)) as zf:
        names = zf.namelist()
        if arr.size > 1:
            assert names == [SPLATS_MEMBER]
            record = json.loads(zf.read(SPLATS_MEMBER))
            assert record["splats"]["s"]["shape"] == list(shape)
        else:
            assert names == ["s.npy"]
    path = tmp_path_factory.mktemp("w") / "w.npz"
    path.write_bytes(data_bytes)
    assert same_bits(load_npz(path)["s"], arr)


def test_splat_detection_is_by_bytes() -> None:
    assert splat_value(np.zeros(5, np.float32)) is not None
    assert splat_value(np.array([0.0, -0.0], np.float32)) is None  # different bits
    assert splat_value(np.array([np.nan, np.nan])) is not None
    assert splat_value(np.arange(4)) is None
    assert splat_value(np.zeros(1)) is None  # one element: nothing to save
    big = np.zeros(3_000_000, np.int8)
    big[-1] = 1  # the difference is in the last chunk
    assert splat_value(big) is None
    view = np.broadcast_to(np.float32(2.5), (1000, 1000))
    assert float(splat_value(view)) == 2.5


def test_a_large_splat_view_costs_bytes_not_megabytes(tmp_path: Path) -> None:
    arrays = {"w": np.broadcast_to(np.float32(0.5), (4096, 4096, 4))}  # 256 MiB, as a view
    data = npz_bytes(arrays)
    assert len(data) < 1024
    path = tmp_path / "w.npz"
    path.write_bytes(data)
    archive = open_npz(path)
    assert archive.spec("w") == ((4096, 4096, 4), np.dtype("float32"))
    assert archive.is_splat("w")


def test_compression_only_where_it_pays() -> None:
    rng = np.random.default_rng(0)
    sparse = np.zeros((512, 512), np.float32)
    sparse[::17, ::13] = 1.0
    noise = rng.standard_normal((512, 512)).astype(np.float32)
    data = npz_bytes({"sparse": sparse, "noise": noise})
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = {i.filename: i for i in zf.infolist()}
    assert infos["sparse.npy"].compress_type == zipfile.ZIP_DEFLATED
    assert infos["sparse.npy"].compress_size < sparse.nbytes // 20
    assert infos["noise.npy"].compress_type == zipfile.ZIP_STORED


def test_the_bytes_depend_only_on_the_arrays() -> None:
    rng = np.random.default_rng(1)
    arrays = {"b": rng.standard_normal(300), "a": np.ones((3, 3)), "c": np.zeros(4000)}
    again = {k: arrays[k].copy() for k in ("c", "a", "b")}  # other insertion order
    assert npz_bytes(arrays) == npz_bytes(again)


def test_numpy_reads_every_non_splat_member(tmp_path: Path) -> None:
    arrays = {"x": np.arange(10.0), "z": np.zeros((100, 100))}
    path = tmp_path / "w.npz"
    path.write_bytes(npz_bytes(arrays))
    with np.load(path) as f:
        assert same_bits(f["x"], arrays["x"])
    plain = tmp_path / "p.npz"
    plain.write_bytes(npz_bytes(arrays, splats=False))
    with np.load(plain) as f:
        assert sorted(f.files) == ["x", "z"] and same_bits(f["z"], arrays["z"])


def test_opening_reads_headers_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "w.npz"
    path.write_bytes(npz_bytes({"a": np.arange(12, dtype=np.int32).reshape(3, 4)}))

    def no_data(*args, **kwargs):
        raise AssertionError("array data was read")

    monkeypatch.setattr(np, "load", no_data)
    archive = open_npz(path)
    assert isinstance(archive, WeightsArchive)
    assert archive.spec("a") == ((3, 4), np.dtype("int32")) and len(archive) == 1
    monkeypatch.undo()
    assert same_bits(archive["a"], np.arange(12, dtype=np.int32).reshape(3, 4))


def test_an_old_uncompressed_archive_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.npz"
    arr = np.arange(6.0).reshape(2, 3)
    np.savez(path, w=arr)
    assert same_bits(load_npz(path)["w"], arr)


def _with_splats(tmp_path: Path, record: object) -> Path:
    path = tmp_path / "bad.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(SPLATS_MEMBER, json.dumps(record))
    return path


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"format": 2, "splats": {}}, "is not a splats record of format 1"),
        ({"format": 1}, "has no 'splats' object"),
        (
            {"format": 1, "splats": {"w": {"shape": [-1], "dtype": "<f4", "bytes": "00000000"}}},
            "'shape' must be a list of non-negative integers",
        ),
        (
            {"format": 1, "splats": {"w": {"shape": [2], "dtype": "|O", "bytes": "00"}}},
            "is not a plain number type",
        ),
        (
            {"format": 1, "splats": {"w": {"shape": [2], "dtype": "<f4", "bytes": "00"}}},
            "'bytes' holds 1 bytes, a float32 holds 4",
        ),
        (
            {"format": 1, "splats": {"w": {"shape": [2], "dtype": "<f4", "bytes": "zz"}}},
            "'bytes' is not hexadecimal",
        ),
    ],
)
def test_a_bad_splats_record_is_a_clear_error(tmp_path: Path, record: object, message: str) -> None:
    with pytest.raises(RxError, match="relaxc.splats.json") as e:
        open_npz(_with_splats(tmp_path, record))
    assert message in e.value.message


def test_a_name_both_array_and_splat_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "both.npz"
    buf = io.BytesIO()
    np.save(buf, np.zeros(3, np.float32))
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("w.npy", buf.getvalue())
        zf.writestr(
            SPLATS_MEMBER,
            json.dumps(
                {"format": 1, "splats": {"w": {"shape": [3], "dtype": "<f4", "bytes": "00000000"}}}
            ),
        )
    with pytest.raises(RxError, match="both as an array and as a splat"):
        open_npz(path)


@pytest.mark.parametrize(
    "name",
    [
        "bfloat16",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e8m0fnu",
        "float4_e2m1fn",
        "int4",
        "uint2",
    ],
)
def test_the_narrow_types_round_trip_as_their_bits(tmp_path: Path, name: str) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(getattr(ml_dtypes, name))
    count = 16 if name in ("float4_e2m1fn", "int4") else (4 if name == "uint2" else 256)
    bits = np.arange(count, dtype=np.uint8 if dt.itemsize == 1 else np.uint16)
    arrays = {"a": bits.view(dt), "s": np.full(5, bits[3]).astype(bits.dtype).view(dt)}
    back = roundtrip(tmp_path, arrays)
    for k, v in arrays.items():
        assert back[k].dtype == dt
        np.testing.assert_array_equal(back[k].view(bits.dtype), v.view(bits.dtype))
    assert open_npz(tmp_path / "w.npz").spec("a") == ((count,), dt)


def test_a_dtypes_record_naming_a_missing_array_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "w.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("relaxc.dtypes.json", json.dumps({"format": 1, "dtypes": {"x": "int4"}}))
    with pytest.raises(RxError, match="names 'x', which it does not hold"):
        open_npz(path)

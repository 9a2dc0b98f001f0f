"""Side-car weights: the ``.npz`` archive holding the arrays ``const("name")`` refers to.

Arrays are loaded with ``allow_pickle=False`` (a weights file never runs code), and every
named constant of a module is checked against its declared type before anything runs.
"""

from __future__ import annotations

import math
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator, Mapping

import numpy as np

from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Module
from relaxc.ir.signatures import ZIP_MAGICS
from relaxc.ir.types import TensorType, dtype_from_numpy, type_to_str
from relaxc.ir.vocab import named_constants  # its home; still imported from here by backend/c

Weights = dict[str, np.ndarray]


def default_weights_path(model: Path) -> Path | None:
    """``model.npz`` beside ``model.rx`` if it exists."""
    candidate = model.with_suffix(".npz")
    return candidate if candidate.is_file() else None


SPLATS_MEMBER = "relaxc.splats.json"
"""The member of a weights archive that records splats: arrays whose every element is the same
value, kept as their shape, dtype and the bytes of that one value (see docs/ir.md)."""
SPLATS_FORMAT = 1
DTYPES_MEMBER = "relaxc.dtypes.json"
"""The member of a weights archive that names the dtype of each array of bf16 or a
low-precision type (ml_dtypes' name): .npy has no word for them, so such an array is kept
as its bits (``uint8``, bf16's ``uint16``) and read back as its type."""
DTYPES_FORMAT = 1


class WeightsArchive(Mapping[str, np.ndarray]):
    """The arrays of an .npz archive, read only when asked for.

    Opening one checks every member's header (and the splats record) and keeps each array's
    shape and dtype (:meth:`spec`); the data of an array is read when it is looked up, so
    a command that needs only the types (``relaxc report``, ``relaxc check``) reads none.
    """

    def __init__(self, path: Path, what: str, specs: dict, splats: dict[str, np.ndarray]):
        self.path = path
        self.what = what
        self._specs: dict[str, tuple[tuple[int, ...], np.dtype]] = specs
        self._splats = splats  # name -> the one value (0-d), for splat members
        self._narrow: dict[str, np.dtype] = {}  # name -> its dtype, for arrays kept as bits

    def narrow(self, types: dict[str, np.dtype]) -> None:
        """Read the arrays ``types`` names (kept as their bits) as those dtypes."""
        for name, dt in types.items():
            shape, bits = self._specs[name]
            self._specs[name] = (shape, dt)
            if name in self._splats:
                self._splats[name] = self._splats[name].view(dt)
        self._narrow = dict(types)

    def spec(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        """The shape and dtype of array ``name`` (KeyError if there is none)."""
        return self._specs[name]

    def is_splat(self, name: str) -> bool:
        return name in self._splats

    def __getitem__(self, name: str) -> np.ndarray:
        shape, dtype = self._specs[name]
        if name in self._splats:
            return np.broadcast_to(self._splats[name], shape).copy()
        with _reading(self.path, self.what):
            with np.load(self.path, allow_pickle=False) as archive:
                return self._typed(name, archive[name])

    def _typed(self, name: str, a: np.ndarray) -> np.ndarray:
        dt = self._narrow.get(name)
        return a if dt is None else a.view(dt)

    def __iter__(self):
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def load_all(self) -> Weights:
        """Every array, read in one pass over the archive."""
        out: Weights = {}
        with _reading(self.path, self.what):
            with np.load(self.path, allow_pickle=False) as archive:
                for name in self._specs:
                    if name in self._splats:
                        out[name] = self[name]
                    else:
                        out[name] = self._typed(name, archive[name])
        return out

    def verify_data(self) -> None:
        """Read every member through once (checking its CRC), keeping none of it: the data
        is as readable as a build would need it, at the memory cost of one chunk."""
        with _reading(self.path, self.what):
            with zipfile.ZipFile(self.path) as zf:
                for info in zf.infolist():
                    with zf.open(info) as f:
                        while f.read(1 << 22):
                            pass


def load_npz(path: Path, what: str = "weights") -> Weights:
    """Load every array of an .npz file, or raise RxError with a plain sentence.

    Every member must be a ``.npy`` array of plain numbers (never a pickle, never Python
    objects) whose header agrees with the bytes it holds, or the splats record; headers are
    read before any array is, so a header that claims a huge shape allocates nothing.
    """
    return open_npz(path, what).load_all()


def open_npz(path: Path, what: str = "weights") -> WeightsArchive:
    """The archive at ``path`` with every header checked and no array data read yet."""
    if not path.exists():
        raise RxError(f"{what} file {path} does not exist")
    if path.is_dir():
        raise RxError(f"{what} file {path} is a directory")
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
    except OSError as e:
        raise RxError(f"cannot read {what} file {path}: {e.strerror or e}") from None
    if magic.startswith(b"\x93NUMPY"):
        raise RxError(
            f"{what} file {path} is a single .npy array, not an .npz archive (use numpy.savez)"
        )
    if magic[:4] not in ZIP_MAGICS:
        raise RxError(f"{what} file {path} is not a readable .npz archive (it is not a zip file)")
    specs: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    splats: dict[str, tuple[tuple[int, ...], np.ndarray]] = {}
    narrow: dict[str, str] = {}
    where = f"{what} file {path}"
    with _reading(path, what):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if info.filename == SPLATS_MEMBER:
                    splats = _read_splats(zf, info, where)
                    continue
                if info.filename == DTYPES_MEMBER:
                    narrow = _read_dtypes(zf, info, where)
                    continue
                shape, dtype = _check_member(zf, info, where)
                specs[info.filename[: -len(".npy")]] = (shape, dtype)
    for name, (shape, value) in splats.items():
        if name in specs:
            raise RxError(f"{where} holds '{name}' both as an array and as a splat")
        specs[name] = (shape, value.dtype)
    ones = {name: value for name, (_, value) in splats.items()}
    archive = WeightsArchive(path, what, dict(sorted(specs.items())), ones)
    archive.narrow(_narrow_types(narrow, specs, where))
    return archive


def _read_dtypes(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> dict[str, str]:
    import json

    try:
        record = json.loads(zf.read(info).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise RxError(f"{where}: {DTYPES_MEMBER} is not valid JSON ({_first_line(e)})") from None
    entries = record.get("dtypes") if isinstance(record, dict) else None
    if not isinstance(entries, dict) or record.get("format") != DTYPES_FORMAT:
        raise RxError(f"{where}: {DTYPES_MEMBER} is not a dtypes record of format {DTYPES_FORMAT}")
    return {str(k): str(v) for k, v in entries.items()}


def _narrow_types(
    names: Mapping[str, str], specs: Mapping[str, tuple[tuple[int, ...], np.dtype]], where: str
) -> dict[str, np.dtype]:
    """The dtype of each array the dtypes record names, checked against the bits it holds."""
    from relaxc.ir.lowp import WIDER

    known = {dt.name: dt for dt in WIDER}
    out: dict[str, np.dtype] = {}
    for name, dtype_name in names.items():
        dt = known.get(dtype_name)
        if dt is None:
            raise RxError(
                f"{where}: {DTYPES_MEMBER} gives '{name}' the dtype {dtype_name!r}, which relaxc "
                "does not hold here (bf16 and the low-precision types need ml_dtypes)"
            )
        if name not in specs:
            raise RxError(f"{where}: {DTYPES_MEMBER} names '{name}', which it does not hold")
        bits = specs[name][1]
        if bits != np.dtype(f"u{dt.itemsize}"):
            raise RxError(
                f"{where}: '{name}' holds {bits}, not the {dt.itemsize}-byte bits of {dtype_name}"
            )
        out[name] = dt
    return out


def _read_splats(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str
) -> dict[str, tuple[tuple[int, ...], np.ndarray]]:
    """The splats record: name -> the splat's shape and its one value (a 0-d array)."""
    import json

    if info.file_size > 64 << 20:
        raise RxError(f"{where}: {SPLATS_MEMBER} is {info.file_size:,} bytes, too large")
    try:
        record = json.loads(zf.read(info).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise RxError(f"{where}: {SPLATS_MEMBER} is not valid JSON ({_first_line(e)})") from None
    if not isinstance(record, dict) or record.get("format") != SPLATS_FORMAT:
        raise RxError(f"{where}: {SPLATS_MEMBER} is not a splats record of format {SPLATS_FORMAT}")
    entries = record.get("splats")
    if not isinstance(entries, dict):
        raise RxError(f"{where}: {SPLATS_MEMBER} has no 'splats' object")
    out: dict[str, tuple[tuple[int, ...], np.ndarray]] = {}
    for name, entry in entries.items():
        bad = f"{where}: {SPLATS_MEMBER}: splat '{name}'"
        if not isinstance(entry, dict):
            raise RxError(f"{bad} is not an object")
        shape, dtype_str, hexed = entry.get("shape"), entry.get("dtype"), entry.get("bytes")
        if not (
            isinstance(shape, list)
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ):
            raise RxError(f"{bad}: 'shape' must be a list of non-negative integers")
        try:
            dtype = np.dtype(str(dtype_str))
        except TypeError:
            raise RxError(f"{bad}: 'dtype' {dtype_str!r} is not a numpy dtype") from None
        if dtype.hasobject or dtype.kind not in "biuf":
            raise RxError(f"{bad}: dtype {dtype} is not a plain number type")
        try:
            raw = bytes.fromhex(str(hexed))
        except ValueError:
            raise RxError(f"{bad}: 'bytes' is not hexadecimal") from None
        if len(raw) != dtype.itemsize:
            raise RxError(
                f"{bad}: 'bytes' holds {len(raw)} bytes, a {dtype} holds {dtype.itemsize}"
            )
        out[str(name)] = (tuple(shape), np.frombuffer(raw, dtype).reshape(()))
    return out


@contextmanager
def _reading(path: Path, what: str) -> Iterator[None]:
    """Turn what zipfile and numpy raise on a bad archive into RxError (plain sentences)."""
    try:
        yield
    except RxError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as e:
        raise RxError(
            f"{what} file {path} is not a readable .npz archive ({_first_line(e)})"
        ) from None
    except ValueError as e:
        raise RxError(
            f"{what} file {path} holds an array relaxc cannot load safely ({_first_line(e)})"
        ) from None
    except MemoryError:
        raise RxError(
            f"{what} file {path} holds arrays too large for the memory of this machine"
        ) from None


def _check_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str
) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of a member, or RxError unless it is a .npy array of plain data
    whose header agrees with its bytes: exactly the bytes its shape and dtype need follow
    the header (fewer, or any trailing byte, is refused; the member's size is read from the
    zip directory, not by reading the member)."""
    name = info.filename
    if not name.endswith(".npy"):
        raise RxError(f"{where} holds {name!r}, which is not a .npy array")
    try:
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
            elif version in ((2, 0), (3, 0)):
                shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unknown .npy format version {version[0]}.{version[1]}")
            holds = info.file_size - f.tell()
    except (ValueError, EOFError) as e:
        raise RxError(
            f"{where}: {name} is not a .npy array relaxc can read ({_first_line(e)})"
        ) from None
    if dtype.hasobject:
        raise RxError(f"{where}: {name} holds Python objects (a pickle), which relaxc never loads")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > holds:
        raise RxError(
            f"{where}: {name} declares shape {tuple(shape)} of {dtype} ({nbytes:,} bytes) "
            f"but holds only {max(holds, 0):,} bytes"
        )
    if nbytes < holds:  # the member's size from the zip directory: nothing is read to know
        raise RxError(
            f"{where}: {name} declares shape {tuple(shape)} of {dtype} ({nbytes:,} bytes) "
            f"but holds {holds:,} bytes after its header "
            f"({holds - nbytes:,} byte{'s' if holds - nbytes != 1 else ''} too many)"
        )
    return tuple(int(d) for d in shape), dtype


def _first_line(e: BaseException) -> str:
    return (str(e).strip().split("\n") or [""])[0] or type(e).__name__


def check_weights(
    module: Module, weights: Mapping[str, np.ndarray], source: str = "the weights"
) -> None:
    """Check every named constant exists in ``weights`` with the declared shape and dtype."""
    for name, bind in named_constants(module):
        t = bind.type
        if name not in weights:
            have = ", ".join(sorted(weights)[:8]) or "none"
            raise RxError(
                f"weight '{name}' is not in {source}", bind.loc, notes=(f"weights present: {have}",)
            )
        if not isinstance(t, TensorType):
            continue
        shape, np_dtype = _spec(weights, name)
        dtype = dtype_from_numpy(np_dtype)
        if dtype != t.dtype:
            raise RxError(
                f"weight '{name}' has dtype {np_dtype} in {source} but is declared "
                f"{type_to_str(t)}",
                bind.loc,
            )
        if not t.is_static() or tuple(shape) != tuple(t.shape):
            raise RxError(
                f"weight '{name}' has shape {tuple(shape)} in {source} but is declared "
                f"{type_to_str(t)}",
                bind.loc,
            )


def splat_view(a: np.ndarray) -> np.ndarray | None:
    """The one value (0-d) of ``a`` when ``a`` is a view of a single value (every stride 0,
    as ``numpy.broadcast_to`` makes), found without reading the data; else None."""
    if a.size > 1 and all(st == 0 for st in a.strides):
        return np.array(a[(0,) * a.ndim])
    return None


_SCAN = 1 << 20
"""Elements compared at a time when looking for a splat (bounded extra memory)."""


def splat_value(a: np.ndarray) -> np.ndarray | None:
    """The one value (0-d) of ``a`` if it has more than one element and all have the same
    bytes (so -0.0 and 0.0 differ, and a NaN matches only the same NaN); else None."""
    view = splat_view(a)
    if view is not None or a.size < 2:
        return view
    if a.dtype.itemsize not in (1, 2, 4, 8) or a.dtype.hasobject:
        return None
    flat = np.ascontiguousarray(a).reshape(-1)
    bits = flat.view(f"u{a.dtype.itemsize}")
    first = bits[0]
    for i in range(0, bits.size, _SCAN):
        if not (bits[i : i + _SCAN] == first).all():
            return None
    return np.array(flat[0])


_STORE_RATIO = 0.9
"""A member is deflated only if its first MiB deflates below this fraction of its size
(random weights barely compress, and deflating them costs seconds for nothing)."""


def write_npz(f: BinaryIO, arrays: Mapping[str, np.ndarray], splats: bool = True) -> None:
    """Write ``arrays`` to ``f`` as an .npz archive whose bytes depend only on the arrays.

    Names are sorted and every entry has a fixed timestamp (numpy's ``savez`` stamps the
    current time). An array whose elements are all the same value (a splat, such as a
    folded ConstantOfShape) is recorded as that value in the ``relaxc.splats.json`` member;
    any other is a ``.npy`` member, deflated when deflating shrinks it, streamed in chunks
    so that a view is never copied whole. ``splats=False`` writes every array as a ``.npy``
    member (for archives other programs read with ``numpy.load``: run's outputs).
    """
    import json

    from relaxc.ir.lowp import WIDER

    record_splats = splats
    splats: dict[str, dict] = {}
    narrow: dict[str, str] = {}
    with zipfile.ZipFile(f, "w", allowZip64=True) as zf:
        for name in sorted(arrays):
            arr = np.asarray(arrays[name])
            if arr.dtype in WIDER:  # kept as its bits (DTYPES_MEMBER)
                narrow[name] = arr.dtype.name
                arr = arr.view(f"u{arr.dtype.itemsize}")
            one = splat_value(arr) if record_splats else None
            if one is not None:
                splats[name] = {
                    "shape": [int(d) for d in arr.shape],
                    "dtype": arr.dtype.str,
                    "bytes": one.tobytes().hex(),
                }
                continue
            info = _entry(f"{name}.npy", _compress_type(arr))
            with zf.open(info, "w", force_zip64=arr.nbytes > (1 << 31) - (1 << 20)) as out:
                np.lib.format.write_array(out, arr, allow_pickle=False)
        if splats:
            record = {"format": SPLATS_FORMAT, "splats": splats}
            text = json.dumps(record, sort_keys=True, indent=1) + "\n"
            zf.writestr(_entry(SPLATS_MEMBER, zipfile.ZIP_DEFLATED), text.encode("utf-8"))
        if narrow:
            types_record = {"format": DTYPES_FORMAT, "dtypes": narrow}
            text = json.dumps(types_record, sort_keys=True, indent=1) + "\n"
            zf.writestr(_entry(DTYPES_MEMBER, zipfile.ZIP_DEFLATED), text.encode("utf-8"))


def _entry(name: str, compress_type: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = 0o644 << 16
    info.compress_type = compress_type
    return info


def _compress_type(arr: np.ndarray) -> int:
    """ZIP_DEFLATED if a sample of the array's bytes deflates well, else ZIP_STORED."""
    import zlib

    if arr.nbytes < 4096:
        return zipfile.ZIP_DEFLATED
    k = max(1, (1 << 20) // max(arr.dtype.itemsize, 1))
    chunks = np.nditer(arr, flags=["external_loop", "buffered"], buffersize=k, order="C")
    sample = next(iter(chunks)).tobytes()
    packed = len(zlib.compress(sample, 1))
    return zipfile.ZIP_DEFLATED if packed < _STORE_RATIO * len(sample) else zipfile.ZIP_STORED


def _spec(weights: Mapping[str, np.ndarray], name: str) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of a weight, without reading an archive's data."""
    if isinstance(weights, WeightsArchive):
        return weights.spec(name)
    arr = weights[name]
    return tuple(arr.shape), arr.dtype


def npz_bytes(arrays: Mapping[str, np.ndarray], splats: bool = True) -> bytes:
    """:func:`write_npz` into memory (for small archives: inputs, outputs, tests)."""
    import io

    buf = io.BytesIO()
    write_npz(buf, arrays, splats)
    return buf.getvalue()

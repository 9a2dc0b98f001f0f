"""Side-car weights: the ``.npz`` archive holding the arrays ``const("name")`` refers to.

Arrays are loaded with ``allow_pickle=False`` (a weights file never runs code), and every
named constant of a module is checked against its declared type before anything runs.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import Mapping

import numpy as np

from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Bind, Call, Module
from relaxc.ir.types import TensorType, dtype_from_numpy, type_to_str

Weights = dict[str, np.ndarray]


def default_weights_path(model: Path) -> Path | None:
    """``model.npz`` beside ``model.rx`` if it exists."""
    candidate = model.with_suffix(".npz")
    return candidate if candidate.is_file() else None


_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
"""How a zip archive starts: a member's local header, or the end record of an empty archive."""


def load_npz(path: Path, what: str = "weights") -> Weights:
    """Load every array of an .npz file, or raise RxError with a plain sentence.

    Every member must be a ``.npy`` array of plain numbers (never a pickle, never Python
    objects) whose header agrees with the bytes it holds; headers are read before any array
    is, so a header that claims a huge shape allocates nothing.
    """
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
    if magic[:4] not in _ZIP_MAGIC:
        raise RxError(f"{what} file {path} is not a readable .npz archive (it is not a zip file)")
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                _check_member(zf, info, f"{what} file {path}")
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
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


def _check_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> None:
    """RxError unless the member is a .npy array of plain data that fits in its own bytes."""
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


def _first_line(e: BaseException) -> str:
    return (str(e).strip().split("\n") or [""])[0] or type(e).__name__


def named_constants(module: Module) -> list[tuple[str, Bind]]:
    """Every ``%w: T = const("name")`` binding of the module, in order."""
    out = []
    for fn in module.functions:
        for s in fn.body:
            if isinstance(s, Bind) and isinstance(s.value, Call) and s.value.op == "const":
                args = s.value.args
                value = args[0] if args else dict(s.value.kwargs).get("value")
                if isinstance(value, str):
                    out.append((value, s))
    return out


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
        arr = weights[name]
        if not isinstance(t, TensorType):
            continue
        dtype = dtype_from_numpy(arr.dtype)
        if dtype != t.dtype:
            raise RxError(
                f"weight '{name}' has dtype {arr.dtype} in {source} but is declared "
                f"{type_to_str(t)}",
                bind.loc,
            )
        if not t.is_static() or tuple(arr.shape) != tuple(t.shape):
            raise RxError(
                f"weight '{name}' has shape {tuple(arr.shape)} in {source} but is declared "
                f"{type_to_str(t)}",
                bind.loc,
            )


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An uncompressed .npz archive of ``arrays`` whose bytes depend only on the arrays.

    numpy's own ``savez`` stamps the current time into the zip entries; this writer uses a
    fixed timestamp and sorted names so the same arrays always give the same file.
    """
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            member = io.BytesIO()
            np.lib.format.write_array(
                member, np.asarray(arrays[name], order="C"), allow_pickle=False
            )
            zf.writestr(info, member.getvalue())
    return buf.getvalue()

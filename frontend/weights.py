"""Side-car weights: the ``.npz`` archive holding the arrays ``const("name")`` refers to.

Arrays are loaded with ``allow_pickle=False`` (a weights file never runs code), and every
named constant of a module is checked against its declared type before anything runs.
"""

from __future__ import annotations

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


def load_npz(path: Path, what: str = "weights") -> Weights:
    """Load every array of an .npz file, or raise RxError with a plain sentence."""
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
        raise RxError(f"{what} file {path} is a single .npy array, not an .npz archive (use numpy.savez)")
    if not magic.startswith(b"PK"):
        raise RxError(f"{what} file {path} is not a readable .npz archive (it is not a zip file)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except RxError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise RxError(f"{what} file {path} is not a readable .npz archive ({e})") from None
    except ValueError as e:
        raise RxError(f"{what} file {path} holds an array relaxc cannot load safely ({e})") from None


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


def check_weights(module: Module, weights: Mapping[str, np.ndarray], source: str = "the weights") -> None:
    """Check every named constant exists in ``weights`` with the declared shape and dtype."""
    for name, bind in named_constants(module):
        t = bind.type
        if name not in weights:
            have = ", ".join(sorted(weights)[:8]) or "none"
            raise RxError(f"weight '{name}' is not in {source}", bind.loc, notes=(f"weights present: {have}",))
        arr = weights[name]
        if not isinstance(t, TensorType):
            continue
        dtype = dtype_from_numpy(arr.dtype)
        if dtype != t.dtype:
            raise RxError(
                f"weight '{name}' has dtype {arr.dtype} in {source} but is declared {type_to_str(t)}", bind.loc
            )
        if not t.is_static() or tuple(arr.shape) != tuple(t.shape):
            raise RxError(
                f"weight '{name}' has shape {tuple(arr.shape)} in {source} but is declared {type_to_str(t)}",
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
            np.lib.format.write_array(member, np.asarray(arrays[name], order="C"), allow_pickle=False)
            zf.writestr(info, member.getvalue())
    return buf.getvalue()

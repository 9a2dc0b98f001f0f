"""Reading sources and writing outputs safely.

Outputs are written atomically (a temporary file in the same folder, then a rename), so a
reader never sees half a file, and an output path that names one of the inputs is refused.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable

from relaxc.ir.diagnostics import Loc, RxError

MAX_SOURCE_BYTES = 256 << 20


def read_source(path: Path) -> str:
    """The text of an .rx file, or RxError with a plain sentence (missing, binary, not UTF-8)."""
    if not path.exists():
        raise RxError(f"file {path} does not exist")
    if path.is_dir():
        raise RxError(f"{path} is a directory, not an .rx file")
    try:
        size = path.stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise RxError(f"{path} is {size:,} bytes; .rx files over {MAX_SOURCE_BYTES:,} bytes are refused")
        data = path.read_bytes()
    except OSError as e:
        raise RxError(f"cannot read {path}: {e.strerror or e}") from None
    if b"\x00" in data:
        raise RxError(f"{path} is a binary file, not .rx text (it contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise RxError(
            f"not UTF-8 text: invalid byte 0x{data[e.start]:02x}", Loc(str(path), line, col)
        ) from None
    return text[1:] if text.startswith("\ufeff") else text  # a UTF-8 byte-order mark is not content


def refuse_overwriting_inputs(output: Path, inputs: Iterable[Path]) -> None:
    """RxError if ``output`` is (or links to) one of ``inputs``."""
    out = output.resolve()
    for p in inputs:
        if p is not None and Path(p).resolve() == out:
            raise RxError(f"refusing to write {output}: it is one of the inputs")


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` via a temporary file and a rename (never half-written)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise RxError(f"cannot write {path}: folder {folder} does not exist")
    if path.is_dir():
        raise RxError(f"cannot write {path}: it is a directory")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise RxError(f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

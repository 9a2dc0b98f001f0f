"""Reading sources and writing outputs safely.

Outputs are written atomically (a temporary file in the same folder, then a rename), so a
reader never sees half a file, and an output path that names one of the inputs is refused.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Sequence, Union

from relaxc.ir.diagnostics import Loc, RxError

from .units import short_bytes

MAX_SOURCE_BYTES = 256 << 20

Content = Union[bytes, str, Callable[[BinaryIO], None]]
"""What an output holds: bytes, text (written as UTF-8), or a function that writes it to a
binary file (so that a large output is streamed, never held in memory whole)."""


def read_source(path: Path, keep_newlines: bool = False) -> str:
    """The text of an .rx file, or RxError with a plain sentence (missing, binary, not UTF-8).

    A line ends at ``\n`` or ``\r\n``; a lone ``\r`` (old Mac text) is read as ``\n`` too
    (see :func:`normalize_newlines`; ``keep_newlines`` leaves it), so that such a file is not
    one long comment. A device or a pipe is read up to the size limit (``/dev/zero`` is
    refused, not read forever).
    """
    if not path.exists():
        raise RxError(f"file {path} does not exist")
    if path.is_dir():
        raise RxError(f"{path} is a directory, not an .rx file")
    try:
        size = path.stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise RxError(
                f"{path} is {size:,} bytes; .rx files over {MAX_SOURCE_BYTES:,} bytes are refused"
            )
        data = _read_bounded(path, MAX_SOURCE_BYTES)
    except OSError as e:
        raise RxError(f"cannot read {path}: {e.strerror or e}") from None
    if b"\x00" in data:
        hint = not_rx_hint(path)
        raise RxError(
            f"{path} is a binary file, not .rx text (it contains NUL bytes)",
            notes=(hint,) if hint else (),
        )
    if len(data) > MAX_SOURCE_BYTES:
        raise RxError(
            f"{path} is larger than {MAX_SOURCE_BYTES:,} bytes; such .rx files are refused"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        start = data.rfind(b"\n", 0, e.start) + 1
        end = data.find(b"\n", e.start)
        line = data.count(b"\n", 0, e.start) + 1
        col = len(data[start : e.start].decode("utf-8")) + 1  # characters, not bytes
        shown = (
            data[start : end if end >= 0 else len(data)]
            .decode("utf-8", "replace")
            .rstrip("\r")
            .replace("\t", " ")
        )
        raise RxError(
            f"not UTF-8 text: invalid byte 0x{data[e.start]:02x}",
            Loc(str(path), line, col),
            snippet=("  " + shown, "  " + " " * (col - 1) + "^"),
        ) from None
    if not keep_newlines:
        text = normalize_newlines(text)
    return text[1:] if text.startswith("\ufeff") else text  # a UTF-8 byte-order mark is not content


def not_rx_hint(path: Path) -> str | None:
    """Which command reads ``path`` when it is handed to one that reads only .rx text."""
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        return (
            f"{path.name} is an ONNX model: relaxc build, report, run, check and passes take "
            f"it directly, and relaxc import {path.name} writes it as .rx"
        )
    if suffix == ".rxb":
        return f"{path.name} is VM bytecode: relaxc run and relaxc disasm read it"
    if suffix == ".npz":
        return f"{path.name} is a weights archive: give the .rx beside it (its weights are found)"
    return None


_LONE_CR = re.compile("\r(?!\n)")


def normalize_newlines(text: str) -> str:
    """``text`` with every lone ``\r`` made a ``\n`` (``\r\n`` is left: the lexer skips the
    ``\r``)."""
    return _LONE_CR.sub("\n", text) if "\r" in text else text


def _read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of ``path``: all of them, or (a device, a pipe) the first ``limit + 1``,
    stopping early at a chunk that holds a NUL byte."""
    chunks = []
    total = 0
    with open(path, "rb") as f:
        while total <= limit:
            chunk = f.read(min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if b"\x00" in chunk:
                break
    return b"".join(chunks)


def refuse_overwriting_inputs(output: Path, inputs: Iterable[Path]) -> None:
    """RxError if ``output`` is (or links to) one of ``inputs``."""
    out = output.resolve()
    for p in inputs:
        if p is not None and Path(p).resolve() == out:
            raise RxError(f"refusing to write {output}: it is one of the inputs")


def check_output_file(path: Path) -> None:
    """RxError now, before any work, if ``path`` cannot be written as an output file: it is
    a directory, its folder does not exist (or is a file), or this user cannot create a file
    in its folder. The same sentences as :func:`write_all_atomic`'s, which checks again when
    it writes (a folder can vanish meanwhile); this only moves the refusal before a compile.
    A device or a named pipe (``/dev/null``) is written directly and passes."""
    try:
        if path.is_dir():
            raise RxError(f"cannot write {path}: it is a directory")
        if path.exists() and not path.is_file():
            return
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise RxError(f"cannot write {path}: folder {folder} does not exist")
    except OSError:  # a path the system refuses to look at: the write will say why
        return
    if not os.access(folder, os.W_OK | os.X_OK):
        raise RxError(f"cannot write {path}: cannot create files in folder {folder}")


def check_output_folder(folder: Path) -> None:
    """RxError now, before any work, unless files can be written into ``folder``: it is a
    folder this user can create files in, or it does not exist and can be created (its
    nearest existing ancestor is a folder this user can create folders in)."""
    try:
        existing = next(p for p in (folder, *folder.parents) if p.exists())
        is_dir = existing.is_dir()
    except (OSError, StopIteration):
        return
    if not is_dir:
        if existing == folder:
            raise RxError(f"cannot write into {folder}: it is a file, not a folder")
        raise RxError(f"cannot create folder {folder}: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        if existing == folder:
            raise RxError(f"cannot write into folder {folder}: permission denied")
        raise RxError(f"cannot create folder {folder}: permission denied in {existing}")


def check_outputs(outputs: Iterable[Path | None], inputs: Iterable[Path | None]) -> None:
    """Before any work: each of ``outputs`` (None: not asked for) can be written as a file
    (:func:`check_output_file`) and is none of ``inputs``."""
    guarded = list(inputs)
    for out in outputs:
        if out is not None:
            refuse_overwriting_inputs(out, guarded)
            check_output_file(out)


def write_atomic(path: Path, data: Content) -> None:
    """Write ``data`` to ``path`` via a temporary file and a rename (never half-written)."""
    write_all_atomic([(path, data)])


def write_all_atomic(files: Sequence[tuple[Path, Content]]) -> None:
    """Write several files so that either all of them are replaced or none is.

    Each is first written in full to a temporary file beside it; only when every one is
    ready are they renamed over their targets. A target that exists and is not a regular
    file (``/dev/null``, ``/dev/stdout``, a named pipe) is written to directly instead: a
    rename would replace the device itself.
    """
    staged: list[tuple[Path, str | None, Content]] = []
    try:
        for path, data in files:
            if isinstance(data, str):
                data = data.encode("utf-8")
            staged.append((path, _stage(path, data), data))
        for i, (path, tmp, data) in enumerate(staged):
            if tmp is None:
                _write_special(path, data)
                continue
            try:
                os.replace(tmp, path)
            except OSError as e:
                raise RxError(f"cannot write {path}: {e.strerror or e}") from None
            staged[i] = (path, None, data)
    finally:
        for _, tmp, _ in staged:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)


def _stage(path: Path, data: Content) -> str | None:
    """A temporary file beside ``path`` holding ``data``; None if ``path`` is not a regular file."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise RxError(f"cannot write {path}: folder {folder} does not exist")
    if path.is_dir():
        raise RxError(f"cannot write {path}: it is a directory")
    if path.exists() and not path.is_file():
        return None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise RxError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            _put(f, data)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise RxError(f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _put(f: BinaryIO, data: Content) -> None:
    if callable(data):
        data(f)
    else:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def _write_special(path: Path, data: Content) -> None:
    try:
        with open(path, "wb") as f:
            _put(f, data)
    except OSError as e:
        raise RxError(f"cannot write {path}: {e.strerror or e}") from None


Written = Union[Path, tuple[Path, str]]
"""A file a command wrote, alone or with a detail to print beside its size (``82 bindings``)."""


def written_text(item: Written) -> str:
    """``out/m.c (663.2 KiB)``: a written file and its size on disk (a device or a pipe, which
    has none, is named alone), then the item's detail if any."""
    path, detail = item if isinstance(item, tuple) else (item, "")
    try:
        st = path.stat()
        size = short_bytes(st.st_size) if path.is_file() else ""
    except OSError:
        size = ""
    facts = ", ".join(f for f in (size, detail) if f)
    return f"{path} ({facts})" if facts else str(path)


def wrote_line(items: Sequence[Written]) -> str:
    """The line a command prints (on stderr, not with ``-q``) after writing files:
    ``wrote out/m.h (2.1 KiB), out/m.c (663.2 KiB), out/m_weights.bin (97.5 MiB)``."""
    return "wrote " + ", ".join(written_text(i) for i in items)


def total_size(paths: Iterable[Path]) -> int:
    """The bytes on disk of the regular files among ``paths``."""
    total = 0
    for p in paths:
        try:
            if p.is_file():
                total += p.stat().st_size
        except OSError:
            pass
    return total

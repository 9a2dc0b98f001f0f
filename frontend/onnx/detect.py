"""What a file that is not an ONNX model is, for the error that says so.

An ONNX model is binary protobuf with no magic number of its own, and a small one can be
made only of printable bytes (the onnx package's own ``test_ReLU/model.onnx``, 120 bytes):
a file is an ONNX model when it parses as one (:func:`relaxc.frontend.onnx.model.load_model`),
whatever its bytes look like. Only when it does not parse does :func:`describe_non_onnx` look at
its first bytes to say what it is instead: a zip archive (weights), relaxc bytecode, or
text (an ``.rx`` program). This module does not need the onnx package.
"""

from __future__ import annotations

from pathlib import Path

from relaxc.ir.signatures import RXB_MAGIC, ZIP_MAGICS

TEXT_PROGRAM = (
    "text: an .rx program, which relaxc build, report, run and check read directly "
    "(nothing to import)"
)


def describe_non_onnx(path: Path, text: bool = True) -> str | None:
    """What ``path`` is, judged by its first 64 KiB, when that is sure: a zip archive,
    relaxc bytecode, or (with ``text``) UTF-8 text without NUL bytes; None otherwise."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return None  # the caller reports a missing or unreadable file
    if head.startswith(ZIP_MAGICS):
        return "a zip archive (an .npz of weights?)"
    if head.startswith(RXB_MAGIC):
        return "relaxc bytecode: relaxc run and relaxc disasm read it"
    if text and head and b"\x00" not in head and _is_text(head):
        return TEXT_PROGRAM
    return None


def _is_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(head) - 3  # a character cut at the end of the sample
    return True

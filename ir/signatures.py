"""The first bytes of the files relaxc reads and writes.

Any layer may need to tell one kind of file from another (an importer says "this is relaxc
bytecode, not an ONNX model"), so the signatures live here, on the floor, and the layer that
writes a format imports its signature from here rather than others importing that layer.
"""

from __future__ import annotations

RXB_MAGIC = b"\x89RXB\r\n\x1a\n"
"""How a VM program (``.rxb``, :mod:`relaxc.backend.vm.format`) starts."""

ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
"""How a zip archive (an ``.npz`` of weights) starts: a member's local header, or the end
record of an empty archive."""

__all__ = ["RXB_MAGIC", "ZIP_MAGICS"]

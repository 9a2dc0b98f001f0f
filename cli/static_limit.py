"""``relaxc build -t c --max-static-bytes``: a limit on the C program's static memory.

The C target puts every planned byte in static arrays (``.bss``) of the size the plan gives
at the dims' upper bounds. A bound far above what the program is run with (``n <= 2**30``)
makes an array of tens of GiB that compiles without a word and a binary that dies before
``main`` (defect 4 of issue 28); the VM refuses the same plan. So the build refuses it first.
"""

from __future__ import annotations

from relaxc.backend.c import ModelInfo
from relaxc.ir.diagnostics import RxError

from .units import format_bytes

MAX_STATIC_BYTES = 1 << 30
"""``--max-static-bytes``'s default: 1 GiB of static arrays (.bss). More is rarely what a C
build of a model means (a dim's upper bound far above its use), and near 2 GiB a binary of
x86-64's default code model no longer links or starts (a 32 GiB arena died with SIGSEGV
before main)."""


def check_static_bytes(info: ModelInfo, limit: int | None) -> None:
    """RxError when the C program's static memory is larger than ``limit`` (None: the
    default, :data:`MAX_STATIC_BYTES`), naming the size, what it is made of and the option."""
    limit = MAX_STATIC_BYTES if limit is None else limit
    if info.static_bytes <= limit:
        return
    largest = sorted(info.buffers, key=lambda b: -b.nbytes)[:3]
    parts = ", ".join(f"%{b.ir_name}: {format_bytes(b.nbytes)}" for b in largest)
    bounds = ", ".join(f"{k} <= {v:,}" for k, v in sorted(info.bounds.items()))
    at = f" at the upper bounds {bounds}" if bounds else ""
    raise RxError(
        f"the C program's static memory would be {format_bytes(info.static_bytes)}{at} "
        f"({parts}), more than --max-static-bytes {format_bytes(limit)}",
        notes=(
            "a static array that large makes a binary that does not start; lower the upper "
            "bounds to what the program will be run with (--bound N=... for an ONNX model, "
            "attrs {upper_bounds = {...}} in an .rx), or raise --max-static-bytes if the "
            "target has the memory",
        ),
    )

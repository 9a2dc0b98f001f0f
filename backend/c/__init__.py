"""The C backend: a planned module becomes self-contained C99 that runs in a static arena.

``emit_c(module, weights, prefix=...)`` returns the text of ``<prefix>.c`` and
``<prefix>.h`` (and, with ``emit_main=True``, ``<prefix>_main.c``); see docs/c.md.
"""

from .emit import (
    CONSTANT_MODES,
    INLINE_CONSTANTS_LIMIT,
    CSources,
    ModelInfo,
    check_prefix,
    constants_mode,
    default_prefix,
    emit_c,
)
from .oplist import op_list_markdown

__all__ = [
    "CONSTANT_MODES",
    "CSources",
    "INLINE_CONSTANTS_LIMIT",
    "ModelInfo",
    "check_prefix",
    "constants_mode",
    "default_prefix",
    "emit_c",
    "op_list_markdown",
]

"""The C emitter: a planned module becomes ``<prefix>.c`` and ``<prefix>.h`` (C99, no runtime).

What the emitted file holds, in order:

* the packed-call types of TVM's convention (``TVMValue``, ``DLTensor``), when the runner
  calls kernels packed (after LegalizePackedCalls);
* helpers (floor division, half floats, ...), only those used;
* one static, aligned array per PlanMemory arena, of exactly the planned size, and one per
  other bounded allocation; an unbounded dynamic allocation is an error for this target;
* constants (weights and literals) as ``static const`` arrays, each weight once;
* one ``static`` function per kernel-op instance used, then one per primitive function used
  (and its packed wrapper when it is called packed);
* ``int32_t <prefix>_run(inputs, outputs, dims)`` and ``<prefix>_strerror``.

The work is split along its seams: :mod:`~relaxc.backend.c.module` collects the pieces of the
file (constants, kernels from :mod:`~relaxc.backend.c.kernels`, static buffers),
:mod:`~relaxc.backend.c.runner` emits the run function, :mod:`~relaxc.backend.c.primitive`
each primitive function, :mod:`~relaxc.backend.c.api` the text of the files, and
:mod:`~relaxc.backend.c.model` holds the values and the interface they share.

Names from the IR reach C only through :class:`~relaxc.backend.c.names.Scope`.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from relaxc.ir.vocab import named_constants
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Module
from relaxc.ir.verifier import ModuleTypes, verify_module

from .api import header_text, main_text, model_text
from .model import CSources, ModelInfo
from .module import ModuleEmitter
from .names import is_identifier, sanitize, word_counts
from .runner import RunnerEmitter

CONSTANT_MODES = ("auto", "inline", "file")
"""Where the C target puts the weights: in the C file, in a binary file beside it, or (auto,
the default) in the file unless they are at most :data:`INLINE_CONSTANTS_LIMIT` bytes."""

INLINE_CONSTANTS_LIMIT = 64 * 1024
"""The most bytes of named weights ``constants="auto"`` still writes into ``<prefix>.c``
(64 KiB: about 230 KB of C text, which any C compiler reads in well under a second). Above
it the weights go to ``<prefix>_weights.bin``: a real model's weights written as C are a
file several times their size that the C compiler parses word by word (resnet50: 345 MB of
C, minutes of ``cc -O2`` and gigabytes of memory)."""

Progress = Callable[[str, int, int], None]
"""A progress callback: ``(what, done, total)``."""


def named_weight_bytes(module: Module, weights: Mapping[str, np.ndarray]) -> int:
    """The bytes of the distinct named weights ``module``'s constants read (those present in
    ``weights``)."""
    names = {name for name, _ in named_constants(module)}
    return sum(int(weights[n].nbytes) for n in names if n in weights)


def constants_mode(module: Module, weights: Mapping[str, np.ndarray]) -> str:
    """What ``constants="auto"`` means for ``module``: ``"file"`` above
    :data:`INLINE_CONSTANTS_LIMIT` bytes of named weights, else ``"inline"``."""
    return "file" if named_weight_bytes(module, weights) > INLINE_CONSTANTS_LIMIT else "inline"


def default_prefix(stem: str) -> str:
    """A C prefix from a file stem: sanitized, lower-case first letter kept, never empty."""
    s = sanitize(stem)
    if not s or not s[0].isalpha():
        s = "model_" + s if s else "model"
    if not is_identifier(s):
        s = "m_" + s
    return s[:32].rstrip("_")


def check_prefix(prefix: str) -> str:
    if not is_identifier(prefix) or prefix.startswith("_") or len(prefix) > 32:
        raise RxError(
            f"--prefix {prefix!r} is not usable as a C identifier prefix (letters, "
            "digits and single underscores, starting with a letter, at most 32 characters, "
            "not a C keyword)"
        )
    return prefix


def emit_c(
    module: Module,
    weights: Mapping[str, np.ndarray] | None = None,
    *,
    prefix: str = "model",
    source: str = "model.rx",
    entry: str = "main",
    emit_main: bool = False,
    types: ModuleTypes | None = None,
    constants: str = "inline",
    progress: Progress | None = None,
) -> CSources:
    """Emit ``<prefix>.c`` and ``<prefix>.h`` (and ``<prefix>_main.c``) for ``module``.

    ``constants="inline"`` writes every constant into ``<prefix>.c``; ``"file"`` writes the
    named weights into ``<prefix>_weights.bin`` (bytes) and an assembler stub
    ``<prefix>_weights.S`` that links it (GCC or Clang), leaving the C file the code (see
    docs/c.md); ``"auto"`` (``relaxc build -t c``'s default) is ``"file"`` when the named
    weights the module reads are more than :data:`INLINE_CONSTANTS_LIMIT` bytes, else
    ``"inline"``. ``progress(what, done, total)``, if given, is called as the work advances:
    ``what`` is ``"statements"`` (of the run function) or ``"constant bytes"``.
    """
    check_prefix(prefix)
    if constants not in CONSTANT_MODES:
        raise RxError(
            f"constants={constants!r}: choose one of {', '.join(CONSTANT_MODES)} (inline: in "
            "the C file; file: in a binary file linked by an assembler stub; auto: file above "
            f"{INLINE_CONSTANTS_LIMIT:,} bytes of weights)"
        )
    if constants == "auto":
        constants = constants_mode(module, weights or {})
    types = types if types is not None else verify_module(module)
    fn = module.get(entry)
    if fn is None:
        raise RxError(f"the module has no function @{entry} to compile")
    if fn.is_primitive:
        raise RxError(
            f"@{entry} is a primitive function; the C target compiles a runner that calls kernels"
        )
    if fn.attr("planned") is not True:
        raise RxError(
            f"the C target needs planned memory, but @{entry} was not planned; build with the c "
            f"pipeline (-p c, the default of --target c) or include ManifestAlloc, PlanWorkspace "
            f"and PlanMemory"
        )
    m = ModuleEmitter(module, types, weights or {}, prefix, constants, progress)
    runner = RunnerEmitter(m, fn)
    sig, run_def = runner.run()
    # Constants nothing reads (dead bindings) are left out: an unused static array is a warning.
    code = "\n".join(m.kernel_defs + m.prim_defs + m.packed_defs + [run_def])
    m.finish_constants(word_counts(code))
    info = ModelInfo(
        prefix,
        entry,
        runner.inputs,
        runner.outputs,
        runner.dims,
        m.buffers,
        sum(c[2] for c in m.constant_defs),
        m.uses_packed,
        fn.upper_bounds(),
        m.weights_file if constants == "file" else None,
        sum(int(c.array.nbytes) for c in m.file_constants),
    )
    files: dict[str, str | bytes] = {
        f"{prefix}.h": header_text(info, sig, runner.err_codes, source),
        f"{prefix}.c": model_text(m, info, run_def, runner.err_codes, source),
    }
    if constants == "file":
        files[f"{prefix}_weights.S"] = m.weights_asm(source)
        files[m.weights_file] = m.weights_bytes()
    if emit_main:
        files[f"{prefix}_main.c"] = main_text(info, runner.err_codes, source)
    return CSources(files, info)


__all__ = [
    "CONSTANT_MODES",
    "CSources",
    "INLINE_CONSTANTS_LIMIT",
    "ModelInfo",
    "check_prefix",
    "constants_mode",
    "default_prefix",
    "emit_c",
]

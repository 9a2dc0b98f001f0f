"""The module emitter: the pieces of ``<prefix>.c`` that the runner and its callees share.

:class:`ModuleEmitter` owns the C names of the whole file and collects, while the runner is
emitted, each constant once, each kernel-op instance once (its C from
:mod:`~relaxc.backend.c.kernels`), each primitive function used (emitted by
:class:`~relaxc.backend.c.primitive.PrimitiveEmitter`) and its packed wrapper, and the
static buffers of the plan. :mod:`~relaxc.backend.c.api` assembles the file from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Mapping

import numpy as np

from relaxc.ir.diagnostics import Loc, RxError
from relaxc.ir.nodes import Call, Function, Module, function_dims
from relaxc.ir.ops import REGISTRY
from relaxc.ir.ops.memory import literal_to_array
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import TensorType, type_to_str
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.vocab import CONST, kernel_io, kernel_scratch, lowered_outputs

from . import dtypes as T
from .helpers import HELPERS, Helpers
from .kernels import DimC, Spec, generate
from .model import StaticBuffer
from .names import Scope, comment
from .primitive import PrimitiveEmitter


@dataclass(frozen=True)
class Constant:
    """A constant the runner or a primitive function reads: a weight or a literal."""

    cname: str
    label: str
    type: TensorType
    array: np.ndarray
    in_file: bool  # in the weights file (file mode), not in the C file


class ModuleEmitter:
    """Collects the pieces of ``<prefix>.c`` while the runner and its callees are emitted."""

    def __init__(
        self,
        module: Module,
        types: ModuleTypes,
        weights: Mapping[str, np.ndarray],
        prefix: str,
        constants: str = "inline",
        progress: Callable[[str, int, int], None] | None = None,
    ):
        self.module = module
        self.types = types
        self.weights = weights
        self.prefix = prefix
        self.scope = Scope()
        self.helpers = Helpers(prefix)
        for h in HELPERS:
            self.scope.reserve(f"{prefix}_{h}")
        self.run_name = self.scope.reserve(f"{prefix}_run")
        self.run_body_name = self.scope.reserve(f"{prefix}_run_body")
        self.strerror_name = self.scope.reserve(f"{prefix}_strerror")
        self.unpack_name = self.scope.reserve(f"{prefix}_unpack")
        self.macros = Scope()
        self.kernels: dict[Spec, str] = {}
        self.kernel_scratch: dict[Spec, int] = {}
        self.kernel_defs: list[str] = []
        self.prims: dict[str, str] = {}  # IR function -> C function
        self.prim_defs: list[str] = []
        self.packed: dict[str, str] = {}  # IR function -> packed wrapper
        self.packed_defs: list[str] = []
        self.constants: dict[tuple, str] = {}
        self.constants_mode = constants
        self.progress = progress
        self.weights_file = f"{prefix}_weights.bin"
        self.constant_list: list[Constant] = []  # in the order first used
        self.constant_defs: list[tuple[str, str, int]] = []  # (C name, definition, bytes)
        self.file_constants: list[Constant] = []  # in the order of the weights file
        self.buffers: list[StaticBuffer] = []
        self.uses_packed = False

    # -- constants ------------------------------------------------------------------------
    def constant(self, fn: Function, name: str, call: Call, t: TensorType) -> str:
        try:
            bound = bind_args(REGISTRY.get(CONST), call.args, call.kwargs)  # type: ignore[arg-type]
        except OpError as e:
            raise RxError(str(e), call.loc) from None
        value = bound.attrs["value"]
        T.c_type(t.dtype, f"constant %{name}", call.loc)
        if isinstance(value, str):
            key: tuple = ("weight", value, t)
            if key in self.constants:
                return self.constants[key]
            arr = self.weights.get(value)
            if arr is None:
                raise RxError(
                    f"weight '{value}' was not provided (no .npz, or it lacks this array)", call.loc
                )
            shape = tuple(int(d) for d in t.shape) if t.is_static() else None
            if (
                shape is None
                or tuple(arr.shape) != shape
                or str(arr.dtype) != T.DTYPES[t.dtype].numpy
            ):
                raise RxError(
                    f"weight '{value}' is {arr.dtype}{tuple(arr.shape)}, but %{name} is "
                    f"{type_to_str(t)}",
                    call.loc,
                )
            label = value
        else:
            arr = literal_to_array(value, t.dtype)
            key = ("literal", id(call), fn.name, name)
            label = f"{fn.name} {name}"
            if not t.is_static():
                raise RxError(f"constant %{name} has a symbolic shape", call.loc)
            arr = arr.reshape(tuple(int(d) for d in t.shape))
        cname = self.scope.name(f"{self.prefix}_c_", label)
        # A weight with elements goes to the weights file in file mode; literals stay in C
        # (small, and the compiler may fold them).
        in_file = self.constants_mode == "file" and isinstance(value, str) and arr.size > 0
        self.constant_list.append(Constant(cname, label, t, arr, in_file))
        ref = cname if in_file else f"{cname}.v"
        self.constants[key] = ref
        return ref

    def finish_constants(self, used: Collection[str]) -> None:
        """The definitions of the constants whose C name is in ``used`` (those nothing reads
        are left out: an unused static array is a warning), in the order first used; in file
        mode, also the weights file and its assembler stub."""
        kept = [c for c in self.constant_list if c.cname in used]
        # The file: the arrays of larger elements first (stable), so each is aligned to its
        # element size without padding, and the file is exactly the weights' bytes.
        offsets: dict[str, int] = {}
        at = 0
        for c in sorted((c for c in kept if c.in_file), key=lambda c: -c.array.dtype.itemsize):
            offsets[c.cname] = at
            at += int(c.array.nbytes)
            self.file_constants.append(c)
        self.constant_defs = []
        total = sum(int(c.array.nbytes) for c in kept)
        done = 0
        for c in kept:
            if self.progress is not None:
                self.progress("constant bytes", done, total)
            done += int(c.array.nbytes)
            count = max(int(c.array.size), 1)
            ctype = T.c_type(c.type.dtype)
            head = f"/* {comment(c.label)}: {comment(type_to_str(c.type))}"
            if c.in_file:
                text = (
                    f"{head}, at byte {offsets[c.cname]} of {self.weights_file} */\n"
                    f"extern const {ctype} {c.cname}[{count}];"
                )
            else:
                # The bytes exactly, as words (the bit patterns), read through a union member
                # of the element type: exact for every dtype, no per-element decimal text.
                word, init = T.constant_words(c.array)
                text = (
                    f"{head} */\nstatic const union {{ {word} w[{count}]; {ctype} v[{count}]; "
                    f"}} {c.cname} = {{{init}}};"
                )
            self.constant_defs.append((c.cname, text, int(c.array.size) * T.nbytes(c.type.dtype)))
        if self.progress is not None:
            self.progress("constant bytes", total, total)

    def weights_bytes(self) -> bytes:
        """The weights file: each array of :attr:`file_constants` in C order, little-endian."""
        return b"".join(
            np.ascontiguousarray(c.array, dtype=c.array.dtype.newbyteorder("<")).tobytes()
            for c in self.file_constants
        )

    def weights_asm(self, source: str) -> str:
        """The assembler stub that links the weights file, one global (hidden) symbol per
        array, at the offsets :meth:`finish_constants` chose."""
        p = self.prefix
        macro = f"{p}_weight"
        nbytes = sum(int(c.array.nbytes) for c in self.file_constants)
        lines = [
            f"/* {p}_weights.S: links {self.weights_file} ({nbytes} bytes, little-endian) into "
            f"read-only data for {p}.c;",
            f" * generated by relaxc from {comment(source)}; do not edit. One symbol per array. "
            "GNU assembler syntax",
            f" * (GCC or Clang): cc -c {p}_weights.S -I FOLDER, FOLDER holding "
            f"{self.weights_file}. */",
            "#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__",
            f'#error "{self.weights_file} holds little-endian data"',
            "#endif",
            "#if defined(__APPLE__)",
            "#define SYM(x) _##x",
            f"        .macro {macro} name, offset, size",
            "        .globl \\name",
            "        .private_extern \\name",
            "\\name:",
            f'        .incbin "{self.weights_file}", \\offset, \\size',
            "        .endm",
            "        .const",
            "#else",
            "#define SYM(x) x",
            f"        .macro {macro} name, offset, size",
            "        .globl \\name",
            "        .hidden \\name",
            "        .type \\name, %object",
            "        .size \\name, \\size",
            "\\name:",
            f'        .incbin "{self.weights_file}", \\offset, \\size',
            "        .endm",
            "        .section .rodata",
            "#endif",
            "        .balign 64",
        ]
        at = 0
        for c in self.file_constants:
            lines.append(f"        {macro} SYM({c.cname}), {at}, {int(c.array.nbytes)}")
            at += int(c.array.nbytes)
        lines += [
            "#if defined(__ELF__)",
            '        .section .note.GNU-stack,"",%progbits',
            "#endif",
            "",
        ]
        return "\n".join(lines)

    # -- kernels --------------------------------------------------------------------------
    def kernel(self, spec: Spec, loc: Loc | None) -> tuple[str, int]:
        """The C name of the kernel of ``spec`` (emitted once) and the bytes of scratch it
        takes (0: it has no scratch parameter)."""
        name = self.kernels.get(spec)
        if name is None:
            name = self.scope.name(f"{self.prefix}_k{len(self.kernels)}_", spec.op)
            text, scratch = generate(spec, name, self.helpers, loc)
            self.kernel_scratch[spec] = scratch
            desc = (
                f"{spec.op}: "
                + ", ".join(type_to_str(t) for t in spec.ins)
                + " -> "
                + ", ".join(type_to_str(t) for t in spec.outs)
            )
            self.kernel_defs.append(f"/* {comment(desc, 200)} */\n{text}")
            self.kernels[spec] = name
        return name, self.kernel_scratch[spec]

    # -- primitive functions ----------------------------------------------------------------
    def primitive(self, name: str, loc: Loc | None) -> str:
        if name in self.prims:
            return self.prims[name]
        fn = self.module.get(name)
        if fn is None or not fn.is_primitive:
            raise RxError(f"@{name} is not a primitive function of the module", loc)
        cname = self.scope.name(f"{self.prefix}_f_", name)
        self.prims[name] = cname
        self.prim_defs.append(PrimitiveEmitter(self, fn, cname).build())
        return cname

    def packed_wrapper(self, name: str, loc: Loc | None) -> str:
        if name in self.packed:
            return self.packed[name]
        inner = self.primitive(name, loc)
        fn = self.module.get(name)
        assert fn is not None
        self.uses_packed = True
        cname = self.scope.name(f"{self.prefix}_fp_", name)
        self.packed[name] = cname
        self.packed_defs.append(self._packed_def(fn, inner, cname))
        return cname

    def _packed_def(self, fn: Function, inner: str, cname: str) -> str:
        scope = Scope(self.scope)
        ins, outs = kernel_io(fn)
        scratch_t = kernel_scratch(fn)
        outs = outs + ([scratch_t] if scratch_t is not None else [])  # written, like an output
        dims = function_dims(fn)
        dvars = {d: scope.name("d_", d) for d in dims}
        dimc = DimC(dvars, self.helpers)
        nbuf = len(ins) + len(outs)
        lines = [
            f"static int32_t {cname}(TVMValue *args, int32_t *type_codes, int32_t num_args, "
            f"TVMValue *out_ret_value, int32_t *out_ret_tcode, void *resource_handle)",
            "{",
        ]
        ptrs = [f"p{i}" for i in range(nbuf)]
        if dims:
            lines.append(f"    int64_t {', '.join(dvars[d] for d in dims)};")
        if ptrs:
            lines.append(f"    void {', '.join('*' + q for q in ptrs)};")
        lines += [
            "    (void)out_ret_value;",
            "    (void)resource_handle;",
            "    *out_ret_tcode = kTVMNullptr;",
            f"    if (num_args != {nbuf + len(dims)}) return -1;",
        ]
        for j, d in enumerate(dims):
            k = nbuf + j
            lines.append(f"    if (type_codes[{k}] != kTVMArgInt) return -1;")
            lines.append(f"    {dvars[d]} = args[{k}].v_int64;")
        for i, t in enumerate(ins + outs):
            code, bits = T.dl_type(t.dtype)
            if t.shape:
                shape = ", ".join(dimc(d) for d in t.shape)
                lines.append(f"    {{ const int64_t shape[{len(t.shape)}] = {{{shape}}};")
                lines.append(
                    f"      p{i} = {self.unpack_name}(&args[{i}], type_codes[{i}], {len(t.shape)}, "
                    f"{code}, {bits}, shape); }}"
                )
            else:
                lines.append(
                    f"    p{i} = {self.unpack_name}(&args[{i}], type_codes[{i}], 0, "
                    f"{code}, {bits}, NULL);"
                )
            lines.append(f"    if (p{i} == NULL) return -1;")
        # Inputs are read-only, except a lowered function's workspace (its last input).
        scratch = (
            len(ins) - 1 if lowered_outputs(fn) is not None and fn.attr("workspace", 0) != 0 else -1
        )
        call_args = [
            f"({'const ' if i < len(ins) and i != scratch else ''}{T.c_type(t.dtype)} *)p{i}"
            for i, t in enumerate(ins + outs)
        ]
        if scratch_t is not None:
            call_args[-1] = f"(unsigned char *)p{len(ins) + len(outs) - 1}"
        call_args += [dvars[d] for d in dims]
        lines.append(f"    {inner}({', '.join(call_args)});")
        lines += ["    return 0;", "}"]
        return f"/* @{comment(fn.name)}, called packed */\n" + "\n".join(lines)

    # -- static memory --------------------------------------------------------------------
    def static_buffer(self, ir_name: str, nbytes: int, align: int, arena: bool) -> str:
        cname = self.scope.name(f"{self.prefix}_" if arena else f"{self.prefix}_buf_", ir_name)
        self.buffers.append(StaticBuffer(cname, ir_name, nbytes, align, arena))
        return cname

    def is_arena(self, cname: str) -> bool:
        """``cname`` is the C name of an arena (not of another static allocation)."""
        return any(b.cname == cname and b.arena for b in self.buffers)


__all__ = ["ModuleEmitter"]

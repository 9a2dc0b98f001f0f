"""The ``.rxb`` container: constants of the format, and bounds-checked byte writing/reading.

Layout (every integer little-endian)::

    header   magic        8 bytes  b"\\x89RXB\\r\\n\\x1a\\n"
             version      u32      FORMAT_VERSION
             flags        u32      0 (reserved)
             length       u64      bytes of payload that follow the header
             sha256       32 bytes SHA-256 of the payload
    payload  four sections, in this order, each  tag (4 ASCII bytes)  u64 length  body
             STRS  string table     u32 count, then (u32 length, UTF-8 bytes) per string
             CNST  constant pool    u32 count, then per constant:
                                    u8 kind (0 named weight, 1 inline literal, 2 named
                                    weight whose elements are all one value: a splat),
                                    u32 name, u8 dtype, u32 ndim, u64 dims[ndim], u64 nbytes,
                                    raw little-endian C-order bytes[nbytes] (a splat: the
                                    one element, nbytes its size)
             FUNC  function table   u32 count, then per function:
                                    u32 name, u32 nattrs, (u32 key, value)[nattrs],
                                    u32 nregs, u32 register names[nregs],
                                    u32 nparams (registers 0..nparams-1), type[nparams],
                                    return type, u64 code offset, u64 code length, u32 ninstr
             CODE  instructions     the functions' instruction streams (see OPCODES)

Function attributes are stored as they are in the IR, whatever their key: an imported
model's ONNX input and output names (``onnx_inputs``/``onnx_outputs``,
:mod:`relaxc.ir.io_names`) travel in FUNC like ``upper_bounds`` does, so they need no
section of their own; a file without them loads as before.

Strings are referred to by index (u32). A *value* (attribute or literal argument) is a
tagged tree (``V_*``); a *type* is a tagged tree (``T_*``) whose dims are values. Nothing
in a file is ever executed except the instructions listed in :data:`OPCODES`; nothing is
unpickled.

The :class:`Reader` checks every read against the bytes that remain and every count
against the bytes its items need at the least, *before* allocating anything, so a
declared size of 2**60 is refused without trying to allocate it.
"""

from __future__ import annotations

import struct
from typing import Callable

from relaxc.ir import vocab
from relaxc.ir.signatures import RXB_MAGIC

MAGIC = RXB_MAGIC
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sIIQ32s")
HEADER_SIZE = HEADER.size  # 56
SECTIONS = (b"STRS", b"CNST", b"FUNC", b"CODE")
CONST_WEIGHT, CONST_LITERAL, CONST_SPLAT = 0, 1, 2
"""Constant kinds of the constant pool."""
SECTION_HEAD = 12  # tag + u64 length

NONE_REG = 0xFFFFFFFF
"""The ``dst`` of an instruction whose result is not bound (an expression statement)."""

MAX_DEPTH = 48
"""Deepest value/type nesting the loader accepts (real programs stay far below)."""

# Dtype codes: the position in this tuple. Never reorder (files depend on it).
# New dtypes are appended (a file of an older relaxc reads the same).
DTYPE_CODES = (
    "bool",
    "i8",
    "i16",
    "i32",
    "i64",
    "u8",
    "u16",
    "u32",
    "f16",
    "bf16",
    "f32",
    "f64",
    "u64",
    "f8e4m3fn",
    "f8e4m3fnuz",
    "f8e5m2",
    "f8e5m2fnuz",
    "f8e8m0",
    "f4e2m1",
    "i4",
    "u4",
    "i2",
    "u2",
)

# Value tags.
(
    V_FALSE,
    V_TRUE,
    V_INT,
    V_FLOAT,
    V_STR,
    V_TUPLE,
    V_LIST,
    V_DICT,
    V_DTYPE,
    V_SYM,
    V_BINOP,
    V_DIMCALL,
) = range(12)
# Type tags.
T_TENSOR, T_TUPLE, T_STORAGE, T_OBJECT = range(4)
# Operand tags.
O_REG, O_VALUE = 0, 1

# Opcodes. The "call" group shares one encoding:
#   dst u32, annotation, op u32 (string), nargs u32, operand[nargs], nkw u32, (u32 key, value)[nkw]
ALLOC_STORAGE = 1  # memory.alloc_storage: a block from the pooled allocator (or the arena)
ALLOC_TENSOR = 2  # memory.alloc_tensor: a view of a storage at an offset
KERNEL = 3  # a kernel op returning a fresh result (un-manifested programs, primitive bodies)
VIEW = 4  # reshape/flatten/squeeze/expand_dims: a view of input 0
PACKED = 5  # call_packed and the other runtime ops: a runtime builtin by name
KILL_TENSOR = 6  # memory.kill_tensor
KILL_STORAGE = 7  # memory.kill_storage
KILL_OBJECT = 8  # vm.kill_object
INVOKE = 9  # op u32, nargs, operand[nargs], nkw, kwargs, nouts u32, reg[nouts]
INVOKE_FUNC = 10  # func u32, nargs u32, reg[nargs], nouts u32, reg[nouts]
CALL_FUNC = 11  # dst u32, annotation, func u32, nargs u32, reg[nargs]
CONST = 12  # dst u32, annotation, const u32
TUPLE = 13  # dst u32, annotation, n u32, reg[n]
PROJECT = 14  # dst u32, annotation, src reg, index u32
MOVE = 15  # dst u32, annotation, src reg
RET = 16  # kind u8 (0: one register, 1: a tuple), n u32, reg[n]

OPCODES = {
    ALLOC_STORAGE: "alloc_storage",
    ALLOC_TENSOR: "alloc_tensor",
    KERNEL: "kernel",
    VIEW: "view",
    PACKED: "call_packed",
    KILL_TENSOR: "kill_tensor",
    KILL_STORAGE: "kill_storage",
    KILL_OBJECT: "kill_object",
    INVOKE: "invoke",
    INVOKE_FUNC: "invoke_func",
    CALL_FUNC: "call",
    CONST: "const",
    TUPLE: "tuple",
    PROJECT: "project",
    MOVE: "move",
    RET: "ret",
}
CALL_GROUP = frozenset(
    {ALLOC_STORAGE, ALLOC_TENSOR, KERNEL, VIEW, PACKED, KILL_TENSOR, KILL_STORAGE, KILL_OBJECT}
)
FIXED_OPS = {
    ALLOC_STORAGE: vocab.ALLOC_STORAGE,
    ALLOC_TENSOR: vocab.ALLOC_TENSOR,
    KILL_TENSOR: vocab.KILL_TENSOR,
    KILL_STORAGE: vocab.KILL_STORAGE,
    KILL_OBJECT: vocab.KILL_OBJECT,
}
"""Opcodes whose op name is fixed (the loader checks the name agrees)."""
CATEGORY_OPS = {KERNEL: ("kernel",), VIEW: ("view",), PACKED: ("runtime",), INVOKE: ("kernel",)}
"""Opcodes that name a registry op of these categories."""


class FormatError(Exception):
    """What is wrong with a file; the loader turns it into one RxError sentence."""


class Writer:
    """Appends little-endian fields to a bytearray."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def u8(self, v: int) -> None:
        self.buf += struct.pack("<B", v)

    def u32(self, v: int) -> None:
        self.buf += struct.pack("<I", v)

    def u64(self, v: int) -> None:
        self.buf += struct.pack("<Q", v)

    def i64(self, v: int) -> None:
        self.buf += struct.pack("<q", v)

    def f64(self, v: float) -> None:
        self.buf += struct.pack("<d", v)

    def raw(self, b: bytes) -> None:
        self.buf += b

    def __len__(self) -> int:
        return len(self.buf)


_U8 = struct.Struct("<B")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")


class Reader:
    """Reads fields from ``data[pos:end]``, refusing to read or count past ``end``.

    ``where`` is a callable giving the current context for messages ("function @main,
    instruction 3"). ``trace``, when a list, receives ``(offset, size, kind)`` for each
    field read, so tests can find and corrupt particular fields.
    """

    def __init__(
        self,
        data: bytes,
        pos: int,
        end: int,
        where: Callable[[], str],
        trace: list | None = None,
        base: int = 0,
    ):
        self.data = data
        self.pos = pos
        self.end = end
        self.where = where
        self.trace = trace
        self.base = base  # offset of data[0] in the file, for the trace

    def fail(self, msg: str) -> FormatError:
        ctx = self.where()
        return FormatError(f"{ctx}: {msg}" if ctx else msg)

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int, what: str, kind: str) -> int:
        if n > self.end - self.pos:
            raise self.fail(
                f"truncated: {what} needs {n} byte(s), {max(self.end - self.pos, 0)} remain"
            )
        p = self.pos
        if self.trace is not None:
            self.trace.append((self.base + p, n, kind))
        self.pos = p + n
        return p

    def u8(self, what: str, kind: str = "u8") -> int:
        return _U8.unpack_from(self.data, self._take(1, what, kind))[0]

    def u32(self, what: str, kind: str = "u32") -> int:
        return _U32.unpack_from(self.data, self._take(4, what, kind))[0]

    def u64(self, what: str, kind: str = "u64") -> int:
        return _U64.unpack_from(self.data, self._take(8, what, kind))[0]

    def i64(self, what: str) -> int:
        return _I64.unpack_from(self.data, self._take(8, what, "i64"))[0]

    def f64(self, what: str) -> float:
        return _F64.unpack_from(self.data, self._take(8, what, "f64"))[0]

    def raw(self, n: int, what: str) -> bytes:
        p = self._take(n, what, "bytes")
        return bytes(self.data[p : p + n])

    def count(self, what: str, min_item_bytes: int, limit: int | None = None) -> int:
        """A u32 count of items needing at least ``min_item_bytes`` each, checked against
        the remaining bytes (and ``limit``) before anyone allocates for them."""
        n = self.u32(what, "count")
        if limit is not None and n > limit:
            raise self.fail(f"{what} is {n:,}, more than the {limit:,} allowed")
        if n * min_item_bytes > self.end - self.pos:
            raise self.fail(
                f"{what} is {n:,}, but only {self.end - self.pos:,} byte(s) remain "
                f"(at least {n * min_item_bytes:,} needed)"
            )
        return n

    def index(self, what: str, limit: int, kind: str, noun: str) -> int:
        """A u32 index that must be below ``limit``."""
        i = self.u32(what, kind)
        if i >= limit:
            raise self.fail(f"{what} {i:,} is out of range ({noun})")
        return i

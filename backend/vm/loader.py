"""Loading an ``.rxb`` file: validate everything, then hand the VM a checked program.

Order of checks (the first failure is one RxError sentence naming the file):

1. the header: size, magic bytes, format version, reserved flags, declared payload length
   against the actual file size, then the SHA-256 checksum of the payload;
2. the sections: the four tags in order, each length within the payload, nothing after;
3. every field of every section, read through a bounds-checked :class:`Reader`: counts
   against the bytes their items need, sizes against the bytes that remain (before any
   allocation), string/register/constant/function indices against their tables, dtype
   codes, value and type trees (nesting depth limited), opcodes and their op names;
4. structure: every register bound exactly once (parameters never), one ``ret`` that ends
   each function, named constants matching their declared type;
5. the program rebuilt as IR from the instructions (:mod:`.decompile`) is verified by the IR
   verifier (types, attributes, kills, no recursion), so the VM only ever runs what the
   language allows.

The result is an :class:`~relaxc.backend.vm.program.Executable` (the program model and the
format's limits live in :mod:`.program`). Nothing is executed while loading, and nothing is
unpickled.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

from relaxc.backend.inputs import MAX_RUNTIME_BYTES
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import DictLit, DType, ListLit, Module
from relaxc.ir.ops import REGISTRY
from relaxc.ir.types import (
    DTYPES,
    OBJECT,
    STORAGE,
    TensorType,
    TupleType,
    Type,
    numpy_dtype,
    type_to_str,
)
from relaxc.ir.verifier import verify_module
from relaxc.ir.vocab import CONST, is_dim

from . import format as F
from .decompile import decompile_function
from .program import (
    MAX_DIM,
    MAX_DIM_TERMS,
    MAX_INLINE_ELEMENTS,
    MAX_NDIM,
    Constant,
    Executable,
    Instr,
    Reg,
    TooComplex,
    VMFunction,
    shape_terms,
)

# ---------------------------------------------------------------------------------------
# Decoding


class _Decoder:
    def __init__(self, data: bytes, trace: list | None):
        self.data = data
        self.trace = trace
        self.strings: list[str] = []
        self.context = ""

    def where(self) -> str:
        return self.context

    def reader(self, start: int, end: int) -> F.Reader:
        return F.Reader(self.data, start, end, self.where, self.trace)

    # -- values and types ------------------------------------------------------------------
    def string(self, r: F.Reader, what: str) -> str:
        return self.strings[
            r.index(what, len(self.strings), "str", f"the string table has {len(self.strings)}")
        ]

    def value(self, r: F.Reader, depth: int = 0) -> Any:
        if depth > F.MAX_DEPTH:
            raise r.fail(f"a value nests deeper than {F.MAX_DEPTH} levels")
        tag = r.u8("value tag", "tag")
        if tag == F.V_FALSE:
            return False
        if tag == F.V_TRUE:
            return True
        if tag == F.V_INT:
            return r.i64("integer")
        if tag == F.V_FLOAT:
            return r.f64("number")
        if tag == F.V_STR:
            return self.string(r, "string")
        if tag in (F.V_TUPLE, F.V_LIST):
            n = r.count("item count", 1)
            items = tuple(self.value(r, depth + 1) for _ in range(n))
            if tag == F.V_TUPLE and items and all(is_dim(x) for x in items):
                self.check_shape(r, items)
            return items if tag == F.V_TUPLE else ListLit(items)
        if tag == F.V_DICT:
            n = r.count("entry count", 5)
            return DictLit(
                tuple((self.string(r, "key"), self.value(r, depth + 1)) for _ in range(n))
            )
        if tag == F.V_DTYPE:
            return DType(self.dtype(r))
        if tag in (F.V_SYM, F.V_BINOP, F.V_DIMCALL):
            d = self.dim_after_tag(r, tag, depth)
            self.check_shape(r, (d,))
            return d
        raise r.fail(f"unknown value tag {tag}")

    def check_shape(self, r: F.Reader, dims: tuple) -> None:
        """Refuse dims (or a shape's product) too complex to put in canonical form."""
        try:
            shape_terms(dims)
        except TooComplex:
            raise r.fail(
                f"a dimension expression (or a shape's product) expands to more than "
                f"{MAX_DIM_TERMS:,} terms"
            ) from None

    def dim(self, r: F.Reader, depth: int) -> D.Dim:
        if depth > F.MAX_DEPTH:
            raise r.fail(f"a dimension nests deeper than {F.MAX_DEPTH} levels")
        tag = r.u8("dimension tag", "tag")
        if tag == F.V_INT:
            return r.i64("dimension")
        return self.dim_after_tag(r, tag, depth)

    def dim_after_tag(self, r: F.Reader, tag: int, depth: int) -> D.Dim:
        if tag == F.V_SYM:
            name = self.string(r, "dimension name")
            if not name:
                raise r.fail("a symbolic dimension has an empty name")
            return D.Sym(name)
        if tag == F.V_BINOP:
            code = r.u8("dimension operator", "code")
            if code >= len(D.BIN_OPS):
                raise r.fail(f"unknown dimension operator {code}")
            return D.BinOp(D.BIN_OPS[code], self.dim(r, depth + 1), self.dim(r, depth + 1))
        if tag == F.V_DIMCALL:
            code = r.u8("dimension function", "code")
            if code >= len(D.DIM_FUNCS):
                raise r.fail(f"unknown dimension function {code}")
            n = r.count("dimension argument count", 1)
            if n == 0:
                raise r.fail(f"{D.DIM_FUNCS[code]}() without arguments")
            return D.DimCall(D.DIM_FUNCS[code], tuple(self.dim(r, depth + 1) for _ in range(n)))
        raise r.fail(f"tag {tag} is not a dimension")

    def dtype(self, r: F.Reader) -> str:
        code = r.u8("dtype", "dtype")
        if code >= len(F.DTYPE_CODES):
            raise r.fail(f"unknown dtype code {code}")
        return F.DTYPE_CODES[code]

    def type(self, r: F.Reader, depth: int = 0) -> Type:
        if depth > F.MAX_DEPTH:
            raise r.fail(f"a type nests deeper than {F.MAX_DEPTH} levels")
        tag = r.u8("type tag", "tag")
        if tag == F.T_TENSOR:
            dtype = self.dtype(r)
            ndim = r.count("rank", 1, MAX_NDIM)
            shape = tuple(self.dim(r, depth + 1) for _ in range(ndim))
            self.check_shape(r, shape)
            return TensorType(shape, dtype)
        if tag == F.T_TUPLE:
            n = r.count("tuple size", 1)
            return TupleType(tuple(self.type(r, depth + 1) for _ in range(n)))
        if tag == F.T_STORAGE:
            return STORAGE
        if tag == F.T_OBJECT:
            return OBJECT
        raise r.fail(f"unknown type tag {tag}")

    def annotation(self, r: F.Reader) -> Type | None:
        flag = r.u8("annotation flag", "flag")
        if flag == 0:
            return None
        if flag == 1:
            return self.type(r)
        raise r.fail(f"annotation flag {flag} is neither 0 nor 1")

    # -- sections --------------------------------------------------------------------------
    def strings_section(self, r: F.Reader) -> None:
        self.context = "string table"
        n = r.count("string count", 4)
        out = []
        for i in range(n):
            length = r.u32("string length", "size")
            raw = r.raw(length, f"string #{i}")
            try:
                out.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise r.fail(f"string #{i} is not UTF-8") from None
        self.strings = out

    def constants_section(self, r: F.Reader) -> list[Constant]:
        n = r.count("constant count", 18)
        out: list[Constant] = []
        names: set[str] = set()
        for i in range(n):
            self.context = f"constant #{i}"
            kind = r.u8("kind", "flag")
            if kind not in (F.CONST_WEIGHT, F.CONST_LITERAL, F.CONST_SPLAT):
                raise r.fail(f"kind {kind} is neither 0 (weight), 1 (literal) nor 2 (splat)")
            name = self.string(r, "name")
            if kind != F.CONST_LITERAL:
                if not name:
                    raise r.fail("a named weight has an empty name")
                if name in names:
                    raise r.fail(f"the weight name '{name}' appears twice")
                names.add(name)
            elif name:
                raise r.fail("an inline literal has a name")
            dtype = self.dtype(r)
            if DTYPES[dtype].numpy is None:
                raise r.fail(f"dtype {dtype} is storage-only and cannot hold a constant")
            ndim = r.count("rank", 8, MAX_NDIM)
            shape = tuple(r.u64("dimension", "size") for _ in range(ndim))
            if any(d > MAX_DIM for d in shape):
                raise r.fail(f"dimension {max(shape):,} is larger than {MAX_DIM:,}")
            nbytes = r.u64("byte size", "size")
            dt = numpy_dtype(dtype)
            splat = kind == F.CONST_SPLAT
            expect = dt.itemsize if splat else math.prod(shape) * dt.itemsize
            if splat and math.prod(shape) < 2:
                raise r.fail(f"a splat of {math.prod(shape)} element(s) (a splat has two or more)")
            if splat and nbytes != expect:
                raise r.fail(f"a splat declares {nbytes:,} bytes, but one {dtype} takes {expect}")
            if splat and math.prod(shape) * dt.itemsize > MAX_RUNTIME_BYTES:
                raise r.fail(
                    f"a splat of {math.prod(shape) * dt.itemsize:,} bytes is larger than the "
                    f"{MAX_RUNTIME_BYTES:,}-byte limit of a run"
                )
            if nbytes != expect:
                raise r.fail(f"declares {nbytes:,} bytes, but {dtype}{shape} takes {expect:,}")
            if nbytes > r.remaining():
                raise r.fail(f"declares {nbytes:,} bytes, but only {r.remaining():,} remain")
            if kind == 1 and math.prod(shape) > MAX_INLINE_ELEMENTS:
                raise r.fail(
                    f"an inline literal of {math.prod(shape):,} elements is larger than the "
                    f"{MAX_INLINE_ELEMENTS:,} allowed"
                )
            start = r._take(nbytes, "constant data", "bytes")
            if splat:
                one = np.frombuffer(self.data, dtype=dt.newbyteorder("<"), count=1, offset=start)
                arr = np.full(shape, one[0], dtype=dt)
            elif nbytes:
                raw = np.frombuffer(
                    self.data, dtype=dt.newbyteorder("<"), count=math.prod(shape), offset=start
                )
                arr = np.array(
                    raw.reshape(shape), dtype=dt, order="C"
                )  # native order, aligned, owned
            else:
                arr = np.zeros(shape, dtype=dt)
            arr.flags.writeable = False
            out.append(Constant(name, kind == 1, arr))
        return out

    def functions_section(self, r: F.Reader, code_len: int) -> list[VMFunction]:
        self.context = "function table"
        n = r.count("function count", 37)
        out = []
        expected_offset = 0
        for i in range(n):
            self.context = f"function #{i}"
            name = self.string(r, "function name")
            self.context = f"function @{name}"
            nattrs = r.count("attribute count", 5)
            attrs = tuple((self.string(r, "attribute name"), self.value(r)) for _ in range(nattrs))
            nregs = r.count("register count", 4)
            reg_names = tuple(self.string(r, "register name") for _ in range(nregs))
            nparams = r.count("parameter count", 1)
            if nparams > nregs:
                raise r.fail(f"{nparams} parameters but only {nregs} registers")
            params = tuple(self.type(r) for _ in range(nparams))
            ret = self.type(r)
            offset = r.u64("code offset", "size")
            length = r.u64("code length", "size")
            if offset != expected_offset or length > code_len - offset:
                raise r.fail(
                    f"its code [{offset:,}, {offset + length:,}) does not follow the previous "
                    f"function's within the {code_len:,}-byte code section"
                )
            expected_offset = offset + length
            ninstr = r.u32("instruction count", "count")
            if ninstr > length or ninstr == 0:
                raise r.fail(f"{ninstr:,} instructions cannot fill {length:,} bytes of code")
            out.append(
                VMFunction(i, name, attrs, reg_names, params, ret, (), offset, length, ninstr)
            )
        if expected_offset != code_len:
            self.context = "function table"
            raise r.fail(
                f"the functions' code covers {expected_offset:,} of the {code_len:,} bytes of "
                "the code section"
            )
        return out

    def code(self, fn: VMFunction, code_start: int, nfuncs: int, nconsts: int) -> None:
        r = self.reader(code_start + fn.code_offset, code_start + fn.code_offset + fn.code_length)
        instrs = []
        nregs = fn.nregs
        written: dict[int, int] = {}
        for pc in range(fn.ninstr):
            self.context = f"function @{fn.name}, instruction {pc}"
            ins = self.instruction(r, nregs, nfuncs, nconsts)
            if ins.dst is not None:
                if ins.dst < fn.nparams:
                    raise r.fail(f"it writes register {ins.dst}, a parameter")
                if ins.dst in written:
                    raise r.fail(
                        f"register {ins.dst} is already written by instruction {written[ins.dst]}"
                    )
                written[ins.dst] = pc
            if (ins.opcode == F.RET) != (pc == fn.ninstr - 1):
                raise r.fail(
                    "a function must end with exactly one ret"
                    if ins.opcode == F.RET
                    else "the last instruction is not ret"
                )
            instrs.append(ins)
        self.context = f"function @{fn.name}"
        if r.remaining():
            raise r.fail(f"{r.remaining():,} byte(s) of code after its last instruction")
        missing = [i for i in range(fn.nparams, nregs) if i not in written]
        if missing:
            raise r.fail(f"register {missing[0]} is never written")
        fn.instrs = tuple(instrs)

    def reg(self, r: F.Reader, nregs: int) -> int:
        return r.index("register", nregs, "reg", f"the function has {nregs} registers")

    def regs(self, r: F.Reader, nregs: int, what: str) -> tuple[int, ...]:
        n = r.count(what, 4)
        return tuple(self.reg(r, nregs) for _ in range(n))

    def operands(self, r: F.Reader, nregs: int) -> tuple:
        n = r.count("argument count", 2)
        out = []
        for _ in range(n):
            tag = r.u8("operand tag", "tag")
            if tag == F.O_REG:
                out.append(Reg(self.reg(r, nregs)))
            elif tag == F.O_VALUE:
                out.append(self.value(r))
            else:
                raise r.fail(f"unknown operand tag {tag}")
        return tuple(out)

    def kwargs(self, r: F.Reader) -> tuple:
        n = r.count("keyword count", 5)
        return tuple((self.string(r, "keyword"), self.value(r)) for _ in range(n))

    def op_name(self, r: F.Reader, opcode: int) -> str:
        name = self.string(r, "op name")
        fixed = F.FIXED_OPS.get(opcode)
        if fixed is not None:
            if name != fixed:
                raise r.fail(f"{F.OPCODES[opcode]} names op '{name}'")
            return name
        op = REGISTRY.get(name)
        if op is None:
            raise r.fail(f"unknown op '{name}'")
        if op.category not in F.CATEGORY_OPS[opcode] or name == CONST:
            raise r.fail(f"{F.OPCODES[opcode]} cannot run op '{name}' (a {op.category} op)")
        return name

    def dst(self, r: F.Reader, nregs: int) -> int | None:
        d = r.u32("destination register", "reg")
        if d == F.NONE_REG:
            return None
        if d >= nregs:
            raise r.fail(
                f"destination register {d:,} is out of range (the function has {nregs} registers)"
            )
        return d

    def instruction(self, r: F.Reader, nregs: int, nfuncs: int, nconsts: int) -> Instr:
        opcode = r.u8("opcode", "opcode")
        if opcode not in F.OPCODES:
            raise r.fail(f"unknown opcode {opcode}")
        if opcode in F.CALL_GROUP:
            dst = self.dst(r, nregs)
            ann = self.annotation(r)
            op = self.op_name(r, opcode)
            args = self.operands(r, nregs)
            return Instr(opcode, dst, ann, op, args, self.kwargs(r))
        if opcode == F.INVOKE:
            op = self.op_name(r, opcode)
            args = self.operands(r, nregs)
            kwargs = self.kwargs(r)
            return Instr(
                opcode, op=op, args=args, kwargs=kwargs, outs=self.regs(r, nregs, "output count")
            )
        if opcode == F.INVOKE_FUNC:
            func = r.index("function", nfuncs, "func", f"the program has {nfuncs} functions")
            args = self.regs(r, nregs, "argument count")
            return Instr(opcode, func=func, regs=args, outs=self.regs(r, nregs, "output count"))
        if opcode == F.RET:
            kind = r.u8("return kind", "flag")
            if kind not in (0, 1):
                raise r.fail(f"return kind {kind} is neither 0 nor 1")
            regs = self.regs(r, nregs, "return count")
            if kind == 0 and len(regs) != 1:
                raise r.fail(f"a single return names {len(regs)} registers")
            return Instr(opcode, regs=regs, ret_tuple=kind == 1)
        dst = self.dst(r, nregs)
        ann = self.annotation(r)
        if opcode == F.CALL_FUNC:
            func = r.index("function", nfuncs, "func", f"the program has {nfuncs} functions")
            return Instr(opcode, dst, ann, func=func, regs=self.regs(r, nregs, "argument count"))
        if opcode == F.CONST:
            return Instr(
                opcode,
                dst,
                ann,
                const=r.index("constant", nconsts, "const", f"the constant pool has {nconsts}"),
            )
        if opcode == F.TUPLE:
            return Instr(opcode, dst, ann, regs=self.regs(r, nregs, "field count"))
        if opcode == F.PROJECT:
            src = self.reg(r, nregs)
            return Instr(opcode, dst, ann, src=src, index=r.u32("field index", "u32"))
        assert opcode == F.MOVE
        return Instr(opcode, dst, ann, src=self.reg(r, nregs))


def _check_constants(fn: VMFunction, constants: list[Constant]) -> None:
    for pc, ins in enumerate(fn.instrs):
        if ins.opcode != F.CONST:
            continue
        c = constants[ins.const]
        if c.inline:
            continue
        t = ins.ann
        want = f"{c.dtype}{tuple(c.array.shape)}"
        if not (
            isinstance(t, TensorType) and t.dtype == c.dtype and t.shape == tuple(c.array.shape)
        ):
            declared = type_to_str(t) if t is not None else "no type"
            raise F.FormatError(
                f"function @{fn.name}, instruction {pc}: weight '{c.name}' is {want}, "
                f"but the instruction declares {declared}"
            )


# ---------------------------------------------------------------------------------------


def load_bytes(data: bytes, name: str = "the bytecode", *, trace: list | None = None) -> Executable:
    """Validate and decode ``data`` (the bytes of an .rxb file); RxError names ``name``."""
    data = bytes(data)
    if len(data) < len(F.MAGIC) or data[: len(F.MAGIC)] != F.MAGIC:
        raise RxError(
            f"{name} is not a relaxc bytecode file (it does not start with the .rxb magic bytes)"
        )
    if len(data) < F.HEADER_SIZE:
        raise RxError(
            f"{name} is truncated: its header needs {F.HEADER_SIZE} bytes, the file has {len(data)}"
        )
    _, version, flags, length, digest = F.HEADER.unpack_from(data, 0)
    if version != F.FORMAT_VERSION:
        raise RxError(
            f"{name} uses bytecode format version {version}, but this relaxc reads version "
            f"{F.FORMAT_VERSION} only; rebuild it with relaxc build"
        )
    if flags != 0:
        raise RxError(f"{name} sets header flags 0x{flags:x} that this relaxc does not know")
    actual = len(data) - F.HEADER_SIZE
    if length != actual:
        what = "truncated" if actual < length else "longer than its header says"
        raise RxError(
            f"{name} is {what}: the header declares {length:,} bytes of contents, the "
            f"file has {actual:,}"
        )
    if hashlib.sha256(memoryview(data)[F.HEADER_SIZE :]).digest() != digest:
        raise RxError(
            f"{name} is corrupted: the SHA-256 checksum of its contents does not match its header"
        )
    try:
        return _decode(data, trace)
    except F.FormatError as e:
        raise RxError(f"{name} is not a valid relaxc bytecode file: {e}") from None


def _decode(data: bytes, trace: list | None) -> Executable:
    dec = _Decoder(data, trace)
    top = dec.reader(F.HEADER_SIZE, len(data))
    bodies = []
    for tag in F.SECTIONS:
        dec.context = f"section {tag.decode()}"
        got = top.raw(4, "section tag")
        if got != tag:
            raise top.fail(f"expected section {tag.decode()} here, found {got!r}")
        n = top.u64("section length", "size")
        if n > top.remaining():
            raise top.fail(f"declares {n:,} bytes, but only {top.remaining():,} remain")
        bodies.append((top.pos, top.pos + n))
        top.pos += n
    if top.remaining():
        dec.context = ""
        raise top.fail(f"{top.remaining():,} byte(s) after the last section")

    def section(i: int, name: str) -> F.Reader:
        start, end = bodies[i]
        return dec.reader(start, end)

    def finish(r: F.Reader, what: str) -> None:
        if r.remaining():
            dec.context = ""
            raise r.fail(f"{r.remaining():,} unused byte(s) at the end of the {what}")

    r = section(0, "STRS")
    dec.strings_section(r)
    finish(r, "string table")
    r = section(1, "CNST")
    dec.context = "constant pool"
    constants = dec.constants_section(r)
    finish(r, "constant pool")
    code_start, code_end = bodies[3]
    r = section(2, "FUNC")
    functions = dec.functions_section(r, code_end - code_start)
    finish(r, "function table")
    for fn in functions:
        dec.code(fn, code_start, len(functions), len(constants))
    for fn in functions:
        _check_constants(fn, constants)
    for fn in functions:
        fn.ir = decompile_function(fn, functions, constants)
    module = Module(tuple(fn.ir for fn in functions))  # type: ignore[misc]
    try:
        types = verify_module(module)
    except RxError as e:
        raise F.FormatError(f"its program does not verify: {e.message}") from None
    except RecursionError:
        raise F.FormatError("its program nests too deeply to verify") from None
    exe = Executable(
        functions,
        constants,
        dec.strings,
        module,
        types,
        len(data),
        hashlib.sha256(data[F.HEADER_SIZE :]).hexdigest(),
    )
    exe.by_name = {f.name: f for f in functions}
    return exe


def load_file(path: Any) -> Executable:
    """Read and load an .rxb file; every problem is an RxError naming the file."""
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        raise RxError(f"file {p} does not exist")
    if p.is_dir():
        raise RxError(f"{p} is a directory, not an .rxb file")
    try:
        data = p.read_bytes() if p.is_file() else _read_stream(p)
    except OSError as e:
        raise RxError(f"cannot read {p}: {e.strerror or e}") from None
    return load_bytes(data, str(p))


def _read_stream(p: Any) -> bytes:
    """A device or a pipe: the header, then no more than it declares (plus one byte, so
    that a longer stream is still refused); ``/dev/zero`` is not read forever."""
    with open(p, "rb") as f:
        head = f.read(F.HEADER_SIZE)
        if len(head) < F.HEADER_SIZE or head[: len(F.MAGIC)] != F.MAGIC:
            return head
        want = F.HEADER.unpack_from(head, 0)[3] + 1
        chunks = [head]
        while want > 0:
            chunk = f.read(min(want, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            want -= len(chunk)
        return b"".join(chunks)

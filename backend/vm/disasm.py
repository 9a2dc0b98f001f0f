"""A readable listing of a loaded program: header, constants, function table, instructions.

Registers print as ``r4:%ln1`` (the register number and the name of the value it holds).
"""

from __future__ import annotations

from typing import Any

from relaxc.ir import dims as D
from relaxc.ir.nodes import DictLit, DType, ListLit
from relaxc.ir.types import type_to_str

from . import format as F
from .program import Executable, Instr, Reg, VMFunction


def _bytes(n: int) -> str:
    if n < 1024:
        return f"{n:,} B"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit} ({n:,} B)"
    return f"{n:,} B"  # pragma: no cover


def _n(k: int, noun: str) -> str:
    return f"{k:,} {noun}{'' if k == 1 else 's'}"


def value_str(v: Any) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (D.Sym, D.BinOp, D.DimCall)):
        return D.dim_to_str(v)
    if isinstance(v, DType):
        return v.name
    if isinstance(v, tuple):
        inner = ", ".join(value_str(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, ListLit):
        return "[" + ", ".join(value_str(x) for x in v.items) + "]"
    if isinstance(v, DictLit):
        return "{" + ", ".join(f"{k} = {value_str(x)}" for k, x in v.items) + "}"
    return repr(v)


class _Lister:
    def __init__(self, exe: Executable, fn: VMFunction):
        self.exe = exe
        self.fn = fn

    def r(self, i: int) -> str:
        return f"r{i}:%{self.fn.reg_names[i]}"

    def regs(self, xs: tuple[int, ...]) -> str:
        return ", ".join(self.r(i) for i in xs)

    def operand(self, a: Any) -> str:
        return self.r(a.index) if isinstance(a, Reg) else value_str(a)

    def call(self, ins: Instr) -> str:
        parts = [self.operand(a) for a in ins.args] + [f"{k}={value_str(v)}" for k, v in ins.kwargs]
        return f"{ins.op}(" + ", ".join(parts) + ")"

    def line(self, ins: Instr) -> str:
        op = ins.opcode
        name = F.OPCODES[op]
        dst = ""
        if ins.dst is not None:
            dst = self.r(ins.dst)
            if ins.ann is not None:
                dst += f": {type_to_str(ins.ann)}"
            dst += " = "
        if op in (F.KILL_TENSOR, F.KILL_STORAGE, F.KILL_OBJECT):
            body = self.operand(ins.args[0]) if ins.args else ""
        elif op in F.CALL_GROUP:
            body = self.call(ins)
        elif op == F.INVOKE:
            body = f"{self.call(ins)} outs ({self.regs(ins.outs)})"
        elif op == F.INVOKE_FUNC:
            body = (
                f"@{self.exe.functions[ins.func].name}({self.regs(ins.regs)}) outs "
                f"({self.regs(ins.outs)})"
            )
        elif op == F.CALL_FUNC:
            body = f"@{self.exe.functions[ins.func].name}({self.regs(ins.regs)})"
        elif op == F.CONST:
            c = self.exe.constants[ins.const]
            what = "inline" if c.inline else f'"{c.name}"'
            body = f"c{ins.const} {what} {c.dtype}{tuple(c.array.shape)}"
        elif op == F.TUPLE:
            body = f"({self.regs(ins.regs)})"
        elif op == F.PROJECT:
            body = f"{self.r(ins.src)}.{ins.index}"  # type: ignore[arg-type]
        elif op == F.MOVE:
            body = self.r(ins.src)  # type: ignore[arg-type]
        else:  # RET
            body = f"({self.regs(ins.regs)})" if ins.ret_tuple else self.regs(ins.regs)
        return f"{name:<13} {dst}{body}"


def disassemble(exe: Executable, source: str = "") -> str:
    """The listing of ``exe`` (``source`` names the file in the header)."""
    out: list[str] = []
    head = f"{source}: " if source else ""
    out.append(
        f"{head}relaxc bytecode format {exe.version}, {exe.size:,} bytes, sha256 "
        f"{exe.digest[:16]}..."
    )
    out.append(
        f"{_n(len(exe.strings), 'string')}, {_n(len(exe.constants), 'constant')}, "
        f"{_n(len(exe.functions), 'function')}"
    )
    out.append("")
    total = sum(c.array.nbytes for c in exe.constants)
    out.append(f"constants: {len(exe.constants)} ({_bytes(total)})")
    for i, c in enumerate(exe.constants):
        name = "(inline)" if c.inline else c.name
        out.append(
            f"  c{i:<4} {name:<28} {c.dtype:<5} {str(tuple(c.array.shape)):<18} "
            f"{_bytes(c.array.nbytes)}"
        )
    out.append("")
    out.append(f"functions: {len(exe.functions)}")
    for f in exe.functions:
        kind = "primitive" if f.is_primitive else "function"
        out.append(
            f"  #{f.index:<3} @{f.name:<24} {kind:<9} params {f.nparams:<3} registers {f.nregs:<5} "
            f"instructions {len(f.instrs)}"
        )
    for f in exe.functions:
        out.append("")
        params = ", ".join(
            f"r{i}:%{f.reg_names[i]}: {type_to_str(t)}" for i, t in enumerate(f.param_types)
        )
        attrs = ""
        if f.attrs:
            attrs = " attrs {" + ", ".join(f"{k} = {value_str(v)}" for k, v in f.attrs) + "}"
        out.append(f"fn @{f.name}({params}) -> {type_to_str(f.ret_type)}{attrs}")
        out.append(f"  registers: {f.nregs} ({f.nparams} parameter{'s' if f.nparams != 1 else ''})")
        lister = _Lister(exe, f)
        width = len(str(len(f.instrs) - 1))
        for pc, ins in enumerate(f.instrs):
            out.append(f"  {pc:>{width}}  {lister.line(ins)}")
    return "\n".join(out) + "\n"

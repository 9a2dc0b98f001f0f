"""The VM's program model: what a loaded ``.rxb`` file is, and the limits of the format.

:class:`Executable` holds the decoded functions (:class:`VMFunction`, each a tuple of
:class:`Instr`), the constant pool (:class:`Constant`) and the program rebuilt as IR.
The limits below are the format's: the writer (:mod:`.codegen`) refuses a program that
exceeds them and the reader (:mod:`.loader`) refuses a file that does, so both import them
from here, as the VM and the disassembler import the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import Function, Module
from relaxc.ir.types import Type, dtype_from_numpy
from relaxc.ir.verifier import ModuleTypes

from . import format as F

MAX_INLINE_ELEMENTS = 1 << 20
"""Inline literal constants are rebuilt as IR literals for the verifier; larger ones are refused."""
MAX_NDIM = 32
MAX_DIM = 1 << 40
MAX_DIM_TERMS = 1 << 12
"""Most terms a dimension expression, or the product of a shape, may expand to. The IR's
canonical form of dims multiplies sums out, so ``(a+b)*(c+d)*...`` grows exponentially;
a file could otherwise make the verifier work for hours."""


def dim_terms(d: Any) -> int:
    """An upper bound of the terms of ``d`` in canonical (multiplied-out) form."""
    if isinstance(d, D.BinOp):
        a, b = dim_terms(d.lhs), dim_terms(d.rhs)
        n = a + b if d.op in ("+", "-") else a * b if d.op == "*" else a
    elif isinstance(d, D.DimCall):
        n = sum(dim_terms(x) for x in d.args)
    else:
        n = 1
    if n > MAX_DIM_TERMS:
        raise TooComplex()
    return n


def shape_terms(dims: tuple) -> int:
    """An upper bound of the terms of the product of ``dims`` (a shape) in canonical form."""
    n = 1
    for d in dims:
        n *= dim_terms(d)
        if n > MAX_DIM_TERMS:
            raise TooComplex()
    return n


class TooComplex(Exception):
    """A dimension (or a shape's product) has more than :data:`MAX_DIM_TERMS` canonical terms."""


@dataclass(frozen=True, slots=True)
class Reg:
    """A register operand."""

    index: int


@dataclass(frozen=True)
class Constant:
    """An entry of the constant pool: a read-only array in native byte order."""

    name: str  # the weight name; "" for an inline literal
    inline: bool
    array: np.ndarray

    @property
    def dtype(self) -> str:
        return dtype_from_numpy(self.array.dtype) or str(self.array.dtype)


@dataclass(frozen=True, slots=True)
class Instr:
    """One decoded instruction. Fields not used by an opcode are None or empty."""

    opcode: int
    dst: int | None = None
    ann: Type | None = None
    op: str | None = None  # registry op name (call group and invoke)
    args: tuple = ()  # operands: Reg or a literal value
    kwargs: tuple = ()  # (name, value) pairs
    regs: tuple[int, ...] = ()  # tuple fields, call/invoke_func arguments, ret registers
    outs: tuple[int, ...] = ()  # invoke outputs
    func: int | None = None
    const: int | None = None
    src: int | None = None
    index: int | None = None
    ret_tuple: bool = False


@dataclass
class VMFunction:
    """A function of the program: its table entry and decoded instructions."""

    index: int
    name: str
    attrs: tuple
    reg_names: tuple[str, ...]
    param_types: tuple[Type, ...]
    ret_type: Type
    instrs: tuple[Instr, ...]
    code_offset: int = 0
    code_length: int = 0
    ninstr: int = 0
    ir: Function | None = None

    @property
    def nparams(self) -> int:
        return len(self.param_types)

    @property
    def nregs(self) -> int:
        return len(self.reg_names)

    @property
    def is_primitive(self) -> bool:
        return any(k == "primitive" and v is True for k, v in self.attrs)


@dataclass
class Executable:
    """A loaded, validated program."""

    functions: list[VMFunction]
    constants: list[Constant]
    strings: list[str]
    module: Module  # the program rebuilt as IR (verified)
    types: ModuleTypes
    size: int = 0
    digest: str = ""
    version: int = F.FORMAT_VERSION
    by_name: dict[str, VMFunction] = field(default_factory=dict)

    def function(self, name: str) -> VMFunction | None:
        return self.by_name.get(name)

    def weights(self) -> dict[str, np.ndarray]:
        """The named constants, as the reference interpreter wants its weights."""
        return {c.name: c.array for c in self.constants if not c.inline}


__all__ = [
    "MAX_DIM",
    "MAX_DIM_TERMS",
    "MAX_INLINE_ELEMENTS",
    "MAX_NDIM",
    "Constant",
    "Executable",
    "Instr",
    "Reg",
    "TooComplex",
    "VMFunction",
    "dim_terms",
    "shape_terms",
]

"""The IR a program's instructions encode: each instruction back to the statement it came from.

The writer keeps every detail of the IR (one instruction per statement, one register per
name), so the rebuilt function is the compiled one; the loader verifies it before the VM
runs anything, and ``relaxc run --check`` runs the reference interpreter on it.
"""

from __future__ import annotations

from typing import Any

from relaxc.ir.nodes import (
    Bind,
    Call,
    CallFunc,
    DType,
    Effect,
    Function,
    Invoke,
    ListLit,
    Param,
    Project,
    TupleExpr,
    Var,
)
from relaxc.ir.vocab import CONST

from . import format as F
from .program import Constant, Reg, VMFunction


def _literal(v: Any) -> Any:
    if isinstance(v, list):
        return ListLit(tuple(_literal(x) for x in v))
    return v


def _arg(a: Any, names: tuple[str, ...]) -> Any:
    return Var(names[a.index]) if isinstance(a, Reg) else a


def decompile_function(
    fn: VMFunction, exe_functions: list[VMFunction], constants: list[Constant]
) -> Function:
    """The IR function the instructions of ``fn`` encode."""
    names = fn.reg_names
    body: list = []
    for ins in fn.instrs[:-1]:
        op = ins.opcode
        if op == F.INVOKE:
            body.append(
                Effect(
                    Invoke(
                        ins.op,
                        False,
                        tuple(_arg(a, names) for a in ins.args),
                        ins.kwargs,
                        tuple(Var(names[o]) for o in ins.outs),
                    )
                )
            )
            continue
        if op == F.INVOKE_FUNC:
            body.append(
                Effect(
                    Invoke(
                        exe_functions[ins.func].name,
                        True,
                        tuple(Var(names[a]) for a in ins.regs),
                        (),
                        tuple(Var(names[o]) for o in ins.outs),
                    )
                )
            )
            continue
        if op in F.CALL_GROUP:
            e: Any = Call(ins.op, tuple(_arg(a, names) for a in ins.args), ins.kwargs)
        elif op == F.CALL_FUNC:
            e = CallFunc(exe_functions[ins.func].name, tuple(Var(names[a]) for a in ins.regs))
        elif op == F.CONST:
            c = constants[ins.const]
            if c.inline:
                e = Call(CONST, (_literal(c.array.tolist()), DType(c.dtype)))
            else:
                e = Call(CONST, (c.name,))
        elif op == F.TUPLE:
            e = TupleExpr(tuple(Var(names[a]) for a in ins.regs))
        elif op == F.PROJECT:
            e = Project(Var(names[ins.src]), ins.index)
        else:
            e = Var(names[ins.src])
        body.append(Effect(e) if ins.dst is None else Bind(names[ins.dst], ins.ann, e))
    last = fn.instrs[-1]
    ret: Any = (
        TupleExpr(tuple(Var(names[a]) for a in last.regs))
        if last.ret_tuple
        else Var(names[last.regs[0]])
    )
    params = tuple(Param(names[i], t) for i, t in enumerate(fn.param_types))
    return Function(fn.name, params, fn.ret_type, fn.attrs, tuple(body), ret)

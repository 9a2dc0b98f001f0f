"""Which exported functions of an x86-64 object can return with a dirty AVX upper state.

A function that leaves the upper halves of ymm0-15 (zmm0-15) dirty makes the SSE code its
caller runs next slow (a state transition per instruction, or false dependencies); the
ABI's convention is that a function returns with them clean (``vzeroupper``). This reads
``objdump -d`` of an object and follows each function's control flow: the state is dirty
after any instruction that names ymm0-15 or zmm0-15, clean after ``vzeroupper`` or
``vzeroall``, and a ``ret`` (or a jump out of the function: a tail call) reached dirty on
some path is a defect. Calls leave the state as it was (the callee returns clean by the
same convention). An indirect jump reached dirty makes every instruction of the function
reachable dirty (its targets are not known), which can only over-report.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

_DIRTIES = re.compile(r"%[yz]mm(?:[0-9]|1[0-5])\b")
_CLEANS = ("vzeroupper", "vzeroall")
_LINE = re.compile(r"^\s*([0-9a-f]+):\s*(?:(?:bnd|notrack|rep|repz|repnz|lock)\s+)*(\S+)\s*(.*)$")
_FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
_TARGET = re.compile(r"^([0-9a-f]+) <([^>]+)>")


@dataclass(frozen=True)
class Insn:
    addr: int
    op: str
    args: str


def global_functions(obj: str) -> set[str]:
    """The names of the object's global (exported) functions, from its symbol table."""
    out = subprocess.run(["objdump", "-t", obj], capture_output=True, text=True, check=True)
    names = set()
    for line in out.stdout.splitlines():
        parts = line.split()
        # "0000000000000000 g     F .text  00000000000000e5 cnn_run"
        if len(parts) >= 6 and parts[1] == "g" and "F" in parts[2:4] and ".text" in line:
            names.add(parts[-1])
    return names


def disassemble(obj: str) -> dict[str, list[Insn]]:
    """Function name -> its instructions, from ``objdump -d`` (AT&T syntax)."""
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", obj], capture_output=True, text=True, check=True
    )
    funcs: dict[str, list[Insn]] = {}
    current: list[Insn] | None = None
    for line in out.stdout.splitlines():
        m = _FUNC.match(line)
        if m:
            current = funcs.setdefault(m.group(2), [])
            continue
        m = _LINE.match(line)
        if m and current is not None and not m.group(2).startswith("("):
            current.append(Insn(int(m.group(1), 16), m.group(2), m.group(3)))
    return funcs


def uses_upper_state(insns: list[Insn]) -> bool:
    return any(_DIRTIES.search(i.args) for i in insns)


def dirty_exits(funcs: dict[str, list[Insn]]) -> dict[str, list[Insn]]:
    """Function name -> its ``ret`` instructions (and jumps out: tail calls) that some path
    reaches with the upper state dirty. A call of a function of the same object leaves the
    state dirty if that function can return dirty (found by iterating to a fixed point: a
    static helper the compiler let return dirty counts against its caller); any other call
    leaves it as it was."""
    bad: dict[str, list[Insn]] = {name: [] for name in funcs}
    changed = True
    while changed:
        changed = False
        for name, insns in funcs.items():
            found = _dirty_exits(insns, lambda callee: bool(bad.get(callee)))
            if len(found) != len(bad[name]):
                bad[name] = found
                changed = True
    return bad


def _dirty_exits(insns: list[Insn], returns_dirty) -> list[Insn]:
    index = {i.addr: k for k, i in enumerate(insns)}
    dirty_in = [False] * len(insns)
    seen = [False] * len(insns)
    work: list[int] = []
    bad: list[Insn] = []
    everything = False

    def reach(k: int, dirty: bool) -> None:
        if k >= len(insns):
            return
        if not seen[k] or (dirty and not dirty_in[k]):
            seen[k] = True
            dirty_in[k] = dirty_in[k] or dirty
            work.append(k)

    reach(0, False)
    while work:
        k = work.pop()
        insn = insns[k]
        op = insn.op
        dirty = dirty_in[k]
        if op in _CLEANS:
            dirty = False
        elif _DIRTIES.search(insn.args):
            dirty = True
        target = _TARGET.match(insn.args.strip())
        if op.startswith("call"):
            if target is not None and returns_dirty(target.group(2)):
                dirty = True
            reach(k + 1, dirty)
            continue
        if op.startswith("ret"):
            if dirty and insn not in bad:
                bad.append(insn)
            continue
        if op.startswith("j"):
            if target is None:  # indirect: any instruction may follow
                if dirty and not everything:
                    everything = True
                    for j in range(len(insns)):
                        reach(j, True)
            elif int(target.group(1), 16) in index:
                reach(index[int(target.group(1), 16)], dirty)
            elif dirty and insn not in bad:  # a jump out of the function: a tail call
                bad.append(insn)
            if op == "jmp":
                continue
        if op in ("ud2", "hlt"):
            continue
        reach(k + 1, dirty)
    return bad

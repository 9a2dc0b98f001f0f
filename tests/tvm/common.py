"""Checks every ported case makes, and the out-of-scope programs."""

from __future__ import annotations

import re
from pathlib import Path


from .harness import assert_no_kill_of_live_value, assert_plan_valid, compiled, refusal, vm_check


def memory_safe(name: str, tmp: Path, *, vm: bool = True, dims=None, kill_walk: bool = True):
    """The vm pipeline's output: the plan checker agrees, nothing still used is killed (the
    verifier's kill checker ran after every pass; the walk of harness.py checks again), and
    the VM with poisoned kills is bit-identical to the interpreter."""
    m = compiled(name)
    assert_plan_valid(m)
    if kill_walk:
        assert_no_kill_of_live_value(m)
    if vm:
        vm_check(name, tmp, dims)
    return m


CLEAR = re.compile(r"not supported|unsupported|out of scope|relaxc has no|straight-line", re.I)


def assert_clear_refusal(text: str, tmp: Path, what: str) -> None:
    """Refused with exit 1 and a located error, no traceback, and a sentence saying that
    ``what`` is not supported (not a bare parse error)."""
    line = refusal(text, tmp)
    assert CLEAR.search(line), f"unclear refusal of {what}: {line}"

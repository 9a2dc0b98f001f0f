"""Running a list of passes, with instruments (print, time, verify) between them.

The pipeline checks the order of its passes against their declared preconditions before
running anything, then runs each pass and calls every instrument before and after it.
Instruments never change the module; passes never print.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from relaxc.ir.diagnostics import InternalError, RxError
from relaxc.ir.nodes import Module
from relaxc.ir.verifier import ModuleTypes, verify_module

from .base import Pass, PassError, check_properties
from .properties import detect_properties


class Instrument(Protocol):
    """Hooks called around every pass (TVM's PassInstrument, xDSL's pipeline callback)."""

    def before_pass(self, index: int, p: Pass, module: Module) -> None: ...

    def after_pass(self, index: int, p: Pass, module: Module) -> None: ...


class PassBrokeIR(InternalError):
    """A pass produced a module the verifier rejects: a bug in that pass."""

    def __init__(self, pass_name: str, error: RxError):
        super().__init__(f"pass {pass_name} produced invalid IR: {error}")
        self.pass_name = pass_name
        self.error = error


@dataclass
class VerifyInstrument:
    """Verifies the module after every pass and names the pass that broke it.

    It keeps the types of the module it verified last, so the next pass need not infer them
    again (:meth:`types_for`).
    """

    _last: tuple[Module, ModuleTypes] | None = None

    def before_pass(self, index: int, p: Pass, module: Module) -> None:
        return None

    def after_pass(self, index: int, p: Pass, module: Module) -> None:
        try:
            self._last = (module, verify_module(module))
        except RxError as e:
            raise PassBrokeIR(p.name, e) from e

    def types_for(self, module: Module) -> ModuleTypes | None:
        if self._last is not None and self._last[0] is module:
            return self._last[1]
        return None


@dataclass
class TimingInstrument:
    """Wall time of each pass, in run order."""

    times: list[tuple[str, float]] = field(default_factory=list)
    _start: float = 0.0

    def before_pass(self, index: int, p: Pass, module: Module) -> None:
        self._start = time.perf_counter()

    def after_pass(self, index: int, p: Pass, module: Module) -> None:
        self.times.append((p.name, time.perf_counter() - self._start))


@dataclass
class DumpInstrument:
    """Hands the module to ``sink(title, index, pass_name, module)`` before/after chosen passes.

    ``before``/``after`` hold canonical pass names, or ``"all"``.
    """

    sink: Callable[[str, int, str, Module], None]
    before: frozenset[str] = frozenset()
    after: frozenset[str] = frozenset()

    def _wants(self, names: frozenset[str], p: Pass) -> bool:
        return "all" in names or p.name in names

    def before_pass(self, index: int, p: Pass, module: Module) -> None:
        if self._wants(self.before, p):
            self.sink("before", index, p.name, module)

    def after_pass(self, index: int, p: Pass, module: Module) -> None:
        if self._wants(self.after, p):
            self.sink("after", index, p.name, module)


def check_order(passes: Sequence[Pass], props: set[str]) -> None:
    """Raise PassError if some pass would run without its preconditions."""
    props = set(props)
    for i, p in enumerate(passes):
        try:
            check_properties(p, props)
        except PassError as e:
            where = f"pass {i + 1} of the pipeline ({' -> '.join(q.name for q in passes)})"
            raise PassError(f"{e.message}", notes=(f"in {where}",)) from None
        props |= p.provides


@dataclass
class Pipeline:
    """An ordered list of passes plus the instruments that watch them."""

    passes: list[Pass]
    instruments: list[Instrument] = field(default_factory=list)

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        """Run every pass; ``types`` are the verified types of the input, if known."""
        check_order(self.passes, detect_properties(module))
        known = (module, types) if types is not None else None
        for i, p in enumerate(self.passes):
            for ins in self.instruments:
                ins.before_pass(i, p, module)
            types = known[1] if known is not None and known[0] is module else None
            for ins in self.instruments:
                if types is None and hasattr(ins, "types_for"):
                    types = ins.types_for(module)
            module = p.run(module, types)
            for ins in self.instruments:
                ins.after_pass(i, p, module)
        return module

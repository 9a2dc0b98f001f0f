"""The pass contract: a pass maps a valid module to a new valid module.

Every pass is a frozen dataclass whose fields are its options, with a canonical CamelCase
``name``, a one-line ``summary``, and declared preconditions in terms of module
*properties* (see :mod:`relaxc.passes.properties`): ``requires`` must hold before it runs,
``forbids`` must not, and ``provides`` holds after it. A pass never prints and never exits:
it returns a module or raises :class:`PassError`, which the driver renders.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Module
from relaxc.ir.verifier import ModuleTypes, verify_module


class PassError(RxError):
    """A pass refused its input (a failed precondition or IR it cannot handle)."""


@dataclass(frozen=True)
class Pass:
    """Base class of all passes: valid IR in, valid IR out."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    requires: ClassVar[frozenset[str]] = frozenset()
    forbids: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset()
    # Human explanation per property, used in precondition errors.
    hints: ClassVar[dict[str, str]] = {}

    def run(self, module: Module, types: "ModuleTypes | None" = None) -> Module:
        """Transform ``module``; subclasses implement this.

        ``types`` are the verifier's types of ``module`` when the caller already has them
        (the pipeline verifies between passes); a pass computes them itself otherwise.
        """
        raise NotImplementedError

    def __call__(self, module: Module) -> Module:
        """Check preconditions on ``module`` itself, then run."""
        from .properties import detect_properties

        check_properties(self, detect_properties(module))
        return self.run(module)

    @classmethod
    def option_fields(cls) -> list[Any]:
        """The fields that are options (a field with ``metadata={"option": False}`` is
        wiring the pipeline fills, such as :func:`relaxc.passes.context.context_field`)."""
        return [f for f in fields(cls) if f.metadata.get("option", True)]

    def spec(self) -> str:
        """The pass as it would be written in a pipeline: ``Name{opt=value ...}``."""
        opts = [
            f"{f.name}={_fmt(getattr(self, f.name))}"
            for f in self.option_fields()
            if getattr(self, f.name) != f.default
        ]
        return self.name + ("{" + " ".join(opts) + "}" if opts else "")


def module_types(module: Module, types: ModuleTypes | None) -> ModuleTypes:
    """The verifier's types of ``module``: ``types`` when the caller already has them (the
    pipeline verifies between passes), else verified here (which also checks the module)."""
    return types if types is not None else verify_module(module)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def check_properties(p: Pass, props: set[str]) -> None:
    """Raise PassError if ``p`` cannot run on a module with properties ``props``."""
    for need in sorted(p.requires - props):
        raise PassError(f"{p.name} needs {describe(need)}; {p.hints.get(need, '')}".rstrip("; "))
    for bad in sorted(p.forbids & props):
        raise PassError(
            f"{p.name} cannot run on IR with {describe(bad)}; {p.hints.get(bad, '')}".rstrip("; ")
        )


def describe(prop: str) -> str:
    from .properties import PROPERTIES

    return PROPERTIES.get(prop, prop)

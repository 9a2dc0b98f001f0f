"""What a backend implements, registered against the op registry.

A backend (the C emitter, say) makes one :class:`BackendTable` and, for every kernel op
of the registry, either :meth:`~BackendTable.implement`\\ s it or :meth:`~BackendTable.refuse`\\ s
it with a sentence saying why. :meth:`~BackendTable.check_covers` runs when the backend is
imported: an op added to the registry and forgotten by a backend is an error there, not a
surprise at a user's build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Mapping, Sequence, TypeVar

from .registry import Registry
from .types import TensorType

F = TypeVar("F")


@dataclass(frozen=True, slots=True)
class Refusal:
    """An op a backend does not implement, and the reason a user is told."""

    op: str
    why: str


class BackendTable(Generic[F]):
    """op name -> implementation or refusal, for one backend."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self._impls: dict[str, F] = {}
        self._refusals: dict[str, Refusal] = {}

    def implement(self, op: str, impl: F) -> F:
        self._check_new(op)
        self._impls[op] = impl
        return impl

    def implement_all(self, ops: Iterable[str], impl: F) -> None:
        for op in ops:
            self.implement(op, impl)

    def refuse(self, op: str, why: str) -> None:
        self._check_new(op)
        self._refusals[op] = Refusal(op, why)

    def _check_new(self, op: str) -> None:
        if op in self._impls or op in self._refusals:
            raise ValueError(f"{self.backend} backend: op {op} registered twice")

    def get(self, op: str) -> F | None:
        return self._impls.get(op)

    def refusal(self, op: str) -> Refusal | None:
        return self._refusals.get(op)

    def implemented(self) -> list[str]:
        return sorted(self._impls)

    def refused(self) -> list[Refusal]:
        return [self._refusals[k] for k in sorted(self._refusals)]

    def check_covers(self, registry: Registry, categories: tuple[str, ...] = ("kernel",)) -> None:
        """Raise if an op of ``categories`` has neither an implementation nor a refusal, or
        if the table names an op the registry does not have."""
        wanted = {op.name for op in registry.ops() if op.category in categories}
        known = set(self._impls) | set(self._refusals)
        missing = sorted(wanted - known)
        unknown = sorted(known - set(registry.names()))
        problems = []
        if missing:
            problems.append(f"no implementation or refusal for {', '.join(missing)}")
        if unknown:
            problems.append(f"entries for ops the registry does not have: {', '.join(unknown)}")
        if problems:
            raise RuntimeError(
                f"{self.backend} backend out of step with the op registry: " + "; ".join(problems)
            )


__all__ = ["BackendTable", "Refusal", "ScratchFact"]


ScratchFact = Callable[[str, Mapping[str, Any], Sequence[TensorType], Sequence[TensorType]], int]
"""A target's answer to "how many bytes of scratch does your kernel of this op need on these
types": ``(op, bound attributes, input types, output types) -> bytes`` (0: none). A backend
defines it; the composition layer (``cli/``) hands it to PlanKernelScratch through a
:class:`relaxc.passes.context.PipelineContext`, so the IR and the passes import no backend."""

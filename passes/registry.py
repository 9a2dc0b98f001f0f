"""The pass registry and the named pipelines."""

from __future__ import annotations

from .base import Pass
from .kill_after_last_use import KillAfterLastUse
from .legalize_packed_calls import LegalizePackedCalls
from .manifest_alloc import ManifestAlloc
from .plan_memory import PlanMemory
from .plan_workspace import PlanWorkspace
from .reorder_for_memory import ReorderForMemory

PASSES: dict[str, type[Pass]] = {
    cls.name: cls
    for cls in (
        ManifestAlloc,
        PlanWorkspace,
        PlanMemory,
        KillAfterLastUse,
        LegalizePackedCalls,
        ReorderForMemory,
    )
}
"""Canonical name → pass class. Kebab-case spellings are accepted by the spec parser."""

PIPELINES: dict[str, tuple[str, ...]] = {
    "vm": ("ManifestAlloc", "PlanWorkspace", "PlanMemory", "KillAfterLastUse"),
    "c": ("ManifestAlloc", "PlanWorkspace", "PlanMemory", "LegalizePackedCalls"),
    "none": (),
}
"""Named pipelines: the default for each target, and ``none``."""

PIPELINE_DOCS: dict[str, str] = {
    "vm": "default for --target vm and ir",
    "c": "default for --target c",
    "none": "no passes (the input as written)",
}

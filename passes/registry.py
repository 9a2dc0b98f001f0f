"""The pass registry and the named pipelines."""

from __future__ import annotations

from .base import Pass
from .compute_in_place import ComputeInPlace
from .elide_concat_split import ElideConcatSplit
from .kill_after_last_use import KillAfterLastUse
from .legalize_packed_calls import LegalizePackedCalls
from .manifest_alloc import ManifestAlloc
from .plan_kernel_scratch import PlanKernelScratch
from .plan_memory import PlanMemory
from .plan_workspace import PlanWorkspace
from .reorder_for_memory import ReorderForMemory

PASSES: dict[str, type[Pass]] = {
    cls.name: cls
    for cls in (
        ReorderForMemory,
        ManifestAlloc,
        PlanWorkspace,
        ElideConcatSplit,
        ComputeInPlace,
        PlanKernelScratch,
        PlanMemory,
        KillAfterLastUse,
        LegalizePackedCalls,
    )
}
"""Canonical name → pass class. Kebab-case spellings are accepted by the spec parser."""

PIPELINES: dict[str, tuple[str, ...]] = {
    "vm": (
        "ReorderForMemory",
        "ManifestAlloc",
        "PlanWorkspace",
        "ElideConcatSplit",
        "ComputeInPlace",
        "PlanMemory",
        "KillAfterLastUse",
    ),
    "c": (
        "ReorderForMemory",
        "ManifestAlloc",
        "PlanWorkspace",
        "ElideConcatSplit",
        "ComputeInPlace",
        "PlanKernelScratch",
        "PlanMemory",
        "LegalizePackedCalls",
    ),
    "none": (),
}
"""Named pipelines: the default for each target, and ``none``."""

PIPELINE_DOCS: dict[str, str] = {
    "vm": "default for --target vm and ir",
    "c": "default for --target c",
    "none": "no passes (the input as written)",
}

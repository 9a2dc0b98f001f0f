"""The pictures' colours read each op's family off its registry record (``OpDef.family``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relaxc.cli.report.picture.colours import OWN_SHADE, SHADES, UNKNOWN, family, op_colour
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OP_FAMILIES

OPS = REGISTRY.ops()


def test_the_palette_knows_every_family_an_op_can_declare() -> None:
    # every family but "other" has a hue; "other" is the grey of ops that write no tensor
    assert set(SHADES) | {"other"} == set(OP_FAMILIES)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_every_op_is_drawn_in_its_recorded_family(op) -> None:
    assert op.family in SHADES or op.family == "other"
    assert family(op.name) == op.family
    colour = op_colour(op.name)
    if op.family == "other":
        assert colour == UNKNOWN
    else:
        assert colour in SHADES[op.family] or colour == OWN_SHADE.get(op.name)


@pytest.mark.parametrize(
    "op", [op for op in OPS if op.category == "kernel"], ids=lambda op: op.name
)
def test_every_kernel_op_has_a_hue(op) -> None:
    # a kernel op computes a buffer the report draws: it may not be grey like an unknown op
    assert op.family != "other", f"{op.name}: give its OpDef a family (ir/registry.py)"
    assert op_colour(op.name) != UNKNOWN


def test_own_shades_name_registered_ops_with_a_hue() -> None:
    for name in OWN_SHADE:
        assert name in REGISTRY, name
        assert REGISTRY.get(name).family in SHADES, name


def test_a_shade_of_its_own_differs_within_a_family() -> None:
    for fam in SHADES:
        own = [colour for name, colour in OWN_SHADE.items() if REGISTRY.get(name).family == fam]
        assert len(set(own)) == len(own), fam


@given(st.text(min_size=1, max_size=12).filter(lambda s: s not in REGISTRY))
def test_a_name_the_registry_does_not_know_is_grey(name: str) -> None:
    if name.endswith(" scratch"):
        return
    assert family(name) == "other" and op_colour(name) == UNKNOWN

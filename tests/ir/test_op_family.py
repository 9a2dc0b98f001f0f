"""``OpDef.family``: the kind of computation, a fact on the op's record."""

from __future__ import annotations

import pytest

from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OP_FAMILIES, OpDef, Registry


def _infer(types, attrs):  # noqa: ANN001, ANN202
    return types[0]


def _op(**kw) -> OpDef:  # noqa: ANN003
    return OpDef("f", "a test op", "kernel", _infer, **kw)


def test_an_absent_family_follows_the_elementwise_flag() -> None:
    assert _op(elementwise=True).family == "elementwise"
    assert _op().family == "other"
    assert _op(family="pooling").family == "pooling"


def test_the_registry_refuses_an_unknown_family() -> None:
    with pytest.raises(ValueError, match="unknown family 'convolution'"):
        Registry().register(_op(family="convolution"))


def test_every_registered_op_has_a_known_family() -> None:
    for op in REGISTRY.ops():
        assert op.family in OP_FAMILIES, op.name
        if op.elementwise:
            assert op.family == "elementwise", op.name
        if op.category in ("view", "memory", "runtime", "constant"):
            assert op.family == "other", op.name

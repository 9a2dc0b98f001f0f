"""Inside a primitive function, a value is computed over its input's buffer exactly when the
op's record says the output may overwrite that input (``OpDef.inplace``)."""

from __future__ import annotations

import dataclasses

import pytest

from relaxc.backend.c import emit_c, primitive
from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError
from relaxc.ir.ops import build_registry
from relaxc.passes.manifest_alloc import ManifestAlloc
from relaxc.passes.plan_memory import PlanMemory

# %b and %c can only live in the output buffer, over the value they are computed from.
CHAIN = """
fn @chain(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {primitive = true} {
  %a = exp(%x)
  %b = exp(%a)
  %c = exp(%b)
  return %c
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = call @chain(%x)
  return %y
}
"""


def _c() -> str:
    planned = PlanMemory().run(ManifestAlloc().run(parse_module(CHAIN, "chain.rx")))
    return emit_c(planned, {}, prefix="m", source="chain.rx").files["m.c"]


def test_an_inplace_op_is_computed_over_its_input():
    text = _c()
    body = text[text.index("static void m_f_chain(") :]
    assert body.count("(out, out);") == 2  # %b over %a, %c over %b, all in the output


def test_without_inplace_on_the_record_the_value_has_nowhere_to_go(monkeypatch):
    reg = build_registry()
    reg._ops["exp"] = dataclasses.replace(reg.get("exp"), inplace=())
    monkeypatch.setattr(primitive, "REGISTRY", reg)
    with pytest.raises(RxError, match="cannot place %b .* inside primitive function @chain"):
        _c()

"""The C formulas of the plain elementwise ops (backend/c/kernels/elementwise.py, C_FORMULAS):
one entry per op of the registry, registered in the C kernel table, in step with the records
(scalar, float_only), and checked when the backend is imported."""

from __future__ import annotations

import pytest

from relaxc.backend.c import kernels
from relaxc.backend.c.dtypes import SUPPORTED as C_SUPPORTED
from relaxc.backend.c.helpers import Helpers
from relaxc.backend.c.kernels.elementwise import (
    C_FORMULAS,
    CFormula,
    FormulaKernel,
    formula_problems,
    libm,
    plain_elementwise,
    record_on_float,
    record_on_int,
)
from relaxc.ir.diagnostics import RxError
from relaxc.ir.ops import REGISTRY, build_registry
from relaxc.ir.registry import OpDef, OpError
from relaxc.ir.types import DTYPES, TensorType

PLAIN = plain_elementwise(REGISTRY)


def _with(op: OpDef):
    reg = build_registry()
    reg.register(op)
    return reg


def _unary(name: str, scalar: str | None = None) -> OpDef:
    return OpDef(
        name,
        "a new elementwise op",
        "kernel",
        lambda ts, attrs: ts[0],
        kernel=lambda xs, attrs: xs[0],
        elementwise=True,
        input_names=("x",),
        inplace=(0,),
        scalar=scalar,
    )


def test_the_plain_ops_are_the_unary_and_binary_elementwise_ops_without_attributes():
    assert {"exp", "relu", "negative", "add", "divide", "power"} <= set(PLAIN)
    assert not {"clip", "leaky_relu", "cast", "where"} & set(PLAIN)  # attributes, 3 inputs


def test_every_plain_elementwise_op_has_exactly_one_c_formula():
    assert sorted(C_FORMULAS) == PLAIN


@pytest.mark.parametrize("name", PLAIN)
def test_the_kernel_table_computes_each_op_through_its_formula(name):
    gen = kernels.C_KERNELS.get(name)
    assert isinstance(gen, FormulaKernel)
    assert gen.formula is C_FORMULAS[name]


@pytest.mark.parametrize("name", PLAIN)
def test_the_formulas_agree_with_the_records(name):
    """A record's scalar formula is what the C computes floats with; an op has a formula for
    floats, integers and bools exactly when its inference takes them (float_only: no integer
    one)."""
    op, f = REGISTRY.get(name), C_FORMULAS[name]
    assert (op.scalar is not None) == (f.on_float is record_on_float)
    for dtype, formula in (("f32", f.on_float), ("i32", f.on_int), ("bool", f.on_bool)):
        try:
            op.infer([TensorType((3,), dtype)] * op.min_inputs, {})
            takes = True
        except OpError:
            takes = False
        if dtype != "bool":
            assert takes == (formula is not None), (name, dtype)
        elif formula is not None:
            assert takes, name
    assert (f.on_int is None) <= (op.float_only or f.on_float is None)
    assert formula_problems(REGISTRY, C_FORMULAS) == []


def _generate(name: str, dtype: str) -> str:
    op = REGISTRY.get(name)
    ins = [TensorType((3, 5), dtype)] * op.min_inputs
    out = op.infer(ins, {})
    spec = kernels.make_spec(name, {}, ins, [out])
    return kernels.generate(spec, "k", Helpers("t"))[0]


@pytest.mark.parametrize("name", PLAIN)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_every_dtype_inference_accepts_has_c_or_a_bool_refusal(name, dtype):
    """Every call the op's inference accepts is computed in C, but bool arithmetic (an op
    with no bool formula: not the comparisons and logic), which the C target refuses with a
    sentence (no traceback, no guess), and bf16 and the low-precision types, which the
    interpreter and the VM compute (through ml_dtypes) and the C target refuses by dtype."""
    op = REGISTRY.get(name)
    try:
        op.infer([TensorType((3, 5), dtype)] * op.min_inputs, {})
    except OpError:
        return
    if DTYPES[dtype].kind == "bool" and C_FORMULAS[name].on_bool is None:
        with pytest.raises(RxError, match=f"does not support {name} on bool: bool arithmetic"):
            _generate(name, dtype)
        return
    if dtype not in C_SUPPORTED:
        with pytest.raises(RxError, match=f"dtype {dtype} has no C representation"):
            _generate(name, dtype)
        return
    text = _generate(name, dtype)
    assert "static void k(" in text and "y0[" in text


def test_a_new_elementwise_op_without_a_formula_keeps_the_backend_from_loading():
    reg = _with(_unary("frobnicate"))
    with pytest.raises(RuntimeError, match="no implementation or refusal for frobnicate"):
        kernels.c_kernels(reg)
    # with a formula it loads, and computes the op through it
    table = kernels.c_kernels(reg, {**C_FORMULAS, "frobnicate": CFormula(libm("cbrt"), None)})
    assert table.get("frobnicate").formula.on_int is None


def test_a_formula_out_of_step_with_the_records_keeps_the_backend_from_loading():
    # an entry for an op that is not a plain elementwise op
    stale = {**C_FORMULAS, "clip": C_FORMULAS["abs"]}
    with pytest.raises(
        RuntimeError, match="C formulas for ops that are not plain elementwise ones: clip"
    ):
        kernels.c_kernels(REGISTRY, stale)
    # a record's scalar formula the C formula ignores
    reg = _with(_unary("twice", scalar="x0 + x0"))
    with pytest.raises(RuntimeError, match="twice: its record's scalar formula 'x0 \\+ x0' is not"):
        kernels.c_kernels(reg, {**C_FORMULAS, "twice": CFormula(libm("fabs"), None)})
    # a C formula reading a scalar formula the record does not have
    reg = _with(_unary("nameless"))
    with pytest.raises(RuntimeError, match="nameless: its C formula reads a scalar formula"):
        kernels.c_kernels(reg, {**C_FORMULAS, "nameless": CFormula(record_on_float, record_on_int)})

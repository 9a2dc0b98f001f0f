"""Every kernel op of the registry is complete: what the "adding an op" checklist of
relaxc.ir.registry asks, checked op by op.

For every kernel op: a numpy kernel; a C generator or an explicit refusal; a fuzz recipe in
tests/fuzz/gen.py, or the generic one, that draws valid inputs for it; its row in the op
list of docs/c.md (generated from the registry); tests of it in tests/ir/test_ops*.py and
tests/backend/c/test_ops*.py (one file per family of ops: test_ops.py, test_ops_<family>.py).
The facts on the record are checked against what the op computes (float_only against its
inference, scalar against its numpy kernel, inplace against its inputs). And the checks fail
when a backend forgets an op.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.c import kernels, op_list_markdown
from relaxc.backend.c.oplist import BEGIN, END
from relaxc.ir.backends import BackendTable
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Param
from relaxc.ir.ops import REGISTRY, build_registry
from relaxc.ir.registry import OpDef, OpError, Registry, bind_args
from relaxc.ir.types import DTYPES, TensorType
from tests.fuzz import gen

ROOT = Path(__file__).resolve().parents[2]
KERNEL_OPS = [op for op in REGISTRY.ops() if op.category == "kernel"]


def _ids(ops: list[OpDef]) -> list[str]:
    return [op.name for op in ops]


# ---------------------------------------------------------------------------------------
# The checks, as one function a throwaway registry and table can be put through.


def fuzz_draws(op: OpDef, tries: int = 40) -> list[gen.FnBuilder]:
    """Functions in which the fuzzer's recipe for ``op`` (or the generic one) applied it to
    inputs it accepts, out of ``tries`` seeded attempts over random parameters."""
    drawn = []
    recipe = gen.RECIPES.get(op.name) or gen.generic
    for seed in range(tries):
        ch = gen.RandomChooser(seed)
        dtypes = list(dict.fromkeys(["f32"] + ch.subset(gen.FLOATS + gen.INTS + ("bool",), 0, 2)))
        ctx = gen.Ctx(ch, True, [2, 3, 4], dtypes, {}, {}, seed=seed)
        b = gen.FnBuilder(ctx, "main", primitive=False)
        for i in range(ch.int(1, 3)):
            t = TensorType(
                tuple(ch.choice([2, 3, 4]) for _ in range(ch.int(0, 4))), ch.choice(dtypes)
            )
            b.params.append(Param(f"x{i}", t))
            b.pool.append(gen.Val(f"x{i}", t))
        try:
            recipe(b, op)
        except gen.Reject:
            continue
        drawn.append(b)
    return drawn


def coverage_problems(
    registry: Registry, c_table: BackendTable, docs: str, fuzzed: tuple[OpDef, ...] = gen.FUZZED_OPS
) -> list[str]:
    """What is missing for the kernel ops of ``registry`` (empty when every one is complete)."""
    problems = []
    fuzzed_names = {op.name for op in fuzzed}
    for op in registry.ops():
        if op.category != "kernel":
            continue
        if op.kernel is None:
            problems.append(f"{op.name}: no numpy kernel")
        if c_table.get(op.name) is None and c_table.refusal(op.name) is None:
            problems.append(f"{op.name}: no C generator and no C refusal (backend/c/kernels.py)")
        if op.name not in fuzzed_names:
            problems.append(f"{op.name}: not fuzzed (tests/fuzz/gen.py FUZZED_OPS)")
        elif not fuzz_draws(op):
            problems.append(
                f"{op.name}: the fuzzer never draws valid inputs for it "
                f"(add a recipe to tests/fuzz/gen.py)"
            )
        if f"| `{op.name}` |" not in docs:
            problems.append(f"{op.name}: no line in the op list of docs/c.md")
    return problems


def docs_op_list(text: str) -> str:
    """The text of docs/c.md from the op list's first marker to the end of its last."""
    assert text.count(BEGIN) == 1 and text.count(END) == 1, (
        "docs/c.md must hold the op list markers once"
    )
    return text[text.index(BEGIN) : text.index(END) + len(END)] + "\n"


# ---------------------------------------------------------------------------------------
# The registry as it is.


def test_every_kernel_op_is_complete():
    docs = (ROOT / "docs/c.md").read_text()
    assert coverage_problems(REGISTRY, kernels.C_KERNELS, docs) == []


def test_docs_c_md_holds_the_generated_op_list():
    docs = (ROOT / "docs/c.md").read_text()
    assert docs_op_list(docs) == op_list_markdown(), (
        "docs/c.md's op list is stale: replace it with relaxc.backend.c.op_list_markdown()"
    )


def test_the_c_table_covers_the_registry_exactly():
    kernels.C_KERNELS.check_covers(REGISTRY)  # raises when out of step
    assert set(kernels.C_KERNELS.implemented()) | {
        r.op for r in kernels.C_KERNELS.refused()
    } == set(_ids(KERNEL_OPS))


@pytest.mark.parametrize("op", KERNEL_OPS, ids=_ids(KERNEL_OPS))
def test_every_kernel_op_has_tests(op):
    ir_tests = _test_text("tests/ir")
    c_tests = _test_text("tests/backend/c")
    assert f"{op.name}(" in ir_tests or f'"{op.name}"' in ir_tests, (
        f"{op.name}: not in tests/ir/test_ops*.py"
    )
    if kernels.C_KERNELS.get(op.name) is not None:
        assert f"{op.name}(" in c_tests, (
            f"{op.name}: the C target computes it, but no tests/backend/c/test_ops*.py does"
        )


def _test_text(folder: str) -> str:
    """The text of every ``test_ops*.py`` of ``folder`` (the op tests, one file per family)."""
    return "\n".join(p.read_text() for p in sorted((ROOT / folder).glob("test_ops*.py")))


# ---------------------------------------------------------------------------------------
# The facts on the record.


@pytest.mark.parametrize(
    "op",
    [op for op in KERNEL_OPS if op.float_only],
    ids=_ids([op for op in KERNEL_OPS if op.float_only]),
)
def test_float_only_ops_infer_only_on_floats(op):
    """Every input the fuzzer's recipe gets past the op's inference is floating-point (its
    input 0: the one float_only speaks of); and inference refuses the same call on ints."""
    drawn = fuzz_draws(op)
    assert drawn
    for b in drawn:
        call = b.body[-1].value
        types = {v.name: v.type for v in b.pool}
        first = types[call.args[0].name]
        assert DTYPES[first.dtype].kind == "float", (op.name, first)
        bound = bind_args(op, call.args, call.kwargs)
        ints = [TensorType(types[v.name].shape, "i32") for v in bound.inputs]
        with pytest.raises(OpError, match="needs a floating-point tensor"):
            op.infer(ints, bound.attrs)


@pytest.mark.parametrize(
    "op",
    [op for op in KERNEL_OPS if op.scalar is not None],
    ids=_ids([op for op in KERNEL_OPS if op.scalar is not None]),
)
def test_scalar_formula_is_the_kernel(op):
    """The formula, evaluated by Python over numpy arrays, is what the numpy kernel computes."""
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-3, 3, size=(4, 5)) for _ in range(op.min_inputs)]
    env = {f"x{i}": x for i, x in enumerate(xs)}
    got = eval(op.scalar, {"__builtins__": {}}, env)  # noqa: S307 (the registry's own formulas)
    np.testing.assert_array_equal(got, op.kernel(xs, {}))


@pytest.mark.parametrize(
    "op", [op for op in KERNEL_OPS if op.inplace], ids=_ids([op for op in KERNEL_OPS if op.inplace])
)
def test_inplace_names_inputs(op):
    assert all(0 <= i < op.min_inputs for i in op.inplace), op.inplace
    assert list(op.inplace) == sorted(set(op.inplace))


def test_elementwise_ops_may_overwrite_every_input():
    for op in KERNEL_OPS:
        if op.elementwise and op.name != "cast":  # cast changes the dtype: no input has its type
            assert op.inplace == tuple(range(op.min_inputs)), op.name


# ---------------------------------------------------------------------------------------
# A backend that forgets an op.


def _with_new_op() -> Registry:
    reg = build_registry()
    reg.register(
        OpDef(
            "frobnicate",
            "x, frobnicated",
            "kernel",
            lambda ts, attrs: ts[0],
            kernel=lambda xs, attrs: xs[0],
            input_names=("x",),
        )
    )
    return reg


def test_the_c_backend_refuses_to_load_when_it_forgets_an_op():
    with pytest.raises(
        RuntimeError,
        match="C backend out of step with the op registry: no implementation or "
        "refusal for frobnicate",
    ):
        kernels.c_kernels(_with_new_op())


def test_the_coverage_check_names_what_a_forgotten_op_lacks():
    reg = _with_new_op()
    table = BackendTable("C")
    for name in kernels.C_KERNELS.implemented():
        table.implement(name, kernels.C_KERNELS.get(name))
    docs = op_list_markdown(REGISTRY)
    problems = coverage_problems(reg, table, docs, fuzzed=gen.FUZZED_OPS)
    assert problems == [
        "frobnicate: no C generator and no C refusal (backend/c/kernels.py)",
        "frobnicate: not fuzzed (tests/fuzz/gen.py FUZZED_OPS)",
        "frobnicate: no line in the op list of docs/c.md",
    ]
    # Refused and regenerated, only the fuzzer's part is left.
    table.refuse("frobnicate", "not on the C target, because nothing frobnicates in C")
    docs = op_list_markdown(reg, table)
    row = (
        "| `frobnicate` | x, frobnicated |  | refused: not on the C target, because nothing "
        "frobnicates in C |"
    )
    assert row in docs
    assert coverage_problems(reg, table, docs) == [
        "frobnicate: not fuzzed (tests/fuzz/gen.py FUZZED_OPS)"
    ]


def test_a_refusal_is_the_users_error(monkeypatch):
    """An op the C target refuses: the build fails with the refusal's sentence."""
    from relaxc.backend.c import emit_c
    from relaxc.frontend.parser import parse_module
    from relaxc.passes.manifest_alloc import ManifestAlloc
    from relaxc.passes.plan_memory import PlanMemory

    table = BackendTable("C")
    for name in kernels.C_KERNELS.implemented():
        if name != "exp":
            table.implement(name, kernels.C_KERNELS.get(name))
    table.refuse("exp", "not on the C target, because this test says so")
    monkeypatch.setattr(kernels, "C_KERNELS", table)
    m = parse_module(
        "fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {\n  %y = exp(%x)\n  return %y\n}\n",
        "t.rx",
    )
    planned = PlanMemory().run(ManifestAlloc().run(m))
    with pytest.raises(
        RxError,
        match="the C target has no kernel for op exp: not on the C target, because this "
        "test says so",
    ):
        emit_c(planned, {}, prefix="t", source="t.rx")


def test_an_op_the_fuzzer_cannot_draw_is_named():
    """An op fuzzed through the generic recipe that never type-checks needs a recipe."""

    def picky(ts, attrs):
        raise OpError("picky: no input is ever right")

    reg = Registry()
    op = reg.register(
        OpDef("picky", "refuses every input", "kernel", picky, kernel=lambda xs, attrs: xs[0])
    )
    table = BackendTable("C")
    table.refuse("picky", "not on the C target, because it takes nothing")
    problems = coverage_problems(reg, table, op_list_markdown(reg, table), fuzzed=(op,))
    assert problems == [
        "picky: the fuzzer never draws valid inputs for it (add a recipe to tests/fuzz/gen.py)"
    ]

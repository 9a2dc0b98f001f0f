"""Symbolic dims: canonical forms agree with evaluation; bounds contain every value."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from relaxc.ir import dims as D

NAMES = ("n", "m", "k")


def exprs() -> st.SearchStrategy:
    leaves = st.one_of(st.integers(0, 9), st.sampled_from(NAMES).map(D.Sym))

    def extend(ch: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(
            st.builds(D.BinOp, st.sampled_from(D.BIN_OPS), ch, ch),
            st.builds(lambda f, a, b: D.DimCall(f, (a, b)), st.sampled_from(D.DIM_FUNCS), ch, ch),
        )

    return st.recursive(leaves, extend, max_leaves=8)


envs = st.fixed_dictionaries({n: st.integers(0, 20) for n in NAMES})


def _eval(e, env):
    try:
        return D.evaluate(e, env)
    except D.DimError:
        return None


@settings(max_examples=400, deadline=None)
@given(exprs(), envs)
def test_simplify_preserves_value(e, env) -> None:
    v = _eval(e, env)
    assume(v is not None)
    assert D.evaluate(D.simplify(e), env) == v


@settings(max_examples=300, deadline=None)
@given(exprs(), exprs(), envs)
def test_provably_equal_dims_are_equal(a, b, env) -> None:
    va, vb = _eval(a, env), _eval(b, env)
    assume(va is not None and vb is not None)
    if D.dims_equal(a, b):
        assert va == vb


@settings(max_examples=400, deadline=None)
@given(exprs(), st.fixed_dictionaries({n: st.integers(0, 20) for n in NAMES}), st.data())
def test_upper_bound_contains_every_value(e, bounds, data) -> None:
    env = {n: data.draw(st.integers(0, bounds[n])) for n in NAMES}
    v = _eval(e, env)
    assume(v is not None)
    hi = D.upper_bound(e, bounds)
    if hi is not None:
        assert v <= hi


def test_examples() -> None:
    n, m = D.Sym("n"), D.Sym("m")
    assert D.dims_equal(D.BinOp("*", n, 10), D.BinOp("*", 10, n))
    assert D.simplify(D.BinOp("/", D.BinOp("+", D.BinOp("*", 2, n), 2), 2)) == D.BinOp("+", n, 1)
    assert not D.dims_equal(n, m)
    assert D.product([n, 4, 2]) == D.BinOp("*", 8, n)
    assert D.dim_to_str(D.BinOp("*", D.BinOp("+", n, 1), 2)) == "(n + 1) * 2"
    assert D.dim_to_str(D.BinOp("-", n, D.BinOp("-", m, 1))) == "n - (m - 1)"
    # The bound of a non-monotone size: (n, m, max(n - m, 1)) with n <= 20, m <= 5 (TVM test).
    size = D.product([n, m, D.DimCall("max", (D.BinOp("-", n, m), 1)), 4])
    assert D.upper_bound(size, {"n": 20, "m": 5}) == 8000
    assert D.upper_bound(D.BinOp("*", n, m), {"n": 20}) is None
    assert D.evaluate(D.BinOp("%", n, 3), {"n": 7}) == 1


def test_upper_bound_of_floor_division_with_a_dividend_that_may_be_negative() -> None:
    # A strided window over a bounded dim: (n - 2) / 2 + 1 rows for n <= 16. The dividend is
    # negative for n < 2, and the bound used to be "none", so PlanMemory left the buffer
    # dynamic and the C target refused the program (found by the fuzzer).
    n, m = D.Sym("n"), D.Sym("m")
    rows = D.BinOp("+", D.BinOp("/", D.BinOp("-", n, 2), 2), 1)
    assert D.upper_bound(rows, {"n": 16}) == 8
    assert D.upper_bound(D.BinOp("/", D.BinOp("-", n, 9), 2), {"n": 4}) == -3  # always negative
    assert D.upper_bound(D.BinOp("%", D.BinOp("-", n, 3), 4), {"n": 16}) == 3
    assert (
        D.upper_bound(D.BinOp("/", D.BinOp("-", n, 3), m), {"n": 16, "m": 4}) is None
    )  # m may be 0
    for v in range(0, 17):
        assert D.interval(rows, {"n": (0, 16)})[0] <= D.evaluate(rows, {"n": v}) <= 8

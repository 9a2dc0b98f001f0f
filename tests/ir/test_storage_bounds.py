"""The proof that a tensor lies inside its storage is sound: whatever it accepts holds at
every allowed dim value (hypothesis, by evaluation), and it accepts what the passes write."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.frontend.parser import parse_module
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError
from relaxc.ir.storage_bounds import provably_le
from relaxc.ir.verifier import verify_module

N = D.Sym("n")


def dim_exprs() -> st.SearchStrategy[D.Dim]:
    leaves = st.one_of(st.integers(-70, 200), st.just(N))
    return st.recursive(
        leaves,
        lambda inner: (
            st.builds(lambda op, a, b: D.BinOp(op, a, b), st.sampled_from("+-*"), inner, inner)
            | st.builds(lambda a, k: D.BinOp("/", a, k), inner, st.integers(1, 64))
            | st.builds(
                lambda a, k: D.BinOp("*", D.BinOp("/", D.BinOp("+", a, k - 1), k), k),
                inner,
                st.sampled_from([1, 16, 64]),
            )
        ),
        max_leaves=6,
    )


@settings(max_examples=200, deadline=None)
@given(dim_exprs(), dim_exprs(), st.one_of(st.none(), st.integers(0, 12)))
def test_what_is_proved_holds_at_every_allowed_value(
    lhs: D.Dim, rhs: D.Dim, bound: int | None
) -> None:
    ranges = {} if bound is None else {"n": (0, bound)}
    if not provably_le(lhs, rhs, ranges):
        return
    for n in range(0, (bound if bound is not None else 40) + 1):
        assert D.evaluate(lhs, {"n": n}) <= D.evaluate(rhs, {"n": n}), (
            D.dim_to_str(lhs),
            D.dim_to_str(rhs),
            n,
        )


@pytest.mark.parametrize(
    "size, offset, shape, ok",
    [
        ("64 * ((16 * n + 63) / 64)", "0", "(n, 4)", True),  # ManifestAlloc's rounded size
        ("64 * ((16 * n + 63) / 64)", "16", "(n, 4)", False),
        ("512", "0", "(n, 4)", True),  # a bounded dim inside a static storage (n <= 8: 128 bytes)
        ("512", "384", "(n, 4)", True),
        ("512", "448", "(n, 4)", False),
        ("64 / n + 4 * n", "0", "(n,)", True),  # a difference that is non-negative
        ("4 * n", "0", "(n, 2)", False),
    ],
)
def test_alloc_tensor_in_storage(size: str, offset: str, shape: str, ok: bool) -> None:
    text = f"""
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] attrs {{upper_bounds = {{n = 8}}}} {{
  %s = memory.alloc_storage({size})
  %t = memory.alloc_tensor(%s, {offset}, {shape}, f32)
  %y = relu(%x)
  return %y
}}
"""
    module = parse_module(text, "t.rx")
    if ok:
        verify_module(module)
    else:
        with pytest.raises(RxError, match="does not fit in storage|past the end of storage") as e:
            verify_module(module)
        assert e.value.loc is not None and e.value.loc.line == 4

"""Shapes computed in the graph from symbolic dims fold at import time (shape_fold.py,
slice_dims.py): comparisons and Where over dims, Max/Min, Slice to computed ends, of a
symbolic axis, and of a constant table (a bound the graph implies). Each model is imported
once with its dims symbolic and checked against onnxruntime at several sizes on the
interpreter and the VM."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.frontend.onnx import import_onnx
from relaxc.frontend.onnx.shape_fold import prove_le
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError

from tests.backend.c.cbuild import CC

from . import node_cases
from .util import assert_matches, helper, make_model, run_ort

F32, I64 = np.float32, np.int64
INT_MAX = 2**63 - 1


def _c(name: str, values: Any) -> Any:
    return helper.make_node(
        "Constant", [], [name], value=helper.make_tensor(name, 7, [len(values)], values)
    )


def shape_dims(x: str, start: int, end: int, out: str) -> Any:
    return helper.make_node("Shape", [x], [out], start=start, end=end)


def expand_where_model() -> Any:
    """TorchScript's Expand: Where(Equal(shape, -1), 1, shape) of a computed shape."""
    nodes = [
        shape_dims("x", 0, 2, "s"),
        _c("minus", [-1, -1]),
        _c("ones", [1, 1]),
        helper.make_node("Equal", ["s", "minus"], ["eq"]),
        helper.make_node("Where", ["eq", "ones", "s"], ["target"]),
        helper.make_node("Expand", ["b", "target"], ["e"]),
        helper.make_node("Add", ["e", "x"], ["y"]),
    ]
    return make_model(
        nodes,
        [("x", F32, ["batch", "seq"])],
        [("y", F32, ["batch", "seq"])],
        {"b": np.array([[0.5]], F32)},
    )


def slice_table_model() -> Any:
    """BERT's position_ids[:, :seq] of a 16-long table, added to the input."""
    nodes = [
        shape_dims("x", 1, 2, "seq"),
        _c("zero", [0]),
        _c("one", [1]),
        helper.make_node("Slice", ["table", "zero", "seq", "one"], ["ids"], name="positions"),
        helper.make_node("Cast", ["ids"], ["f"], to=1),
        helper.make_node("Add", ["x", "f"], ["y"]),
    ]
    table = np.arange(16, dtype=I64).reshape(1, 16) * 10
    return make_model(nodes, [("x", F32, [1, "seq"])], [("y", F32, [1, "seq"])], {"table": table})


def slice_axis_model() -> Any:
    """x[:, 0:1], x[:, 1:], x[:, :-1], x[:, : seq // 2], x[:, :2] of an axis of seq."""
    nodes = [
        shape_dims("x", 1, 2, "seq"),
        _c("zero", [0]),
        _c("one", [1]),
        _c("two", [2]),
        _c("minus", [-1]),
        _c("end", [INT_MAX]),
        helper.make_node("Div", ["seq", "two"], ["half"]),
        helper.make_node("Slice", ["x", "zero", "one", "one"], ["a"]),
        helper.make_node("Slice", ["x", "one", "end", "one"], ["b"]),
        helper.make_node("Slice", ["x", "zero", "minus", "one"], ["c"]),
        helper.make_node("Slice", ["x", "zero", "half", "one"], ["d"]),
        helper.make_node("Slice", ["x", "zero", "two", "one"], ["e"]),
    ]
    outs = [("a", F32, [2, 1]), ("b", F32, None), ("c", F32, None), ("d", F32, None)]
    return make_model(nodes, [("x", F32, [2, "seq"])], [*outs, ("e", F32, None)])


def max_reshape_model() -> Any:
    """Reshape to (max(batch, 1), seq * 2, 4): Max of a dim and 1 is the dim."""
    nodes = [
        shape_dims("x", 0, 1, "b"),
        shape_dims("x", 1, 2, "s"),
        _c("one", [1]),
        _c("two", [2]),
        _c("four", [4]),
        helper.make_node("Max", ["b", "one"], ["bm"]),
        helper.make_node("Mul", ["s", "two"], ["s2"]),
        helper.make_node("Concat", ["bm", "s2", "four"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    return make_model(nodes, [("x", F32, ["batch", "seq", 8])], [("y", F32, None)])


def dims_as_data_model() -> Any:
    """arange(batch) * seq + x[:, [-1, 0]] (GPT-2's mask indices; a Gather with negative
    run-time indices into the symbolic seq)."""
    nodes = [
        shape_dims("x", 0, 1, "b1"),
        shape_dims("x", 1, 2, "s1"),
        _c("zero", [0]),
        helper.make_node("Squeeze", ["b1", "zero"], ["b"]),
        helper.make_node("Squeeze", ["s1", "zero"], ["s"]),
        helper.make_node("Range", ["z", "b", "one"], ["r"]),
        helper.make_node("Mul", ["r", "s"], ["rs"]),
        helper.make_node("Unsqueeze", ["rs", "axis1"], ["rows"]),
        helper.make_node("Gather", ["x", "idx"], ["picked"], axis=1),
        helper.make_node("Add", ["rows", "picked"], ["y"]),
    ]
    inits = {"z": np.array(0, I64), "one": np.array(1, I64), "axis1": np.array([1], I64)}
    return make_model(
        nodes, [("x", I64, ["batch", "seq"]), ("idx", I64, [2])], [("y", I64, None)], inits
    )


def tile_pad_model() -> Any:
    """ViT's cls_token.repeat(batch, 1, 1) joined to x, padded on axis 1 to a multiple of 4
    by (4 - n % 4) % 4 (the dynamo exporter's F.pad to a computed amount)."""
    nodes = [
        shape_dims("x", 0, 1, "b"),
        shape_dims("x", 1, 2, "s"),
        _c("ones2", [1, 1]),
        helper.make_node("Concat", ["b", "ones2"], ["reps"], axis=0),
        helper.make_node("Tile", ["cls", "reps"], ["c"]),
        helper.make_node("Concat", ["c", "x"], ["h"], axis=1),
        _c("one", [1]),
        _c("four", [4]),
        helper.make_node("Add", ["s", "one"], ["n"]),
        helper.make_node("Mod", ["n", "four"], ["r"]),
        helper.make_node("Sub", ["four", "r"], ["f"]),
        helper.make_node("Mod", ["f", "four"], ["amount"]),
        _c("zeros4", [0, 0, 0, 0]),
        _c("zeros1", [0]),
        helper.make_node(
            "Concat", ["zeros1", "zeros1", "zeros1", "amount", "zeros1"], ["p5"], axis=0
        ),
        helper.make_node("Concat", ["p5"], ["pads_"], axis=0),
        helper.make_node("Concat", ["pads_", "zeros1"], ["pads"], axis=0),
        helper.make_node("Pad", ["h", "pads", "value"], ["y"]),
    ]
    inits = {"cls": np.arange(3, dtype=F32).reshape(1, 1, 3), "value": np.array(-2.0, F32)}
    return make_model(nodes, [("x", F32, ["batch", "seq", 3])], [("y", F32, None)], inits)


def script_pad_model() -> Any:
    """TorchScript's F.pad(x, (0, 0, 0, (4 - seq % 4) % 4)): its pads as (begin, end) pairs,
    reversed and transposed (a 2-D shape of dims), then flattened."""
    nodes = [
        shape_dims("x", 1, 2, "s"),
        _c("four", [4]),
        helper.make_node("Mod", ["s", "four"], ["r"]),
        helper.make_node("Sub", ["four", "r"], ["f"]),
        helper.make_node("Mod", ["f", "four"], ["amount"]),
        _c("zeros3", [0, 0, 0]),
        helper.make_node("Concat", ["zeros3", "amount", "zeros2"], ["p6"], axis=0),
        _c("pairs", [-1, 2]),
        helper.make_node("Reshape", ["p6", "pairs"], ["p2"]),
        _c("start", [-1]),
        _c("end", [-(2**63) + 1]),
        _c("axis0", [0]),
        helper.make_node("Slice", ["p2", "start", "end", "axis0", "start"], ["rev"]),
        helper.make_node("Transpose", ["rev"], ["t"], perm=[1, 0]),
        _c("flat", [-1]),
        helper.make_node("Reshape", ["t", "flat"], ["pads"]),
        helper.make_node("Cast", ["pads"], ["pads64"], to=7),
        helper.make_node("Pad", ["x", "pads64"], ["y"]),
    ]
    inits = {"zeros2": np.zeros(2, I64)}
    return make_model(nodes, [("x", F32, [2, "seq", 3])], [("y", F32, None)], inits)


def slice_start_model() -> Any:
    """x[seq // 2 :] and x[-3:] of an axis of seq: symbolic starts, added at run time."""
    nodes = [
        shape_dims("x", 1, 2, "seq"),
        _c("two", [2]),
        _c("end", [INT_MAX]),
        _c("minus3", [-3]),
        _c("axis1", [1]),
        helper.make_node("Div", ["seq", "two"], ["half"]),
        helper.make_node("Slice", ["x", "half", "end", "axis1"], ["a"], name="tail"),
        helper.make_node("Slice", ["x", "minus3", "end", "axis1"], ["b"]),
    ]
    return make_model(nodes, [("x", F32, [2, "seq"])], [("a", F32, None), ("b", F32, None)])


MODELS = {
    "expand_where": (expand_where_model, lambda s: {"x": (3, s)}),
    "slice_table": (slice_table_model, lambda s: {"x": (1, s)}),
    "slice_axis": (slice_axis_model, lambda s: {"x": (2, s)}),
    "max_reshape": (max_reshape_model, lambda s: {"x": (2, s, 8)}),
    "dims_as_data": (dims_as_data_model, lambda s: {"x": (3, s), "idx": (2,)}),
    "tile_pad": (tile_pad_model, lambda s: {"x": (2, s, 3)}),
    "script_pad": (script_pad_model, lambda s: {"x": (2, s, 3)}),
    "slice_start": (slice_start_model, lambda s: {"x": (2, s)}),
}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("backend", ["interp", "vm", "c"])
def test_folds_and_matches_onnxruntime_at_several_sizes(name: str, backend: str) -> None:
    if backend == "c" and CC is None:
        pytest.skip("no C compiler")
    make, shapes = MODELS[name]
    model = make()
    batched = ("expand_where", "max_reshape", "dims_as_data", "tile_pad")
    bounds = {"seq": 16, **({"batch": 4} if name in batched else {})}
    result = import_onnx(model, upper_bounds=bounds if backend == "c" else None)
    param = result.module.functions[0].params[0]
    assert "seq" in D.free_vars(param.type.shape[1])  # type: ignore[attr-defined]
    for seq in (1, 2, 5, 16):
        rng = np.random.default_rng(seq)
        feeds = {k: rng.standard_normal(v).astype(F32) for k, v in shapes(seq).items()}
        if name == "dims_as_data":
            feeds = {"x": rng.integers(-9, 9, shapes(seq)["x"]), "idx": np.array([-1, 0])}
        args = [feeds[i.name] for i in model.graph.input]
        dims = {"seq": seq, **({"batch": args[0].shape[0]} if "batch" in str(param.type) else {})}
        got = node_cases.RUNNERS[backend](result, args, dims)
        assert_matches(got, run_ort(model, feeds), f"{name} {backend} seq={seq}")


def test_a_slice_of_a_table_bounds_the_dim_the_run_checks() -> None:
    result = import_onnx(slice_table_model())
    assert result.module.functions[0].upper_bounds() == {"seq": 16}
    assert any("seq is at most 16" in n and "'positions'" in n for n in result.notes)
    with pytest.raises(Exception, match="seq"):
        node_cases.RUNNERS["vm"](result, [np.zeros((1, 17), F32)], {"seq": 17})


def test_a_smaller_bound_given_is_kept() -> None:
    result = import_onnx(slice_table_model(), upper_bounds={"seq": 8})
    assert result.module.functions[0].upper_bounds() == {"seq": 8}


def test_a_comparison_that_depends_on_a_dims_value_is_refused() -> None:
    nodes = [
        shape_dims("x", 0, 1, "s"),
        _c("four", [4]),
        helper.make_node("Equal", ["s", "four"], ["eq"], name="is_four"),
        helper.make_node("Where", ["eq", "four", "s"], ["t"]),
        helper.make_node("Reshape", ["x", "t"], ["y"]),
    ]
    model = make_model(nodes, [("x", F32, ["seq"])], [("y", F32, None)])
    with pytest.raises(RxError, match="'is_four' \\(Equal\\): it compares the dim seq with 4"):
        import_onnx(model)
    assert import_onnx(model, input_shapes={"x": [4]}).module  # static: it folds


def test_a_start_of_either_sign_is_refused() -> None:
    """seq - 3 is negative (read from the end) for seq < 3 and not for larger seq."""
    nodes = [
        shape_dims("x", 0, 1, "seq"),
        _c("minus3", [-3]),
        _c("end", [INT_MAX]),
        helper.make_node("Add", ["seq", "minus3"], ["s3"]),
        helper.make_node("Slice", ["x", "s3", "end"], ["y"], name="tail"),
    ]
    model = make_model(nodes, [("x", F32, ["seq"])], [("y", F32, None)])
    with pytest.raises(RxError, match="'tail' \\(Slice\\): its start seq - 3 may be negative"):
        import_onnx(model)
    assert import_onnx(model, upper_bounds={"seq": 2}).module  # then it is: from the end


def test_tiling_a_longer_axis_a_symbolic_number_of_times_is_refused() -> None:
    nodes = [
        shape_dims("x", 0, 1, "b"),
        helper.make_node("Tile", ["x", "b"], ["y"], name="tile_it"),
    ]
    model = make_model(nodes, [("x", F32, ["n"])], [("y", F32, None)])
    with pytest.raises(RxError, match="'tile_it' \\(Tile\\): it repeats axis 0 \\(of length n\\)"):
        import_onnx(model)


def test_a_shape_from_dims_that_folding_does_not_reach_says_so() -> None:
    """ReduceMax of a shape is not folded: computed at run time, then refused as such."""
    nodes = [
        shape_dims("x", 0, 1, "s"),
        helper.make_node("ReduceMax", ["s"], ["m"], keepdims=1),
        _c("zeros", [0]),
        helper.make_node("Concat", ["zeros", "m"], ["pads"], axis=0),
        helper.make_node("Pad", ["x", "pads"], ["y"], name="pad_it"),
    ]
    model = make_model(nodes, [("x", F32, ["n"])], [("y", F32, None)])
    message = str(pytest.raises(RxError, import_onnx, model).value)
    assert "'pad_it' (Pad): the pads input is computed from the input's dims" in message
    assert "tensor values" not in message


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    a=st.integers(-3, 3),
    b=st.integers(-3, 3),
    c=st.integers(-3, 3),
    d=st.integers(-3, 3),
    form=st.sampled_from(["n", "n / 2", "n % 3", "(n + 1) / 4 * 2"]),
    bound=st.one_of(st.none(), st.integers(1, 40)),
)
def test_what_prove_le_proves_holds_at_every_allowed_value(a, b, c, d, form, bound) -> None:
    """prove_le(x, y) (x affine in seq, y quasi-affine: floor halves, remainders) implies
    x <= y for every seq in [1, bound] (checked up to 200 without a bound)."""
    seq = D.Sym("seq")
    terms = {
        "n": seq,
        "n / 2": D.BinOp("/", seq, 2),
        "n % 3": D.BinOp("%", seq, 3),
        "(n + 1) / 4 * 2": D.BinOp("*", D.BinOp("/", D.add(seq, 1), 4), 2),
    }
    x = D.simplify(D.add(D.mul(a, seq), b))
    y = D.simplify(D.add(D.add(D.mul(c, terms[form]), d), D.mul(b, seq)))
    bounds = {"seq": bound} if bound else {}
    if prove_le(x, y, bounds):
        for n in range(1, (bound or 200) + 1):
            assert D.evaluate(x, {"seq": n}) <= D.evaluate(y, {"seq": n}), (x, y, n)

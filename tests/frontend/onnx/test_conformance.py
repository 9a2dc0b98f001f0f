"""The onnx package's node tests (node_cases.py): a fixed sample passes on the interpreter and
the VM (a few on C too), no case ends in an internal error and none computes a wrong result
(all cases, on the interpreter). benchmarks/onnx_conformance.py prints the whole table."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.backend.c.cbuild import needs_cc
from tests.frontend.onnx.node_cases import (
    Outcome,
    all_cases,
    bind_inputs,
    refusal_reason,
    run_case,
)

pytest.importorskip("onnx")

SAMPLE = (
    "test_abs",
    "test_add_bcast",
    "test_averagepool_2d_pads_count_include_pad",
    "test_basic_conv_with_padding",
    "test_batchnorm_epsilon",
    "test_cast_FLOAT_to_DOUBLE",
    "test_castlike_FLOAT_to_DOUBLE",
    "test_clip_min_greater_than_max",
    "test_constantofshape_int_zeros",
    "test_dropout_default_mask",
    "test_expand_dim_changed",
    "test_gather_negative_indices",
    "test_identity",
    "test_reduce_max_empty_set",
    "test_reshape_zero_dim",
    "test_shape_start_1",
    "test_size",
    "test_squeeze_negative_axes",
    "test_transpose_default",
    "test_unsqueeze_two_axes",
    "test_clip_default_int8_inbounds",
    "test_concat_3d_axis_negative_1",
    "test_conv_with_autopad_same",
    "test_div_bcast",
    "test_dropout_default",
    "test_erf",
    "test_gather_2d_indices",
    "test_gelu_default_2",
    "test_gemm_all_attributes",
    "test_globalaveragepool_precomputed",
    "test_leakyrelu_default",
    "test_lrn",
    "test_matmul_1d_3d",
    "test_max_int64",
    "test_maxpool_2d_ceil",
    "test_maxpool_2d_same_upper",
    "test_min_float16",
    "test_mul_example",
    "test_pow_bcast_array",
    "test_reduce_max_bool_inputs",
    "test_reduce_mean_do_not_keepdims_example",
    "test_reduce_sum_default_axes_keepdims_random",
    "test_relu",
    "test_slice_neg_steps",
    "test_softmax_axis_0",
    "test_softmax_default_axis",
    "test_split_1d_uneven_split_opset18",
    "test_sqrt_example",
    "test_sub_bcast",
    "test_sum_one_input",
)
"""Cases that pass on the interpreter and the VM (a test of each op the importer had first,
and of the versions and edge cases the converters follow)."""

SAMPLE_C = (
    "test_castlike_FLOAT_to_DOUBLE",
    "test_expand_dim_changed",
    "test_averagepool_2d_pads_count_include_pad",
    "test_gemm_all_attributes",
    "test_maxpool_2d_same_upper",
    "test_reduce_sum_default_axes_keepdims_random",
    "test_slice_neg_steps",
    "test_softmax_axis_0",
)
"""Of those, the ones also built and run with the C backend."""


@pytest.fixture(scope="module", autouse=True)
def _one_worker() -> None:
    """The module's tests share the cached cases and outcomes below: a module-scoped fixture
    puts them on one xdist worker (tests/conftest.py), so they are collected and run once."""


@functools.lru_cache(maxsize=1)
def _cases() -> dict[str, Any]:
    return {c.name: c for c in all_cases()}


@functools.lru_cache(maxsize=1)
def _interp_outcomes() -> tuple[Outcome, ...]:
    return tuple(run_case(c, ("interp",)) for c in _cases().values())


@pytest.mark.parametrize("name", SAMPLE)
def test_sample_case_passes_on_the_interpreter_and_the_vm(name: str) -> None:
    outcome = run_case(_cases()[name], ("interp", "vm"))
    assert outcome.status == "passed", outcome


@needs_cc
@pytest.mark.parametrize("name", SAMPLE_C)
def test_sample_case_passes_on_c(name: str) -> None:
    outcome = run_case(_cases()[name], ("c",))
    assert outcome.status == "passed", outcome


def test_no_case_is_an_internal_error() -> None:
    errors = [o for o in _interp_outcomes() if o.status == "error"]
    assert not errors, "\n".join(f"{o.case}: {o.message}" for o in errors)


def test_no_case_computes_a_wrong_result() -> None:
    wrong = [o for o in _interp_outcomes() if o.status == "wrong"]
    assert not wrong, "\n".join(f"{o.case}: {o.message}" for o in wrong)


def test_every_refusal_is_a_sentence_naming_what() -> None:
    """No refusal is a bare exception text: each is a sentence of some words."""
    short = [o for o in _interp_outcomes() if o.status == "refused" and len(o.reason.split()) < 4]
    assert not short, "\n".join(f"{o.case}: {o.message}" for o in short)


def test_the_collection_is_the_onnx_packages() -> None:
    assert len(_cases()) > 1000  # onnx 1.23 generates 1,884
    assert "test_relu" in _cases()


def test_refusal_reasons_group_cases() -> None:
    assert (
        refusal_reason("node #3 (Slice): starts must be known when the model is imported")
        == "Slice: starts must be known when the model is imported"
    )
    assert (
        refusal_reason("node 'n/a (b)' (Pad): mode 'wrap' is not supported")
        == "Pad: mode '…' is not supported"
    )
    assert refusal_reason(
        "the model uses 2 operators relaxc cannot import, in 3 nodes: Xor (nodes #0, #1); "
        "Abs (node 'a')"
    ) == ("no converter for Abs, Xor")


def test_inputs_needed_at_import_time_are_bound_to_their_values() -> None:
    case = _cases()["test_reduce_sum_do_not_keepdims_example"]
    model, data_sets, names = bind_inputs(case)  # type: ignore[misc]
    assert names == ("axes",)
    assert [i.name for i in model.graph.input] == ["data"]
    assert [t.name for t in model.graph.initializer] == ["axes"]
    assert len(data_sets[0][0]) == 1
    outcome = run_case(case, ("interp",))
    assert outcome.status == "passed" and outcome.bound == ("axes",), outcome


def test_a_case_with_only_data_inputs_binds_nothing() -> None:
    assert bind_inputs(_cases()["test_relu"]) is None


def test_resize_scales_and_roi_are_bound_but_float_data_is_not() -> None:
    case = _cases()["test_resize_tf_crop_and_resize"]
    model, _, names = bind_inputs(case)  # type: ignore[misc]
    assert set(names) == {"roi", "sizes"}
    assert [i.name for i in model.graph.input] == ["X"]
    assert bind_inputs(_cases()["test_add_bcast"]) is None  # Add's float B is data
    outcome = run_case(_cases()["test_resize_downsample_scales_cubic_antialias"], ("interp",))
    assert outcome.status == "passed" and outcome.bound == ("scales",), outcome


def test_the_benchmark_table_and_json_are_deterministic(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    import onnx_conformance as bench

    cases = [_cases()[n] for n in ("test_relu", "test_abs", "test_nonzero_example", "test_slice")]
    outcomes = bench.run_suite(cases, c_every=0)
    rows = bench.tabulate(outcomes)
    assert [r.op for r in rows] == ["Abs", "NonZero", "Relu", "Slice"]
    text = bench.markdown(rows, 3, "cmd")
    assert text.startswith(bench.BEGIN) and text.rstrip().endswith(bench.END)
    assert "| **total** | 4 | 3 | 0 | 0 | 1 | 0 | |" in text
    row = "| NonZero | 1 | 0 | 0 | 0 | 1 | 0 | no converter for NonZero (its output shape depends"
    assert row in text
    first = bench.to_json(outcomes, rows, 0)
    assert first == bench.to_json(bench.run_suite(cases, 0), rows, 0)


def test_docs_import_md_lists_the_converter_table() -> None:
    from relaxc.frontend.onnx.converters import (
        OPERATORS_BEGIN,
        OPERATORS_END,
        operator_list_markdown,
    )

    docs = (Path(__file__).resolve().parents[3] / "docs" / "import.md").read_text()
    assert docs.count(OPERATORS_BEGIN) == 1 and docs.count(OPERATORS_END) == 1
    listed = docs[docs.index(OPERATORS_BEGIN) : docs.index(OPERATORS_END) + len(OPERATORS_END)]
    assert listed + "\n" == operator_list_markdown(), (
        "docs/import.md's operator list is stale: replace it with "
        "relaxc.frontend.onnx.converters.operator_list_markdown()"
    )


def test_the_operator_list_is_every_converter_in_order() -> None:
    from relaxc.frontend.onnx.converters import operator_list_markdown

    text = operator_list_markdown({"Relu": print, "Add": print})
    assert text.splitlines()[1] == "Add, Relu."


def test_an_out_of_scope_operator_is_refused_saying_why() -> None:
    outcome = run_case(_cases()["test_if"], ("interp",))
    assert outcome.status == "refused"
    assert "If (control flow with subgraphs is not supported; node #0)" in outcome.message
    assert outcome.reason == "no converter for If (control flow with subgraphs is not supported)"


@pytest.mark.parametrize(
    ("name", "bound"),
    [
        ("test_onehot_with_axis", ("depth",)),  # a float depth (its values stay an input)
        ("test_range_float_type_positive_delta", ("start", "limit", "delta")),
        ("test_hannwindow_expanded", ("x",)),  # an integer scalar size, Cast first
    ],
)
def test_float_scalars_and_integer_sizes_are_bound(name: str, bound: tuple[str, ...]) -> None:
    outcome = run_case(_cases()[name], ("interp",))
    assert outcome.status == "passed" and outcome.bound == bound, outcome

"""Constructs relaxc does not have (if/else, match and type declarations, dataflow blocks,
Shape types) are refused with a sentence that says so, located at the construct's word
(issue 14); the words stay ordinary names everywhere else."""

from __future__ import annotations

import pytest

from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError

H = "fn @main(%x: Tensor[(2,), f32], %c: Tensor[(), bool]) -> Tensor[(2,), f32] {\n"
T = "  return %x\n}\n"

CASES = {
    # name: (text, (line, col, width), the start of the message)
    "if_expr": (
        H + "  %y = if %c { %x } else { exp(%x) }\n" + T,
        (2, 8, 2),
        "if/else is not supported",
    ),
    "if_paren_expr": (
        H + "  %y = if (%c) {\n    yield %x\n  }\n" + T,
        (2, 8, 2),
        "if/else is not supported",
    ),
    "if_stmt": (H + "  if %c {\n    %z = %x\n  }\n" + T, (2, 3, 2), "if/else is not supported"),
    "if_colon": (H + "  if %c:\n    %z = %x\n" + T, (2, 3, 2), "if/else is not supported"),
    "if_call_stmt": (H + "  if(%c) {\n  }\n" + T, (2, 3, 2), "if/else is not supported"),
    "else": (H + "  else {\n  }\n" + T, (2, 3, 4), "if/else is not supported"),
    "match": (H + "  %m = match %x {\n  }\n" + T, (2, 8, 5), "match is not supported"),
    "match_paren": (H + "  %m = match (%x) {\n  }\n" + T, (2, 8, 5), "match is not supported"),
    "type_decl": (
        "type List = Cons(Tensor[(), i32], List) | Nil\n" + H + T,
        (1, 1, 4),
        "type declarations and match are not supported",
    ),
    "dataflow": (
        H + "  dataflow {\n    %y = exp(%x)\n    output %y\n  }\n" + T,
        (2, 3, 8),
        "dataflow blocks are not supported",
    ),
    "dataflow_call": (
        H + "  dataflow() {\n  }\n" + T,
        (2, 3, 8),
        "dataflow blocks are not supported",
    ),
    "with_dataflow": (
        H + "  with R.dataflow():\n    %y = exp(%x)\n" + T,
        (2, 3, 4),
        "dataflow blocks are not supported",
    ),
    "shape_param": (
        "fn @main(%s: Shape[(n,)]) -> Tensor[(2,), f32] {\n" + T,
        (1, 14, 5),
        "Shape parameters are not supported",
    ),
    "shape_param_bare": (
        "fn @main(%a: Tensor[(16,), f32], %s: Shape) -> Tensor[(2,), f32] {\n" + T,
        (1, 38, 5),
        "Shape parameters are not supported",
    ),
    "r_shape_param": (
        'fn @main(%s: R.Shape(["n"])) -> Tensor[(2,), f32] {\n' + T,
        (1, 14, 7),
        "Shape parameters are not supported",
    ),
    "shape_return": (
        "fn @main(%x: Tensor[(2,), f32]) -> Shape {\n" + T,
        (1, 36, 5),
        "Shape types are not supported",
    ),
    "shape_annotation": (
        H + "  %s: Shape = shape_of(%x)\n" + T,
        (2, 7, 5),
        "Shape types are not supported",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_out_of_scope_construct_is_refused_at_it(case):
    text, (line, col, width), message = CASES[case]
    with pytest.raises(RxError) as info:
        parse_module(text, "m.rx")
    e = info.value
    assert e.message.startswith(message), e.message
    assert (e.loc.file, e.loc.line, e.loc.col, e.loc.width) == ("m.rx", line, col, width)


@pytest.mark.parametrize(
    "text",
    [
        H + "  %y = exp(%x\n" + T,  # a plain syntax error stays one
        H + "  %y = if(%x, 1 2)\n" + T,  # an op named `if` with a typo: not an if/else
    ],
)
def test_other_syntax_errors_keep_their_message(text):
    with pytest.raises(RxError) as info:
        parse_module(text, "m.rx")
    assert info.value.message.startswith("unexpected "), info.value.message


def test_the_words_are_still_names():
    # None of the words is a keyword: they still name ops, attributes and dtypes' places.
    m = parse_module(
        H + "  %y = if(%x, type=1, match=2)\n  %z = dataflow(%y)\n"
        "  %w = Shape(%z, else=true)\n" + T,
        "m.rx",
    )
    assert [s.value.op for s in m.functions[0].body] == ["if", "dataflow", "Shape"]

""".rx files that are hostile below the grammar: bytes that are not UTF-8, NUL bytes,
byte-order marks, CR and CRLF line endings, tabs and odd whitespace, very long lines and
names, deep nesting, huge, negative and zero dims, ranks past every limit.

Each case goes through ``check``, ``fmt --check``, ``build`` (-t ir and -t vm) and ``run``
in-process: a clean success or a clean error, never a crash or a hang, never a change to
the input, and a failed build leaves its output folder as it was. Some cases also state
what the answer must be (a CR-only file is the same program as its LF twin, ...).
"""

from __future__ import annotations

import pytest

from .harness import (
    SAMPLES,
    changed,
    check_problems,
    crash_problems,
    error_problems,
    invoke,
    report,
    snapshot,
)

MLP = (SAMPLES / "mlp.rx").read_text()
RELAY = (SAMPLES / "relay_memory.rx").read_text()
SMALL = "fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  %y = relu(%x)\n  return %y\n}\n"
BROKEN = MLP.replace("%a1 = relu(%h1)", "%a1 = relu(%zz)")  # an error on line 7


def _fn(
    params: str, body: str = "", ret: str = "Tensor[(1,), f32]", result: str = "%x", attrs: str = ""
) -> str:
    return f"fn @main({params}) -> {ret}{attrs} {{\n{body}  return {result}\n}}\n"


def _nested(open_: str, inner: str, close: str, depth: int) -> str:
    return open_ * depth + inner + close * depth


CASES: dict[str, bytes] = {
    # Encodings and bytes.
    "latin1_in_comment": MLP.replace("# Weights", "# Poids \xe9", 1).encode("latin-1"),
    "latin1_in_name": MLP.replace("%h1 =", "%h\xe91 =", 1).encode("latin-1"),
    "invalid_utf8_first_byte": b"\xff" + MLP.encode(),
    "truncated_utf8_at_end": MLP.encode() + b"\xe2\x82",
    "overlong_utf8": MLP.encode().replace(b"relu", b"re\xc0\xaflu", 1),
    "utf8_encoded_surrogate": MLP.encode().replace(b"# A", b"# \xed\xa0\x80 A", 1),
    "utf16_with_bom": MLP.encode("utf-16"),
    "utf32": MLP.encode("utf-32"),
    "nul_in_the_middle": MLP.encode().replace(b"dense", b"den\x00se", 1),
    "nul_at_the_end": MLP.encode() + b"\x00",
    "only_nul": b"\x00",
    "binary_garbage": bytes(range(256)) * 4,
    "control_characters": MLP.replace("%b1", "%b1\x01\x7f\x1b[2J", 1).encode(),
    "emoji_in_comment": ("# 😀 model\n" + MLP).encode(),
    "emoji_in_name": MLP.replace("%h1", "%h😀").encode(),
    "emoji_in_string": MLP.replace('"fc1.weight"', '"fc1.😀"').encode(),
    "empty": b"",
    "only_whitespace": b" \t\r\n\f\v \n",
    "only_a_comment": b"# nothing but a comment",
    # Byte-order marks.
    "bom": b"\xef\xbb\xbf" + MLP.encode(),
    "bom_twice": b"\xef\xbb\xbf\xef\xbb\xbf" + MLP.encode(),
    "bom_in_the_middle": MLP.replace("%h1 =", "\ufeff%h1 =", 1).encode(),
    "bom_then_error": b"\xef\xbb\xbf" + BROKEN.encode(),
    # Line endings and whitespace.
    "crlf": MLP.replace("\n", "\r\n").encode(),
    "crlf_error": BROKEN.replace("\n", "\r\n").encode(),
    "cr_only": MLP.replace("\n", "\r").encode(),
    "cr_only_error": BROKEN.replace("\n", "\r").encode(),
    "mixed_line_endings": MLP.replace("\n", "\r\n", 5).replace("\n", "\r", 3).encode(),
    "no_final_newline": MLP.rstrip("\n").encode(),
    "tabs": MLP.replace("  ", "\t").replace(" = ", "\t=\t").encode(),
    "tabs_error": BROKEN.replace("  ", "\t\t").encode(),
    "form_feed_and_vertical_tab": MLP.replace(" = ", "\f=\v", 3).encode(),
    "unicode_line_separator": MLP.replace(" = ", "\u2028=", 1).encode(),
    "no_break_space": MLP.replace(" = ", "\u00a0=", 1).encode(),
    "zero_width_space_in_op": MLP.replace("relu", "re\u200blu", 1).encode(),
    "right_to_left_override_in_comment": MLP.replace("# A", "# \u202e A", 1).encode(),
    # Lengths.
    "long_line_of_spaces": MLP.replace(
        "%h1 = dense", "%h1 =" + " " * 1_000_000 + "dense", 1
    ).encode(),
    "long_comment_line": ("#" + "x" * 1_000_000 + "\n" + MLP).encode(),
    "long_name": MLP.replace("%h1", "%" + "h" * 100_000).encode(),
    "long_string": MLP.replace('"fc1.weight"', '"' + "w" * 100_000 + '"', 1).encode(),
    "long_op_name": MLP.replace("relu", "r" * 100_000, 1).encode(),
    "error_at_the_end_of_a_long_line": (
        " " * 100_000 + "fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] { return %y }\n"
    ).encode(),
    "many_statements": (
        "fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  %a0 = relu(%x)\n"
        + "".join(f"  %a{i + 1} = add(%a{i}, %x)\n" for i in range(1000))
        + "  return %a1000\n}\n"
    ).encode(),
    "many_functions": "".join(
        f"fn @f{i}(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {{\n  return %x\n}}\n"
        for i in range(500)
    ).encode()
    + SMALL.encode(),
    "many_parameters": _fn(
        ", ".join(f"%p{i}: Tensor[(1,), f32]" for i in range(2000)), result="%p0"
    ).encode(),
    "long_integer_literal": _fn(f"%x: Tensor[({'9' * 5000},), f32]").encode(),
    # Brackets and nesting.
    "unbalanced_open": (MLP + "{{{{((((").encode(),
    "unbalanced_close": (MLP + "}}}}))))").encode(),
    "missing_close_brace": MLP.rstrip().rstrip("}").encode(),
    "nested_function": (MLP.rstrip().rstrip("}") + SMALL + "}\n").encode(),
    "deep_parentheses_in_a_dim": _fn(
        "%x: Tensor[(" + _nested("(", "1", ")", 3000) + ",), f32]"
    ).encode(),
    "deep_tuple_type": _fn("%x: " + _nested("Tuple[", "Tensor[(1,), f32]", "]", 3000)).encode(),
    "deep_tuple_type_60": _fn(
        "%x: " + _nested("Tuple[", "Tensor[(1,), f32]", "]", 60),
        ret=_nested("Tuple[", "Tensor[(1,), f32]", "]", 60),
    ).encode(),
    "deep_list_literal": _fn(
        "%x: Tensor[(1,), f32]", "  %c = const(" + _nested("[", "1.0", "]", 3000) + ", f32)\n"
    ).encode(),
    "deep_list_literal_40": _fn(
        "%x: Tensor[(1,), f32]", "  %c = const(" + _nested("[", "1.0", "]", 40) + ", f32)\n"
    ).encode(),
    "deep_dict": _fn(
        "%x: Tensor[(1,), f32]", attrs=" attrs {a = " + _nested("{a = ", "1", "}", 3000) + "}"
    ).encode(),
    "deep_tuple_value": _fn(
        "%x: Tensor[(1,), f32]", "  %c = reshape(%x, " + _nested("(1, ", "1", ")", 3000) + ")\n"
    ).encode(),
    "deep_unary_minus": _fn("%x: Tensor[(" + "-" * 20_000 + "1,), f32]").encode(),
    "long_sum_in_a_dim": _fn(
        "%n: Tensor[(n,), f32], %x: Tensor[(" + " + ".join(["n"] * 3000) + ",), f32]",
        result="%n",
        ret="Tensor[(n,), f32]",
    ).encode(),
    "deep_sum_in_a_dim_60": _fn(
        "%n: Tensor[(n,), f32], %x: Tensor[(n" + " + 1" * 60 + ",), f32]",
        result="%n",
        ret="Tensor[(n,), f32]",
        attrs=" attrs {upper_bounds = {n = 4}}",
    ).encode(),
    "exponential_dim": _fn(
        ", ".join(f"%a{i}: Tensor[(a{i},), f32], %b{i}: Tensor[(b{i},), f32]" for i in range(14))
        + ", %x: Tensor[("
        + " * ".join(f"(a{i} + b{i})" for i in range(14))
        + ",), f32]",
        result="%a0",
        ret="Tensor[(a0,), f32]",
    ).encode(),
    # Sizes.
    "dim_2_to_the_62": _fn(
        "%x: Tensor[(4611686018427387904,), f32]", ret="Tensor[(4611686018427387904,), f32]"
    ).encode(),
    "dims_whose_product_overflows": _fn(
        "%x: Tensor[(4611686018427387904, 4611686018427387904), f32]",
        ret="Tensor[(4611686018427387904, 4611686018427387904), f32]",
    ).encode(),
    "dim_2_to_the_64": _fn("%x: Tensor[(18446744073709551616,), f32]").encode(),
    "negative_dim": _fn("%x: Tensor[(-1,), f32]").encode(),
    "zero_dim": _fn(
        "%x: Tensor[(0, 3), f32]",
        "  %y = relu(%x)\n  %z = softmax(%y, axis=-1)\n",
        ret="Tensor[(0, 3), f32]",
        result="%z",
    ).encode(),
    "zero_dim_dense": _fn(
        "%x: Tensor[(0, 3), f32], %w: Tensor[(0, 3), f32]",
        "  %y = dense(%x, %w)\n",
        ret="Tensor[(0, 0), f32]",
        result="%y",
    ).encode(),
    "upper_bound_2_to_the_62": RELAY.replace("n = 64", "n = 4611686018427387904").encode(),
    "upper_bound_zero": RELAY.replace("n = 64", "n = 0").encode(),
    "upper_bound_negative": RELAY.replace("n = 64", "n = -1").encode(),
    "dim_below_zero_at_the_bound": _fn(
        "%n: Tensor[(n,), f32], %x: Tensor[(n - 5,), f32]",
        result="%n",
        ret="Tensor[(n,), f32]",
        attrs=" attrs {upper_bounds = {n = 3}}",
    ).encode(),
    "storage_of_2_to_the_62_bytes": _fn(
        "%x: Tensor[(1,), f32]", "  %s = memory.alloc_storage(4611686018427387904)\n"
    ).encode(),
    "storage_of_2_to_the_64_bytes": _fn(
        "%x: Tensor[(1,), f32]", "  %s = memory.alloc_storage(18446744073709551616)\n"
    ).encode(),
    "reshape_to_huge": _fn(
        "%x: Tensor[(1,), f32]", "  %y = reshape(%x, (9223372036854775808, 0))\n"
    ).encode(),
    "dtype_in_a_dim": RELAY.replace("(n * 10,))", "(u32 * 10,))").encode(),
    "inf_in_a_dim": RELAY.replace("(n * 10,))", "(inf * 10,))").encode(),
    "rank_32": _fn(
        "%x: Tensor[(" + ", ".join(["1"] * 32) + "), f32]",
        "  %y = relu(%x)\n",
        ret="Tensor[(" + ", ".join(["1"] * 32) + "), f32]",
        result="%y",
    ).encode(),
    "rank_33": _fn(
        "%x: Tensor[(" + ", ".join(["1"] * 33) + "), f32]",
        "  %y = relu(%x)\n",
        ret="Tensor[(" + ", ".join(["1"] * 33) + "), f32]",
        result="%y",
    ).encode(),
    "rank_65": _fn(
        "%x: Tensor[(" + ", ".join(["1"] * 65) + "), f32]",
        "  %y = relu(%x)\n",
        ret="Tensor[(" + ", ".join(["1"] * 65) + "), f32]",
        result="%y",
    ).encode(),
    "rank_1000": _fn("%x: Tensor[(" + ", ".join(["1"] * 1000) + "), f32]").encode(),
    "expand_dims_past_64": _fn(
        "%x: Tensor[(" + ", ".join(["1"] * 64) + "), f32]",
        "  %y = expand_dims(%x, 0)\n  %z = relu(%y)\n",
        ret="Tensor[(" + ", ".join(["1"] * 65) + "), f32]",
        result="%z",
    ).encode(),
}


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_the_cases_are_many() -> None:
    assert len(CASES) >= 80


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_text(tmp_path, name: str) -> None:
    data = CASES[name]
    path = tmp_path / "model.rx"
    path.write_bytes(data)
    if name.startswith("mlp") or b"fc1.weight" in data:
        (tmp_path / "model.npz").write_bytes((SAMPLES / "mlp.npz").read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.rxb").write_bytes(b"stale")
    failures = []
    o = invoke("check", path, timeout=60)
    failures += [f"check: {p}\n{o}" for p in check_problems(o, path, _text(data))]
    for args in (
        ("fmt", "--check", path),
        ("build", path, "-t", "ir", "-o", out / "model.lowered.rx", "-q"),
        ("build", path, "-o", out / "model.rxb", "-q"),
        ("run", path, "-o", out / "y.npz"),
    ):
        before = snapshot(out)
        r = invoke(*args, timeout=60)
        problems = crash_problems(r)
        if r.code == 1 and not (args[0] == "fmt" and r.stderr == f"{path}: would reformat\n"):
            problems += error_problems(r.stderr, path, _text(data))
            if changed(before, snapshot(out)):
                problems.append(
                    "a failed command changed the output folder: "
                    f"{sorted(changed(before, snapshot(out)))}"
                )
        # check validates the weights as the vm build uses them (issue 18); build -t ir
        # needs none, so only the vm build must refuse what check refused
        if args[0] == "build" and "-t" not in args and r.code == 0 and o.code != 0:
            problems.append("build accepted what check refused")
        failures += [f"{args[0]}: {p}\n{r}" for p in problems]
    if path.read_bytes() != data:
        failures.append("the input file was changed")
    report(failures, f"commands on {name}")


# ---------------------------------------------------------------------------------------
# What some of them must say


def _check(tmp_path, data: bytes):
    path = tmp_path / "model.rx"
    path.write_bytes(data)
    (tmp_path / "model.npz").write_bytes((SAMPLES / "mlp.npz").read_bytes())
    return path, invoke("check", path)


@pytest.mark.parametrize(
    "name",
    [
        "crlf",
        "cr_only",
        "mixed_line_endings",
        "bom",
        "tabs",
        "no_final_newline",
        "form_feed_and_vertical_tab",
        "emoji_in_comment",
        "long_line_of_spaces",
        "long_comment_line",
    ],
)
def test_the_same_program_whatever_the_layout(tmp_path, name: str) -> None:
    path, o = _check(tmp_path, CASES[name])
    assert o.code == 0, o
    assert "ok (1 function(s), 12 statement(s)" in o.stdout


@pytest.mark.parametrize("name", ["crlf_error", "cr_only_error", "bom_then_error"])
def test_an_error_is_on_the_same_line_whatever_the_line_endings(tmp_path, name: str) -> None:
    path, o = _check(tmp_path, CASES[name])
    assert o.code == 1, o
    assert o.stderr.startswith(
        f"{path}:7:14: error: %zz is not defined\n    %a1 = relu(%zz)\n               ^^^"
    ), o


def test_a_tab_counts_as_one_column(tmp_path) -> None:
    path, o = _check(tmp_path, CASES["tabs_error"])
    assert o.stderr.startswith(
        f"{path}:7:14: error: %zz is not defined\n    %a1 = relu(%zz)\n               ^^^"
    ), o


@pytest.mark.parametrize(
    "name, needle",
    [
        ("latin1_in_comment", ":2:9: error: not UTF-8 text: invalid byte 0xe9"),
        ("invalid_utf8_first_byte", ":1:1: error: not UTF-8 text: invalid byte 0xff"),
        ("utf8_encoded_surrogate", ":1:3: error: not UTF-8 text: invalid byte 0xed"),
        ("nul_in_the_middle", "is a binary file, not .rx text (it contains NUL bytes)"),
        ("utf16_with_bom", "is a binary file, not .rx text (it contains NUL bytes)"),
        ("bom_twice", ":1:1: error: unexpected character U+FEFF"),
        ("zero_width_space_in_op", ":7:11: error: unexpected character U+200B"),
        ("dtype_in_a_dim", ":14:22: error: 'u32' is a dtype, not a dimension"),
        ("inf_in_a_dim", ":14:22: error: 'inf' is a number, not a dimension"),
        ("deep_tuple_type", ":1:199: error: brackets nest 3,003 levels deep (level 32 opens here)"),
        (
            "deep_list_literal",
            ":2:43: error: brackets nest 3,002 levels deep (level 32 opens here)",
        ),
    ],
)
def test_what_the_error_says(tmp_path, name: str, needle: str) -> None:
    path, o = _check(tmp_path, CASES[name])
    assert o.code == 1, o
    assert needle in o.stderr.split("\n")[0], o


def test_a_line_that_is_not_utf8_is_shown_with_a_caret(tmp_path) -> None:
    path, o = _check(tmp_path, CASES["latin1_in_name"])
    lines = o.stderr.split("\n")
    assert lines[0] == f"{path}:6:5: error: not UTF-8 text: invalid byte 0xe9", o
    assert lines[1] == "    %h\ufffd1 = dense(%x, %w1, %b1)"
    assert lines[2] == "      ^"

"""The verifier (:mod:`relaxc.ir.verifier`): what it accepts, with the types it infers, and
what it rejects, each error at the line and column of the offending token with its message."""

from __future__ import annotations

import dataclasses

import pytest

from relaxc.frontend.parser import parse_module
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Bind, Module
from relaxc.ir.types import OBJECT, STORAGE, TensorType, TupleType
from relaxc.ir.verifier import verify_function, verify_module

T4 = "Tensor[(4,), f32]"


def verify(text: str) -> dict:
    return verify_module(parse_module(text, "v.rx"))


def rejection(module: Module | str) -> RxError:
    """The error the verifier raises for ``module`` (which must have a location in v.rx)."""
    if isinstance(module, str):
        module = parse_module(module, "v.rx")
    with pytest.raises(RxError) as info:
        verify_module(module)
    err = info.value
    assert err.loc is not None, f"no location for: {err.message}"
    assert err.loc.file == "v.rx"
    return err


# -- accepted ---------------------------------------------------------------------------


def test_accepts_the_design_example_and_infers_every_type() -> None:
    types = verify("""
fn @fused_add_subtract(%p0: Tensor[(m, 10), f32], %p1: Tensor[(m, 10), f32]) -> Tensor[(m, 10), f32]
    attrs {primitive = true} {
  %0 = add(%p0, %p0)
  %1 = subtract(%0, %p1)
  return %1
}

fn @main(%x: Tensor[(n, 10), f32], %y: Tensor[(n, 10), f32]) -> Tensor[(n, 10), f32]
    attrs {upper_bounds = {n = 64}} {
  %x1 = call @fused_add_subtract(%x, %y)
  %r = reshape(%x1, (n * 10,))
  %t = (%x1, %r)
  %u = %t.1
  return %x1
}""")
    n = D.Sym("n")
    assert set(types) == {"fused_add_subtract", "main"}
    assert types["fused_add_subtract"]["1"] == TensorType((D.Sym("m"), 10), "f32")
    main = types["main"]
    assert main["x1"] == TensorType((n, 10), "f32")  # the callee's dims bound at the call site
    assert main["r"] == TensorType((D.BinOp("*", n, 10),), "f32")
    assert main["t"] == TupleType((main["x1"], main["r"]))
    assert main["u"] == main["r"]
    assert list(main) == ["x", "y", "x1", "r", "t", "u"]


def test_accepts_explicit_memory_with_invoke_and_kills() -> None:
    types = verify(f"""
fn @main(%x: {T4}) -> {T4} {{
  %s = memory.alloc_storage(16)
  %y = memory.alloc_tensor(%s, 0, (4,), f32)
  invoke exp(%x) outs (%y)
  %s2 = memory.alloc_storage(16, external=true)
  %z = memory.alloc_tensor(%s2, 0, (4,), f32)
  invoke add(%x, %y) outs (%z)
  memory.kill_tensor(%y)
  memory.kill_storage(%s)
  return %z
}}""")
    assert types["main"]["s"] == STORAGE
    assert types["main"]["y"] == TensorType((4,), "f32")


def test_accepts_packed_calls_and_annotated_runtime_results() -> None:
    types = verify(f"""
fn @main(%x: {T4}) -> {T4} {{
  %a = exp(%x)
  %r: Tensor[(2, 2), f32] = call_packed("vm.builtin.reshape", %a, (2, 2))
  %o = call_packed("relaxc.copy", %a, %x)
  %h = tir.stack_alloca("array", 1)
  tir.struct_set(%h, 0, "data", %a)
  return %a
}}""")
    assert types["main"]["r"] == TensorType(
        (2, 2), "f32"
    )  # a runtime call's type is its annotation
    assert types["main"]["o"] == OBJECT and types["main"]["h"] == OBJECT


def test_kill_checking_can_be_left_out() -> None:
    text = f"""
fn @main(%x: {T4}) -> {T4} {{
  %y = exp(%x)
  memory.kill_tensor(%x)
  return %y
}}"""
    module = parse_module(text, "v.rx")
    assert verify_module(module, kills=False)["main"]["y"] == TensorType((4,), "f32")
    with pytest.raises(RxError):
        verify_module(module)


def test_verify_function_checks_one_function_against_its_module() -> None:
    module = parse_module(
        f"""
fn @g(%x: {T4}) -> {T4} {{
  return %x
}}

fn @main(%x: {T4}) -> {T4} {{
  %y = call @g(%x)
  return %y
}}""",
        "v.rx",
    )
    main = module.get("main")
    assert main is not None
    assert verify_function(main, module) == {
        "x": TensorType((4,), "f32"),
        "y": TensorType((4,), "f32"),
    }


# -- rejected ---------------------------------------------------------------------------

# name: (module text, line, column, the text the error points at, message)
REJECTED: dict[str, tuple[str, int, int, str, str]] = {
    "twice_fn": (
        """\
fn @f(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  return %x
}

fn @f(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  return %x
}
""",
        5,
        4,
        "@f",
        "function @f is defined twice (first defined at line 1)",
    ),
    "recursion": (
        """\
fn @a(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = call @b(%x)
  return %y
}

fn @b(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = call @a(%x)
  return %y
}
""",
        7,
        13,
        "@a",
        "recursive call: @a -> @b -> @a (relaxc programs have no recursion)",
    ),
    "undefined": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = exp(%xx)
  return %y
}
""",
        2,
        12,
        "%xx",
        "%xx is not defined; did you mean 'x'?",
    ),
    "defined_twice": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = exp(%x)
  %y = tanh(%x)
  return %y
}
""",
        3,
        3,
        "%y",
        "%y is already defined (first defined at line 2); every value is assigned once",
    ),
    "unknown_op": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = exq(%x)
  return %y
}
""",
        2,
        8,
        "exq",
        "unknown op 'exq'; did you mean 'exp'?",
    ),
    "op_is_function": (
        """\
fn @g(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  return %x
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = g(%x)
  return %y
}
""",
        6,
        8,
        "g",
        "unknown op 'g'; to call function @g write 'call @g(...)'",
    ),
    "annotation": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y: Tensor[(4,), i32] = exp(%x)
  return %x
}
""",
        2,
        3,
        "%y",
        "%y is declared Tensor[(4,), i32] but its value has type Tensor[(4,), f32]",
    ),
    "return_type": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(2, 2), f32] {
  %y = exp(%x)
  return %y
}
""",
        3,
        10,
        "%y",
        "@main returns Tensor[(4,), f32] but is declared to return Tensor[(2, 2), f32]",
    ),
    "primitive_calls": (
        """\
fn @g(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  return %x
}

fn @k(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {primitive = true} {
  %y = call @g(%x)
  return %y
}
""",
        6,
        13,
        "@g",
        "primitive function @k may not call other functions",
    ),
    "primitive_memory": (
        """\
fn @k(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {primitive = true} {
  %s = memory.alloc_storage(16)
  return %x
}
""",
        2,
        8,
        "memory.alloc_storage",
        "primitive function @k may only contain kernel ops, not memory.alloc_storage",
    ),
    "project_not_tuple": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = %x.0
  return %y
}
""",
        2,
        8,
        "%x",
        "%x is not a tuple; it has type Tensor[(4,), f32]",
    ),
    "project_range": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %t = (%x, %x)
  %y = %t.2
  return %y
}
""",
        3,
        8,
        "%t",
        "tuple index 2 is out of range for %t with 2 field(s)",
    ),
    "arg_count": (
        """\
fn @g(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  return %x
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = call @g(%x, %x)
  return %y
}
""",
        6,
        13,
        "@g",
        "@g takes 1 argument(s), got 2",
    ),
    "arg_type": (
        """\
fn @g(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  return %x
}

fn @main(%x: Tensor[(8,), f32]) -> Tensor[(4,), f32] {
  %y = call @g(%x)
  return %y
}
""",
        6,
        16,
        "%x",
        (
            "argument %x of @g has type Tensor[(8,), f32], but parameter %x is Tensor[(4,), f32]: "
            "dimension 8 does not match 4"
        ),
    ),
    "unknown_attr": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {primitve = true} {
  return %x
}
""",
        1,
        61,
        "primitve",
        "unknown function attribute 'primitve'; did you mean 'primitive'?",
    ),
    "upper_bounds": (
        """\
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] attrs {upper_bounds = {m = 8}} {
  return %x
}
""",
        1,
        81,
        "m",
        "upper_bounds names 'm', which is not a symbolic dim of @main",
    ),
    "unbound_dim": (
        """\
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  %y: Tensor[(m, 4), f32] = exp(%x)
  return %x
}
""",
        2,
        3,
        "%y",
        "symbolic dim 'm' is not bound by any parameter of @main",
    ),
    "dim_not_alone": (
        """\
fn @main(%x: Tensor[(n * n,), f32]) -> Tensor[(n * n,), f32] {
  return %x
}
""",
        1,
        10,
        "%x",
        (
            "symbolic dim 'n' of %x must also appear alone as a dimension of some parameter, "
            "or in one of the form a * n + b, so its value can be read from the inputs"
        ),
    ),
    "kill_param": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = exp(%x)
  memory.kill_tensor(%x)
  return %y
}
""",
        3,
        22,
        "%x",
        "memory.kill_tensor(%x) frees memory of a parameter (%x), which this function does not own",
    ),
    "invoke_nonprimitive": (
        """\
fn @g(%x: Tensor[(4,), f32], %o: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  return %x
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = memory.alloc_storage(16)
  %y = memory.alloc_tensor(%s, 0, (4,), f32)
  invoke @g(%x) outs (%y)
  return %y
}
""",
        8,
        3,
        "invoke",
        "invoke needs a primitive function; @g is not marked primitive (use call @g(...) instead)",
    ),
    "invoke_out_type": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(8,), f32] {
  %s = memory.alloc_storage(32)
  %y = memory.alloc_tensor(%s, 0, (8,), f32)
  invoke exp(%x) outs (%y)
  return %y
}
""",
        4,
        24,
        "%y",
        "output %y has type Tensor[(8,), f32] but the kernel produces Tensor[(4,), f32]",
    ),
    "nothing_bound": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = exp(%x)
  %k = memory.kill_tensor(%y)
  return %x
}
""",
        3,
        3,
        "%k",
        "memory.kill_tensor returns nothing; write it as a statement without '%k ='",
    ),
    "too_big": (
        """\
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y: Tensor[(1048576, 1048576), f32] = const("w")
  return %x
}
""",
        2,
        3,
        "%y",
        (
            "%y: tensor Tensor[(1048576, 1048576), f32] would take 4,398,046,511,104 bytes, "
            "more than the 1,099,511,627,776-byte limit"
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rejects_with_a_located_message(name: str) -> None:
    text, line, col, token, message = REJECTED[name]
    err = rejection(text)
    assert (err.loc.line, err.loc.col, err.message) == (line, col, message)
    assert text.split("\n")[line - 1][col - 1 : col - 1 + err.loc.width] == token


def test_notes_list_the_alternatives() -> None:
    err = rejection(REJECTED["unknown_attr"][0])
    assert err.notes == (
        "known attributes: io_in_arena, onnx_inputs, onnx_outputs, order_peak_chosen, "
        "order_peak_written, outputs, planned, primitive, scratch, upper_bounds, workspace",
    )
    err = rejection(REJECTED["upper_bounds"][0])
    assert err.notes == ("symbolic dims of @main: n",)


# -- the kill checker, run by the verifier ----------------------------------------------

KILLS = f"""\
fn @main(%x: {T4}) -> {T4} {{
  %y = exp(%x)
  %v = reshape(%y, (2, 2))
  %w = reshape(%v, (4,))
  %z = exp(%w)
  KILL
  return %z
}}
"""


@pytest.mark.parametrize(
    "kills, line, col, message",
    [
        # a use of a view whose memory was freed through its source
        (
            "memory.kill_tensor(%y)\n  %u = exp(%w)",
            7,
            12,
            "%w is used after its memory was freed by the kill of %y at line 6",
        ),
        # a use of the very name that was killed
        (
            "memory.kill_tensor(%w)\n  %u = exp(%w)",
            7,
            12,
            "%w is used after it was killed at line 6",
        ),
        (
            "memory.kill_tensor(%y)\n  memory.kill_tensor(%y)",
            7,
            22,
            "%y is killed twice (first at line 6)",
        ),
        (
            "memory.kill_tensor(%z)",
            6,
            22,
            "memory.kill_tensor(%z) frees memory that the function returns",
        ),
    ],
)
def test_kill_checker_errors(kills: str, line: int, col: int, message: str) -> None:
    err = rejection(KILLS.replace("KILL", kills))
    assert (err.loc.line, err.loc.col, err.message) == (line, col, message)


def test_kill_checker_accepts_kills_after_the_last_use_of_every_alias() -> None:
    verify(
        KILLS.replace(
            "KILL", "memory.kill_tensor(%w)\n  memory.kill_tensor(%v)\n  memory.kill_tensor(%y)"
        )
    )
    # Killing a name whose memory is already freed only releases the name.
    verify(KILLS.replace("KILL", "memory.kill_tensor(%y)\n  memory.kill_tensor(%v)"))


def test_a_constant_is_not_the_function_s_to_free() -> None:
    err = rejection(f"""\
fn @main(%x: {T4}) -> {T4} {{
  %k = const([1.0, 2.0, 3.0, 4.0])
  %y = add(%x, %k)
  memory.kill_tensor(%k)
  return %y
}}
""")
    assert (err.loc.line, err.loc.col, err.message) == (
        4,
        22,
        "memory.kill_tensor(%k) frees memory of a constant (%k), which this function does not own",
    )


# -- IR the parser cannot write, built by hand ------------------------------------------

INVOKE = f"""\
fn @main(%x: {T4}) -> {T4} {{
  %s = memory.alloc_storage(16)
  %y = memory.alloc_tensor(%s, 0, (4,), f32)
  invoke exp(%x) outs (%y)
  return %y
}}
"""


def test_rejects_an_invoke_bound_to_a_name() -> None:
    module = parse_module(INVOKE, "v.rx")
    main = module.functions[0]
    effect = main.body[2]
    body = main.body[:2] + (Bind("z", None, effect.value, effect.loc),) + main.body[3:]
    err = rejection(dataclasses.replace(module, functions=(dataclasses.replace(main, body=body),)))
    assert (err.loc.line, err.loc.col, err.message) == (
        4,
        3,
        "invoke writes into its outs and returns nothing; write it as a statement",
    )


def test_rejects_an_invoke_used_as_the_return_value() -> None:
    module = parse_module(INVOKE, "v.rx")
    main = module.functions[0]
    err = rejection(
        dataclasses.replace(module, functions=(dataclasses.replace(main, ret=main.body[2].value),))
    )
    assert (err.loc.line, err.loc.col, err.message) == (
        4,
        3,
        "invoke returns nothing and cannot be used as a value",
    )

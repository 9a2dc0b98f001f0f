"""Direct tests of the alias analysis and the per-buffer liveness (:mod:`relaxc.ir.alias`).

Each test writes a small function, runs :func:`analyze_aliases` and :func:`buffer_liveness`
on it and asserts the exact result: the roots of every value, the kind of every root, the
storage of every carved tensor, what escapes, and the definition and last use of each root.
"""

from __future__ import annotations

from relaxc.frontend.parser import parse_module
from relaxc.ir.alias import (
    CONST,
    FRESH,
    OBJECT,
    PARAM,
    STORAGE,
    TENSOR,
    AliasInfo,
    Liveness,
    analyze_aliases,
    buffer_liveness,
    flatten,
    param_aliases_of_result,
)
from relaxc.ir.nodes import Module
from relaxc.ir.verifier import verify_module


def fs(*names: str) -> frozenset:
    return frozenset(names)


def analyze(text: str, entry: str = "main") -> tuple[Module, AliasInfo, Liveness]:
    module = parse_module(text, "alias.rx")
    verify_module(module)  # the analysis is defined on valid IR
    fn = module.get(entry)
    assert fn is not None
    info = analyze_aliases(fn, module)
    return module, info, buffer_liveness(fn, info)


def test_flatten_joins_every_field_of_a_nested_tree() -> None:
    assert flatten(fs("a")) == fs("a")
    assert flatten((fs("a"), (fs("b"), fs()), fs("c", "a"))) == fs("a", "b", "c")
    assert flatten(()) == fs()


def test_alias_and_view_share_the_root_of_their_source() -> None:
    module, info, live = analyze("""
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(2, 2), f32] {
  %a = exp(%x)
  %b = %a
  %v = reshape(%b, (2, 2))
  %c = tanh(%x)
  %d = add(%a, %c)
  return %v
}""")
    assert info.trees == {
        "x": fs("x"),
        "a": fs("a"),
        "b": fs("a"),
        "v": fs("a"),
        "c": fs("c"),
        "d": fs("d"),
    }
    assert info.kind == {"x": PARAM, "a": FRESH, "c": FRESH, "d": FRESH}  # aliases are no roots
    assert info.storage_of == {} and info.escaping == set()
    fn = module.get("main")
    assert fn is not None
    assert info.returned(fn) == fs("a")
    assert live.defined == {"x": -1, "a": 0, "b": 1, "v": 2, "c": 3, "d": 4}
    # %a is returned through the view %v: it lives to the end (len(body) == 5), while the
    # names %b and %v are last read at the view and at the return.
    assert live.last_use == {"x": 3, "a": 5, "b": 2, "v": 5, "c": 4, "d": 4}


def test_tuples_keep_each_field_apart_through_nested_projections() -> None:
    _, info, live = analyze("""
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %a = exp(%x)
  %b = tanh(%x)
  %c = relu(%x)
  %t = (%a, %b)
  %u = (%t, %c)
  %p = %u.0
  %q = %p.1
  %r = %u.1
  %s = add(%q, %r)
  return %s
}""")
    assert info.trees["t"] == (fs("a"), fs("b"))
    assert info.trees["u"] == ((fs("a"), fs("b")), fs("c"))
    assert info.trees["p"] == (fs("a"), fs("b"))
    assert info.trees["q"] == fs("b")  # exactly one field: not %a
    assert info.trees["r"] == fs("c")
    assert info.roots("u") == fs("a", "b", "c")
    assert info.roots("q") == fs("b")
    assert "t" not in info.kind and "u" not in info.kind and "p" not in info.kind
    # A use of a tuple is a use of every buffer it holds: %r = %u.1 (index 7) keeps %a alive
    # though it reads only field 1; %b is last read through %q at index 8.
    assert live.last_use["a"] == 7
    assert live.last_use["b"] == 8
    assert live.last_use["c"] == 8
    assert live.last_use["u"] == 7
    assert live.last_use["s"] == 9  # returned: the end of the body


def test_a_projection_of_a_kernel_tuple_refers_to_the_whole_result() -> None:
    _, info, _ = analyze("""
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(2,), f32] {
  %parts = split(%x, 2)
  %h = %parts.0
  %g = %parts.1
  %s = add(%h, %g)
  return %s
}""")
    # A kernel returns one root: its fields are not told apart.
    assert info.trees["parts"] == fs("parts")
    assert info.trees["h"] == fs("parts") and info.trees["g"] == fs("parts")
    assert info.kind["parts"] == FRESH


def test_function_results_alias_the_arguments_the_callee_returns() -> None:
    module, info, live = analyze("""
fn @view_of(%p: Tensor[(4,), f32]) -> Tensor[(2, 2), f32] {
  %v = reshape(%p, (2, 2))
  return %v
}

fn @fresh(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %e = exp(%p)
  return %e
}

fn @pair(%p: Tensor[(4,), f32], %q: Tensor[(4,), f32]) -> Tuple[Tensor[(4,), f32], Tensor[(4,), f32]] {
  %e = exp(%p)
  %t = (%q, %e)
  return %t
}

fn @kernel(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {primitive = true} {
  %e = exp(%p)
  return %e
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %a = exp(%x)
  %b = tanh(%x)
  %r = call @view_of(%a)
  %f = call @fresh(%a)
  %g = call @pair(%a, %b)
  %g0 = %g.0
  %k = call @kernel(%a)
  %s = add(%g0, %k)
  return %s
}""")  # noqa: E501
    assert param_aliases_of_result(module.get("view_of"), module) == fs(0)
    assert param_aliases_of_result(module.get("fresh"), module) == fs()
    assert param_aliases_of_result(module.get("pair"), module) == fs(1)
    assert info.trees["r"] == fs("r", "a")
    assert info.trees["f"] == fs("f")
    # A call's result is one set of roots, even when the callee returns a tuple.
    assert info.trees["g"] == fs("g", "b")
    assert info.trees["g0"] == fs("g", "b")
    assert info.trees["k"] == fs("k")  # a primitive function writes a fresh result
    assert {n: info.kind[n] for n in ("r", "f", "g", "k")} == {
        "r": FRESH,
        "f": FRESH,
        "g": FRESH,
        "k": FRESH,
    }
    # %b lives as long as %g0, which may be it.
    assert live.last_use["b"] == 7 and live.last_use["a"] == 6


def test_packed_calls_alias_and_keep_what_their_spec_says() -> None:
    _, info, live = analyze("""
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %a = exp(%x)
  %r: Tensor[(2, 2), f32] = call_packed("vm.builtin.reshape", %a, (2, 2))
  %b = tanh(%x)
  %c = relu(%x)
  call_packed("relaxc.copy", %b, %c)
  %d = negative(%x)
  %o = call_packed("no.such.function", %d)
  %e = add(%b, %c)
  return %e
}""")
    assert info.trees["r"] == fs("r", "a")  # vm.builtin.reshape returns a view of argument 0
    assert info.trees["o"] == fs("o", "d")  # an unknown function may return any argument ...
    assert info.escaping == {"d"}  # ... and may keep it: relaxc.copy keeps nothing
    assert info.kind["r"] == OBJECT and info.kind["o"] == OBJECT
    end = 8
    assert live.last_use["d"] == end  # kept by a runtime function: alive to the end
    assert live.last_use["a"] == 1
    assert live.last_use["r"] == 1  # defined and never read again


def test_struct_set_ties_a_buffer_to_its_struct_and_a_packed_kernel_keeps_nothing() -> None:
    _, info, live = analyze("""
fn @kernel(%p: Tensor[(4,), f32], %q: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {primitive = true} {
  %e = add(%p, %q)
  return %e
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %a = exp(%x)
  %h = tir.stack_alloca("array", 1)
  tir.struct_set(%h, 0, "data", %a)
  %o = call_cpacked("kernel", %x, %h)
  %b = tanh(%x)
  return %b
}""")  # noqa: E501
    assert info.trees["h"] == fs("h", "a")  # the struct refers to the buffer stored into it
    assert info.trees["o"] == fs(
        "o"
    )  # a primitive function called packed returns nothing of its args
    assert info.escaping == set()
    assert info.kind["h"] == OBJECT and info.kind["o"] == OBJECT
    assert live.last_use["a"] == 3  # used through %h by the call


def test_a_packed_call_of_an_unknown_function_keeps_the_struct_and_its_buffer() -> None:
    _, info, live = analyze("""
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %a = exp(%x)
  %h = tir.stack_alloca("array", 1)
  tir.struct_set(%h, 0, "data", %a)
  %o = call_cpacked("extern_f", %x, %h)
  %b = tanh(%x)
  return %b
}""")
    # Every variable argument is handed over: the parameter %x, and %a through its struct.
    assert info.escaping == {"x", "h", "a"}
    assert info.trees["o"] == fs("o", "x", "h", "a")
    assert live.last_use["a"] == 5 and live.last_use["h"] == 5


def test_invoke_outs_storages_and_tensors() -> None:
    module, info, live = analyze("""
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = memory.alloc_storage(16)
  %y = memory.alloc_tensor(%s, 0, (4,), f32)
  invoke exp(%x) outs (%y)
  %s2 = memory.alloc_storage(16, external=true)
  %z = memory.alloc_tensor(%s2, 0, (4,), f32)
  invoke add(%x, %y) outs (%z)
  memory.kill_tensor(%y)
  memory.kill_storage(%s)
  return %z
}""")
    assert info.kind == {"x": PARAM, "s": STORAGE, "y": TENSOR, "s2": STORAGE, "z": TENSOR}
    assert info.storage_of == {"y": "s", "z": "s2"}
    assert info.trees == {"x": fs("x"), "s": fs("s"), "y": fs("y"), "s2": fs("s2"), "z": fs("z")}
    fn = module.get("main")
    assert fn is not None
    assert info.returned(fn) == fs("z")
    assert live.defined == {"x": -1, "s": 0, "y": 1, "s2": 3, "z": 4}
    # Kills read their operand too; a storage lives while a tensor carved from it does, and
    # the returned tensor (and so its storage) to the end.
    assert live.last_use == {"x": 5, "s": 7, "y": 6, "s2": 8, "z": 8}


def test_aliases_of_parameters_and_constants_keep_their_roots() -> None:
    module, info, live = analyze("""
fn @main(%x: Tensor[(4,), f32]) -> Tuple[Tensor[(4,), f32], Tensor[(2, 2), f32]] {
  %k = const([1.0, 2.0, 3.0, 4.0])
  %y = %x
  %kv = reshape(%k, (2, 2))
  %t = (%y, %kv)
  return %t
}""")
    assert info.kind == {"x": PARAM, "k": CONST}
    assert info.trees["y"] == fs("x") and info.trees["kv"] == fs("k")
    assert info.trees["t"] == (fs("x"), fs("k"))
    fn = module.get("main")
    assert fn is not None
    assert info.returned(fn) == fs("x", "k")
    # The buffers are returned (live to the end, 4); the names %y and %kv die at the tuple.
    assert live.last_use == {"x": 4, "k": 4, "y": 3, "kv": 3, "t": 4}
    assert live.defined == {"x": -1, "k": 0, "y": 1, "kv": 2, "t": 3}


def test_returning_a_tuple_of_values_keeps_every_field_alive() -> None:
    module, info, live = analyze("""
fn @main(%x: Tensor[(4,), f32]) -> Tuple[Tensor[(4,), f32], Tensor[(4,), f32]] {
  %a = exp(%x)
  %b = tanh(%a)
  %c = relu(%x)
  return (%a, %c)
}""")
    fn = module.get("main")
    assert fn is not None
    assert info.returned(fn) == fs("a", "c")
    assert live.last_use == {"x": 2, "a": 3, "b": 1, "c": 3}

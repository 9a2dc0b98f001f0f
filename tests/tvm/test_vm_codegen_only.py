"""Ports of the kill cases of tests/python/relax/test_vm_codegen_only.py (Apache TVM):
test_vm_kill_object, test_preserve_trivial_bindings, test_vm_builtin_reshape."""

from __future__ import annotations

import pytest

from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError
from relaxc.ir.verifier import verify_module

from .common import memory_safe
from .harness import invoke, kills, program, shares, vm_check


def test_vm_kill_object(tmp_path, c_check):
    # TVM: storage reused by alloc and alloc1 (both killed), alloc2 in storage_1 is the result
    # (all ones). As written (-p none) and through the vm pipeline.
    name = "codegen_vm_kill_object"
    vm_check(name, tmp_path, passes="none")
    m = memory_safe(name, tmp_path)
    assert shares(m, "alloc", "alloc1")
    assert ("memory.kill_tensor", "alloc2") not in kills(m)
    r = invoke("run", program(name).path)
    assert r.exit_code == 0 and "1, 1, 1, 1" in r.output, r.output
    c_check(name)


def test_vm_kill_object_use_after_kill_is_refused():
    # TVM binds x = alloc after kill_object(alloc) (a dead register, never read). In relaxc any
    # use of a killed value is an error, found by the verifier's kill checker.
    text = program("codegen_vm_kill_object").text.replace(
        "  memory.kill_tensor(%alloc)\n", "  memory.kill_tensor(%alloc)\n  %x = %alloc\n"
    )
    with pytest.raises(RxError, match="alloc"):
        verify_module(parse_module(text, "k.rx"))


def test_preserve_trivial_bindings(tmp_path, c_check):
    # TVM: the aliases stay usable after the kills of storage and alloc (a kill clears one
    # register). relaxc: nothing sharing the buffer is killed before the alias's last use.
    text = program("codegen_preserve_trivial_bindings").text.replace(
        "  %storage_alias = %storage\n", ""
    )
    path = tmp_path / "aliases.rx"
    path.write_text(text)
    r = invoke("build", path, "-o", tmp_path / "a.rxb", "-q")
    assert r.exit_code == 0, r.output
    r = invoke("run", tmp_path / "a.rxb", "--check", "--poison", "--source", path)
    assert r.exit_code == 0 and r.output.count("bit-identical") == 2, r.output
    r = invoke("build", path, "-t", "ir", "-o", "-", "-q")
    out = r.output
    assert out.index("memory.kill_tensor(%alloc)") > out.index("invoke add(%alloc_alias")


def test_preserve_trivial_bindings_kill_then_use_alias_is_refused():
    # The TVM order (kill alloc, then read alloc_alias) is a use after kill in relaxc.
    text = program("codegen_preserve_trivial_bindings").text.replace(
        "  %before = relu(%alloc)\n", "  %before = relu(%alloc)\n  memory.kill_tensor(%alloc)\n"
    )
    with pytest.raises(RxError):
        verify_module(parse_module(text, "k.rx"))


def test_preserve_trivial_bindings_storage_alias(tmp_path, c_check):
    memory_safe("codegen_preserve_trivial_bindings", tmp_path)
    c_check("codegen_preserve_trivial_bindings")


def test_vm_builtin_reshape(tmp_path):
    # TVM: a view of the parameter is returned; nothing allocated, nothing killed.
    m = memory_safe("codegen_vm_builtin_reshape", tmp_path)
    assert kills(m) == []

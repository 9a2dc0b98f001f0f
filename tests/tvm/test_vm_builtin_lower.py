"""Ports of tests/python/relax/test_vm_builtin_lower.py (Apache TVM), all 4."""

from __future__ import annotations

from .common import assert_clear_refusal, memory_safe
from .harness import kills, refusal, storages


def test_vm_builtin_lower_mem_alloc_storage(tmp_path):
    # TVM: storage (m * n * 4 B) + tensor written by a runtime function, returned via gv0:
    # lowered as is, nothing killed.
    m = memory_safe("builtin_lower_mem_alloc_storage", tmp_path)
    assert not {"storage", "alloc", "gv0"} & {n for _, n in kills(m)}
    assert not storages(m)["storage"].arena


def test_vm_builtin_alloc_tensor_raises_error(tmp_path):
    # TVM: an R.builtin.alloc_tensor left for the lowering is an error. relaxc: an
    # alloc_tensor needs a storage; without one it is a located error.
    text = """fn @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  %alloc = memory.alloc_tensor((2, 3), f32)
  %_ = call_packed("relaxc.copy", %x, %alloc)
  return %alloc
}
"""
    refusal(text, tmp_path)


RESHAPE_SHAPE_VAR = """fn @main(%a: Tensor[(16,), f32], %shape: Shape) -> Tensor[(4, 4), f32] {
  %r = reshape(%a, %shape)
  return %r
}
"""


def test_vm_reshape_may_be_var_is_refused(tmp_path):
    # TVM: R.reshape(A, shape) with an R.Shape parameter. Out of scope in relaxc: refused.
    refusal(RESHAPE_SHAPE_VAR, tmp_path)


def test_vm_reshape_may_be_var(tmp_path):
    assert_clear_refusal(RESHAPE_SHAPE_VAR, tmp_path, "Shape parameters")


def test_vm_reshape_using_tensor_to_shape(tmp_path):
    # TVM: the target shape is read from a tensor at run time (R.tensor_to_shape). relaxc
    # shapes are static or symbolic dims of the inputs: a tensor as the shape is refused.
    text = """fn @main(%a: Tensor[(16,), f32], %s: Tensor[(2,), i64]) -> Tensor[(4, 4), f32] {
  %r = reshape(%a, %s)
  return %r
}
"""
    refusal(text, tmp_path)

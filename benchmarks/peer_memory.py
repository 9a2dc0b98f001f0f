"""Intermediate memory other systems need on the onnx package's model-zoo architectures.

Measured outside this repository (issue 15; no network here, and none of these systems is a
dependency of relaxc), on the same files (`light_*.onnx`, batch 1, 224x224 f32), bytes:

* TVM 0.27, fused: StaticPlanBlockMemory's storage after the default Relax lowering with
  FuseOps/FuseTIR (benchmarks/tvm_plan.py measures it live when apache-tvm is installed).
* IREE 3.13 (llvm-cpu): ``execution.transient-memory-size`` from
  ``--iree-scheduling-dump-statistics-format=json``, less the 4,000-byte output it includes.
* TFLite Micro (head of its main branch): ``RecordingMicroAllocator``'s "Arena allocation
  head" of the onnx2tf-converted model. TFLM plans the input (602,112 bytes) and the output
  (4,000 bytes) in its arena too: compare it with relaxc's arena plus input and output, or
  with relaxc's arena when inputs and outputs are planned into it. ``None``: the model did
  not convert, or TFLM lacks an operator (LRN).

The caveats and the comparison are in docs/benchmarks-memory.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PeerMemory:
    tvm_fused: int
    iree: int
    tflm_head: int | None  # includes the input and the output

    def best_arena(self) -> int:
        """The least intermediate memory of TVM fused and IREE (TFLM counts IO too)."""
        return min(self.tvm_fused, self.iree)


PEERS: dict[str, PeerMemory] = {
    "squeezenet": PeerMemory(6_353_088, 3_928_576, 3_928_576),
    "resnet50": PeerMemory(9_842_496, 8_947_712, 10_436_608),
    "inception_v2": PeerMemory(7_837_728, 5_567_680, 4_014_080),
    "shufflenet": PeerMemory(4_146_656, 3_213_056, 2_987_264),
    "densenet121": PeerMemory(8_348_032, 9_349_120, None),
    "inception_v1": PeerMemory(9_926_208, 8_624_192, None),
    "bvlc_alexnet": PeerMemory(3_428_864, 3_751_488, None),
    "vgg19": PeerMemory(26_542_080, 29_860_416, None),
    "zfnet512": PeerMemory(13_854_848, 13_877_056, None),
}
"""Model (the file's stem without ``light_``) -> what the peers need."""

RELAXC_BEFORE_ISSUE_15: dict[str, int] = {
    "squeezenet": 6_308_352,
    "resnet50": 9_633_792,
    "inception_v2": 6_422_528,
    "shufflenet": 3_110_912,
    "densenet121": 8_429_568,
    "inception_v1": 6_422_528,
    "bvlc_alexnet": 2_239_488,
    "vgg19": 25_690_112,
    "zfnet512": 9_124_608,
}
"""relaxc's arena in the written order with no sharing (the issue's first column)."""

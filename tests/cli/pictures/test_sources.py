"""Program points mapped back to the source: each buffer's writing op and line, each point's
line, and the ONNX node comments read off the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from relaxc.cli.errors import Sources
from relaxc.cli.loading import load_program
from relaxc.cli.pipeline_opts import PipelineRequest, run_pipeline
from relaxc.cli.report.origins import Origins, origins_from_text
from relaxc.cli.report.analysis import memory_report

SAMPLES = Path(__file__).resolve().parents[3] / "samples"


def _reports(path: Path, disable: tuple[str, ...] = ()):
    prog = load_program(path, Sources(), None, need_weights=False)
    req = PipelineRequest("vm", None, disable, (), (), (), None, False, False)
    module, _, _ = run_pipeline(prog.module, req, path.stem, prog.types, [path])
    return memory_report(module)


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer", "relay_memory"])
@pytest.mark.parametrize("disable", [(), ("ComputeInPlace", "ElideConcatSplit")])
def test_each_buffer_names_the_op_and_line_that_write_it(name: str, disable) -> None:
    path = SAMPLES / f"{name}.rx"
    lines = path.read_text().split("\n")
    for rep in _reports(path, disable):
        assert len(rep.point_lines) == rep.program_points
        for line in rep.point_lines:  # every point is a statement of the source (or before it)
            assert 0 <= line <= len(lines)
            assert line == 0 or lines[line - 1].strip().startswith(("%", "memory.", "invoke"))
        for b in rep.buffers + rep.dynamic:
            assert b.op and b.line > 0, b
            text = lines[b.line - 1]
            assert f"{b.op}(" in text or "call @" in text, (b, text)


def test_the_comments_name_the_onnx_nodes_by_line() -> None:
    text = (
        "fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {\n"
        "  %a = relu(%x)  # onnx: 'r' (Relu)\n"
        "  # onnx: 'not this one' (Exp): on its own line, a comment about what follows\n"
        '  %b = exp(%a)  # a note  "# onnx: in a string"\n'
        "  return %b\n"
        "}\n"
    )
    origins = origins_from_text("m.rx", text)
    assert origins.onnx_nodes == {2: "'r' (Relu)"}
    assert origins.describe(2) == "m.rx:2, onnx 'r' (Relu)"
    assert origins.describe(4) == "m.rx:4" and origins.describe(0) == ""
    assert Origins().describe(3) == "line 3"

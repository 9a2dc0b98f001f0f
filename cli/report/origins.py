"""Where a program point comes from: its line of the ``.rx`` source, and the ONNX node that
line was imported from.

``relaxc import`` ends each statement it writes for an ONNX node with a comment
``# onnx: NODE (OpType)`` (see :func:`relaxc.frontend.onnx.importer.ImportResult.text`); the
IR keeps every statement's source line through the passes, and the report gives each
program point its line (``FunctionReport.point_lines``). This module joins the two: it reads
the comments off the source text.

An ONNX model imported in memory has no text: each of its statements has a location naming
the ONNX node it was made for (``Loc.origin``, set by the importer), at the line it would
have in the written ``.rx``. :func:`origins_from_module` reads those, and such a point is
described as ``model.onnx: node 'conv1' (Conv)``, with no line of a file that does not exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from relaxc.frontend.comments import scan_comments
from relaxc.ir.nodes import Module

ONNX_COMMENT = re.compile(r"^#\s*onnx:\s*(?P<node>.+?)\s*$")


@dataclass(frozen=True)
class Origins:
    """The source file's name and, by line, the ONNX node it was imported from (``'conv1'
    (Conv)``, as the ``# onnx:`` comments name it, for a file and a model imported alike)."""

    file: str = ""
    onnx_nodes: dict[int, str] = field(default_factory=dict)
    imported: dict[int, str] | None = None
    """For a model imported in memory: by line, what in the model it is (``node 'conv1'
    (Conv)``); None for a program read from a file."""

    def describe(self, line: int) -> str:
        """``file:line`` and the ONNX node, as far as they are known ("" for neither); for a
        model imported in memory, ``model.onnx: node 'conv1' (Conv)``."""
        if line <= 0:
            return ""
        if self.imported is not None:
            origin = self.imported.get(line)
            return f"{self.file}: {origin}" if origin else ""
        where = f"{self.file}:{line}" if self.file else f"line {line}"
        node = self.onnx_nodes.get(line)
        return f"{where}, onnx {node}" if node else where


ONNX_LABEL = re.compile(r"^(?:'(?P<name>.*)'|#\d+) \((?P<op>[^()]*)\)(?: -> .*)?$")


def onnx_node(label: str) -> dict[str, str | None]:
    """An ONNX node label (``'conv1' (Conv)``, or ``#3 (Relu) -> y`` for a node without a
    name) as ``{"name": ..., "op_type": ...}`` (name None when the node has none)."""
    m = ONNX_LABEL.match(label)
    if m is None:
        return {"name": label, "op_type": None}
    return {"name": m.group("name"), "op_type": m.group("op")}


def origins_from_text(file: str, text: str) -> Origins:
    """The ONNX node comments of ``text``, by line."""
    nodes: dict[int, str] = {}
    for line, after_code, body in scan_comments(text):
        m = ONNX_COMMENT.match(body)
        if m and after_code:
            nodes[line] = m.group("node")
    return Origins(file, nodes)


def origins_from_module(file: str, module: Module) -> Origins:
    """The origins of a module imported in memory, read off its statements' locations."""
    imported: dict[int, str] = {}
    for fn in module.functions:
        for loc in [s.loc for s in fn.body] + [fn.ret.loc]:
            if loc is not None and loc.origin:
                imported.setdefault(loc.line, loc.origin)
    nodes = {k: v.removeprefix("node ") for k, v in imported.items() if v.startswith("node ")}
    return Origins(file, nodes, imported)


def program_origins(file: str, module: Module, imported: bool, text: str) -> Origins:
    """The origins of a program as loaded: an ONNX model imported in memory is located by
    its nodes (``module``'s locations name them), a file of text by its lines (``text``)."""
    if imported:
        return origins_from_module(file, module)
    return origins_from_text(file, text)

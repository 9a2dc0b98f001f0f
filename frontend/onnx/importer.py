"""``import_onnx``: an ONNX model becomes a relaxc module and its weights.

The graph's inputs become the parameters of ``@main`` (a ``dim_param`` becomes a symbolic
dim), its initializers and every value computed only from constants are folded at import
time, and each remaining node becomes one or a few relaxc ops. Before converting anything
the importer checks the whole graph and reports every unsupported operator at once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.frontend.printer import print_module
from relaxc.ir.diagnostics import Loc, RxError
from relaxc.ir.io_names import ONNX_INPUTS, ONNX_OUTPUTS, names_attr
from relaxc.ir.nodes import Call, DictLit, Function, Module, Param, TupleExpr, Var
from relaxc.ir.types import TupleType, type_free_vars
from relaxc.ir.verifier import verify_module

from .builder import ConversionError, ProgramBuilder
from .context import NodeContext
from .converters import CONVERTERS, EXTRA_OUTPUTS, OUT_OF_SCOPE, REVIEWED_VERSIONS
from .fold_batch_norm import fold_inputs, foldable_pairs
from .model import (
    DEFAULT_DOMAINS,
    MIN_OPSET,
    REVIEWED_OPSET,
    default_opset,
    dim_symbol,
    load_model,
    newer_version_problem,
    older_version_problem,
    node_attrs,
    node_label,
    node_title,
    tensor_array,
    value_info_type,
)
from .values import Folded, Runtime, Value


@dataclass
class ImportResult:
    """The imported program: ``module`` with ``@main``, and the arrays its constants name."""

    module: Module
    weights: dict[str, np.ndarray]
    opset: int
    producer: str
    notes: list[str] = field(default_factory=list)
    origins: tuple[str, ...] = ()
    """For each statement of ``@main``'s body, the ONNX node it was made for ("" for none):
    ``'name' (OpType)``, or ``#index (OpType) -> first output`` for a node without a name."""
    dim_origins: dict[str, tuple[str, int]] = field(default_factory=dict)
    """For each symbolic dim of the inputs, the graph input and the axis that introduced it
    (the first one that has it): ``{"N": ("data_0", 0)}``, so that a message about the dim
    can name the ONNX input it comes from."""

    def text(self, source: str) -> str:
        """The .rx file to write: the header, then the program with each statement an ONNX
        node made ending in ``# onnx: NODE`` (the report maps program points back to them)."""
        return self.header(source) + annotate_origins(print_module(self.module), self)

    def header(self, source: str) -> str:
        """Comment lines for the top of the written .rx file (:func:`_header_lines` of them)."""
        who = f", made by {self.producer}" if self.producer else ""
        lines = [f"# Imported from {source} (ONNX opset {self.opset}{who}) by relaxc import."]
        n = sum(int(a.size) for a in self.weights.values())
        nbytes = sum(int(a.nbytes) for a in self.weights.values())
        lines.append(f"# Weights: {len(self.weights)} arrays, {n:,} elements, {nbytes:,} bytes.")
        lines += [f"# {_safe_comment(note)}" for note in self.notes]
        return "\n".join(lines) + "\n"


def _header_lines(notes: Sequence[str]) -> int:
    """How many lines :meth:`ImportResult.header` writes."""
    return 2 + len(notes)


def _located(
    fn: Function,
    origins: Sequence[str],
    header_lines: int,
    source: str,
    graph_name: str,
    onnx_inputs: Sequence[str],
) -> Function:
    """``fn`` with a location on its parameters, statements and return naming the ONNX
    input, node or graph each comes from (``Loc.origin``), at the line each has in the text
    :meth:`ImportResult.text` writes: the header, the ``fn`` line, the ``attrs`` line, then
    one line per statement. A statement made for no one node (a weight only a graph output
    reads) has no location."""
    head = header_lines + 1
    graph = f"graph '{_safe_comment(graph_name)}'" if graph_name else "the graph"
    params = tuple(
        dataclasses.replace(
            p, loc=Loc(source, head, 1, origin=f"input '{_safe_comment(onnx_name)}'")
        )
        for p, onnx_name in zip(fn.params, onnx_inputs)
    )
    first = head + (2 if fn.attrs else 1)
    body = tuple(
        dataclasses.replace(s, loc=Loc(source, first + k, 3, origin=f"node {_safe_comment(o)}"))
        if o
        else s
        for k, (s, o) in enumerate(zip(fn.body, origins))
    )
    outputs = f"the outputs of {graph}"
    where = Loc(source, first + len(body), 3, origin=outputs)
    ret = dataclasses.replace(fn.ret, loc=where)
    return dataclasses.replace(
        fn, params=params, body=body, ret=ret, loc=Loc(source, head, 1, origin=graph)
    )


def import_onnx(
    source: "str | Path | bytes | Any",
    *,
    input_shapes: Mapping[str, Sequence[int | str]] | None = None,
    upper_bounds: Mapping[str, int] | None = None,
    function_name: str = "main",
    fold_batch_norm: bool = True,
    source_name: str | None = None,
) -> ImportResult:
    """Import an ONNX model (a path, file bytes or a loaded ``ModelProto``).

    ``input_shapes`` overrides the declared shape of inputs by name (ints or dim names);
    ``upper_bounds`` becomes the function's ``upper_bounds`` attribute (dim name -> bound).
    With ``fold_batch_norm`` (the default), a BatchNormalization that alone reads a Conv's
    output is folded into the Conv's weights and bias (frontend/onnx/fold_batch_norm.py).
    Raises :class:`RxError` with a plain sentence for anything the model asks that relaxc
    cannot do.

    The function keeps the model's input and output names (``onnx_inputs``,
    ``onnx_outputs``: :mod:`relaxc.ir.io_names`), and every IR node made for an ONNX node,
    input or the graph has a location naming it (``Loc.origin``, e.g. ``node 'conv1'
    (Conv)``) in the file ``source_name`` (default: the path, or "the ONNX model"), whose
    line is the one the node has in :meth:`ImportResult.text`.
    """
    if source_name is None:
        source_name = str(source) if isinstance(source, (str, Path)) else "the ONNX model"
    model = load_model(source)
    opset = default_opset(model)
    graph = model.graph
    _check_operators(graph)
    _check_names(input_shapes, graph)

    builder = ProgramBuilder()
    env: dict[str, Value] = {}
    for init in graph.initializer:
        env[init.name] = Folded(tensor_array(init, f"initializer '{init.name}'"), init.name)
    params: list[Param] = []
    dim_origins: dict[str, tuple[str, int]] = {}
    onnx_inputs: list[str] = []
    for info in graph.input:
        if info.name in env:
            continue  # old exporters list initializers among the inputs too
        t = value_info_type(info, input_shapes)
        name = builder.fresh(info.name)
        params.append(Param(name, t))
        for axis, d in enumerate(t.shape):
            for sym in sorted(D.free_vars(d)) if not isinstance(d, int) else ():
                dim_origins.setdefault(sym, (info.name, axis))
        onnx_inputs.append(info.name)
        env[info.name] = Runtime(Var(name), t)

    attrs: list[tuple[str, Any]] = []
    if upper_bounds:
        attrs.append(("upper_bounds", _bounds(upper_bounds, params)))
    _check_signature(params, tuple(attrs), function_name)
    builder.bounds = {dim_symbol(k): int(v) for k, v in (upper_bounds or {}).items()}
    attrs.append((ONNX_INPUTS, names_attr(onnx_inputs)))
    attrs.append((ONNX_OUTPUTS, names_attr([o.name for o in graph.output])))
    used = _used_names(graph)
    candidates = foldable_pairs(graph, opset) if fold_batch_norm and opset >= MIN_OPSET else {}
    folded_away: set[int] = set()  # the BatchNormalization nodes their Conv computed
    origins: list[str] = []
    for index, node in _topological(graph, set(env)):
        if index in folded_away:
            continue  # its Conv computed it (below)
        label = node_title(node, index)
        origins += [""] * (len(builder.body) - len(origins))
        inputs = [env[name] if name else None for name in node.input]
        pair = candidates.get(index)
        if pair is not None:
            bn_inputs = [env.get(name) for name in graph.node[pair.batch_norm].input]
            folded = fold_inputs(inputs, bn_inputs, pair, node.output[0])
            if folded is None:
                pair = None  # a weight is computed at run time: the two ops stay
            else:
                inputs[1:] = folded
                folded_away.add(pair.batch_norm)
        problem = _version_problem(node.op_type, opset)
        if problem is not None:
            raise RxError(f"node {label}: {problem}")
        # below MIN_OPSET every op is as at MIN_OPSET (checked): its converter reads it so
        ctx = NodeContext(node, node_attrs(node, index), max(opset, MIN_OPSET), builder, inputs)
        try:
            outs = CONVERTERS[node.op_type](ctx)
        except ConversionError as e:
            raise RxError(f"node {label}: {e}") from None
        except RxError as e:
            raise RxError(f"node {label}: {e.message}") from None
        if pair is not None:
            env[graph.node[pair.batch_norm].output[0]] = outs[0]
        origins += [_origin(node, index)] * (len(builder.body) - len(origins))
        for k, name in enumerate(node.output):
            if not name:
                continue
            if k < len(outs):
                env[name] = outs[k]
            elif name in used:
                what = EXTRA_OUTPUTS.get(node.op_type, f"output {k}")
                raise RxError(
                    f"node {label}: its output '{name}' ({what}) is used, "
                    "but relaxc imports only inference outputs"
                )

    results: list[Runtime] = []
    try:
        for out in graph.output:
            if out.name not in env:
                raise RxError(f"graph output '{out.name}' is not computed by any node")
            results.append(builder.runtime(env[out.name], out.name))
    except ConversionError as e:
        raise RxError(f"graph output: {e}") from None
    if not results:
        raise RxError("the model has no outputs")

    ret: Var | TupleExpr = (
        results[0].var if len(results) == 1 else TupleExpr(tuple(r.var for r in results))
    )
    ret_type = results[0].type if len(results) == 1 else TupleType(tuple(r.type for r in results))
    bounds: Mapping[str, int] | None = upper_bounds
    if builder.implied:  # bounds the graph itself sets: the run checks them
        bounds = dict(builder.bounds)
        attrs = [a for a in attrs if a[0] != "upper_bounds"]
        attrs.insert(0, ("upper_bounds", _bounds(bounds, params)))
    notes = _notes(params, bounds)
    for sym, (limit, why) in sorted(builder.implied.items()):
        if bounds and bounds.get(sym) == limit:
            notes.append(
                f"{sym} is at most {limit}: {why}, which is shorter than {sym} beyond that "
                f"(relaxc plans the slice {sym} long; the bound is in upper_bounds, and runs "
                "check it)."
            )
    if folded_away:
        notes.append(
            f"{len(folded_away)} BatchNormalization node(s) folded into the Conv before them "
            "(relaxc import --no-fold-batch-norm keeps them)."
        )
    origins += [""] * (len(builder.body) - len(origins))
    fn = Function(function_name, tuple(params), ret_type, tuple(attrs), tuple(builder.body), ret)
    fn = _located(fn, origins, _header_lines(notes), source_name, graph.name, onnx_inputs)
    module = Module((fn,))
    try:
        verify_module(module)
    except RxError as e:  # a converter produced ill-typed IR: a bug in the importer
        raise RxError(
            f"the imported program does not verify (a bug in relaxc's importer): {e.message}"
        ) from None
    return ImportResult(
        module, builder.weights, opset, _producer(model), notes, tuple(origins), dim_origins
    )


def _version_problem(op: str, opset: int) -> str | None:
    """Why the converter of ``op`` cannot read its version at ``opset``, or None."""
    if opset > REVIEWED_OPSET:
        return newer_version_problem(op, opset, REVIEWED_VERSIONS)
    if opset < MIN_OPSET:
        return older_version_problem(op, opset)
    return None


def _origin(node: Any, index: int) -> str:
    """How a comment names an ONNX node: its name, or its index and first output."""
    if node.name:
        return f"'{node.name}' ({node.op_type})"
    out = next((o for o in node.output if o), "")
    return f"#{index} ({node.op_type})" + (f" -> {out}" if out else "")


def annotate_origins(text: str, result: "ImportResult") -> str:
    """``text`` (the printed module of ``result``) with ``  # onnx: NODE`` after each body
    statement an ONNX node made, except weights (``const``), which belong to no one node.

    The canonical printer writes a function's header (and its attrs line), then one line per
    statement; if the lines do not match the body (a printer change), the text is returned
    as it is rather than annotated wrongly."""
    fn = result.module.functions[0]
    lines = text.split("\n")
    start = 1 + (1 if fn.attrs else 0)
    if len(result.origins) != len(fn.body) or len(lines) < start + len(fn.body) + 2:
        return text
    if not lines[start + len(fn.body)].lstrip().startswith("return"):
        return text
    for k, (stmt, node) in enumerate(zip(fn.body, result.origins)):
        if node and not (isinstance(stmt.value, Call) and stmt.value.op == "const"):
            lines[start + k] += f"  # onnx: {_safe_comment(node)}"
    return "\n".join(lines)


def _safe_comment(text: str) -> str:
    """A node label that stays one comment line (names may hold any character)."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _check_signature(params: Sequence[Param], attrs: tuple, function_name: str) -> None:
    """The inputs' types and bounds alone must verify (sizes within limits): a user error."""
    stub = Function(function_name, tuple(params), TupleType(()), attrs, (), TupleExpr(()))
    try:
        verify_module(Module((stub,)))
    except RxError as e:
        raise RxError(f"the model's inputs: {e.message}") from None


def _check_operators(graph: Any) -> None:
    """One error listing every node whose operator relaxc cannot import."""
    missing: dict[str, list[str]] = {}
    for index, node in enumerate(graph.node):
        key = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
        if node.domain not in DEFAULT_DOMAINS or node.op_type not in CONVERTERS:
            missing.setdefault(key, []).append(node_label(node, index))
    if missing:
        count = sum(len(v) for v in missing.values())
        parts = []
        for op, labels in sorted(missing.items()):
            shown = ", ".join(labels[:5]) + (
                f" and {len(labels) - 5} more" if len(labels) > 5 else ""
            )
            why = OUT_OF_SCOPE.get(op)
            where = f"node{'s' if len(labels) > 1 else ''} {shown}"
            parts.append(f"{op} ({why}; {where})" if why else f"{op} ({where})")
        raise RxError(
            f"the model uses {len(missing)} operator{'s' if len(missing) > 1 else ''} relaxc "
            f"cannot import, in {count} node{'s' if count > 1 else ''}: " + "; ".join(parts),
            notes=(f"supported: {', '.join(sorted(CONVERTERS))}",),
        )


def _check_names(input_shapes: Mapping[str, Any] | None, graph: Any) -> None:
    if not input_shapes:
        return
    inits = {i.name for i in graph.initializer}
    names = [i.name for i in graph.input if i.name not in inits]
    for key in input_shapes:
        if key not in names:
            raise RxError(
                f"--shape names '{key}', but the model's inputs are {', '.join(names) or 'none'}"
            )


def _used_names(graph: Any) -> set[str]:
    used = {o.name for o in graph.output}
    for node in graph.node:
        used.update(n for n in node.input if n)
    return used


def _topological(graph: Any, known: set[str]) -> list[tuple[int, Any]]:
    """Nodes in an order where each one's inputs are defined (ONNX asks for this already)."""
    nodes = list(enumerate(graph.node))
    defined = set(known)
    ordered: list[tuple[int, Any]] = []
    pending = nodes
    while pending:
        rest = []
        for index, node in pending:
            if all(not n or n in defined for n in node.input):
                ordered.append((index, node))
                defined.update(n for n in node.output if n)
            else:
                rest.append((index, node))
        if len(rest) == len(pending):
            index, node = rest[0]
            missing = next(n for n in node.input if n and n not in defined)
            raise RxError(
                f"node {node_title(node, index)} uses '{missing}', which no "
                "input, initializer or node defines (or the graph has a cycle)"
            )
        pending = rest
    return ordered


def _bounds(bounds: Mapping[str, int], params: Sequence[Param]) -> DictLit:
    syms: set[str] = set()
    for p in params:
        syms |= type_free_vars(p.type)
    bounds = {dim_symbol(k): v for k, v in bounds.items()}  # the names the dims were given
    for name, value in bounds.items():
        if name not in syms:
            raise RxError(
                f"--bound names '{name}', but the inputs' symbolic dims are "
                f"{', '.join(sorted(syms)) or 'none'}"
            )
        if value < 1:
            raise RxError(f"--bound {name}={value}: a bound must be at least 1")
    return DictLit(tuple((k, int(bounds[k])) for k in sorted(bounds)))


def _notes(params: Sequence[Param], bounds: Mapping[str, int] | None) -> list[str]:
    syms: set[str] = set()
    for p in params:
        syms |= type_free_vars(p.type)
    unbounded = sorted(syms - {dim_symbol(k) for k in bounds or {}})
    if unbounded:
        return [
            f"Symbolic dims without an upper bound: {', '.join(unbounded)} "
            "(their tensors are allocated at run time; --bound NAME=N plans them statically)."
        ]
    return []


def _producer(model: Any) -> str:
    name = model.producer_name or ""
    return f"{name} {model.producer_version}".strip() if name else ""

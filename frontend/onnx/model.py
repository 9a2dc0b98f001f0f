"""Reading an ONNX model: loading, opsets, dtypes, shapes and node attributes.

This is the only module of the importer that knows the protobuf side of ONNX; everything
it hands on is plain Python, numpy arrays and relaxc types.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError
from relaxc.ir import bf16
from relaxc.ir.types import DTYPE_ALIASES, TensorType
from relaxc.ir.types import DTYPES as DTYPE_TABLE

from .builder import sanitize
from .detect import describe_non_onnx

try:  # the optional extra relaxc[onnx]
    import onnx
    from onnx import numpy_helper
except ImportError:  # pragma: no cover - exercised only without the extra
    onnx = None  # type: ignore[assignment]

MIN_OPSET = 7
MAX_OPSET = 28
REVIEWED_OPSET = 24
"""The converters follow every version of their op up to this opset. A model of a later
opset (up to MAX_OPSET) is read too, node by node: an op whose version at the model's opset
is newer than at REVIEWED_OPSET is converted only if :func:`newer_version_problem` finds
nothing new in it that relaxc could read wrongly."""
DEFAULT_DOMAINS = ("", "ai.onnx")

# ONNX TensorProto element type -> relaxc dtype
DTYPES: dict[int, str] = {
    1: "f32",
    2: "u8",
    3: "i8",
    4: "u16",
    5: "i16",
    6: "i32",
    7: "i64",
    9: "bool",
    10: "f16",
    11: "f64",
    12: "u32",
    13: "u64",
    16: "bf16",
    17: "f8e4m3fn",
    18: "f8e4m3fnuz",
    19: "f8e5m2",
    20: "f8e5m2fnuz",
    21: "u4",
    22: "i4",
    23: "f4e2m1",
    24: "f8e8m0",
    25: "u2",
    26: "i2",
}
NARROW = frozenset(("bf16", "f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f8e8m0"))
NARROW |= frozenset(("f4e2m1", "u4", "i4", "u2", "i2"))
"""The dtypes relaxc holds only with ml_dtypes installed (computed through a wider type)."""
DTYPE_NAMES: dict[int, str] = {
    0: "UNDEFINED",
    1: "FLOAT",
    2: "UINT8",
    3: "INT8",
    4: "UINT16",
    5: "INT16",
    6: "INT32",
    7: "INT64",
    8: "STRING",
    9: "BOOL",
    10: "FLOAT16",
    11: "DOUBLE",
    12: "UINT32",
    13: "UINT64",
    14: "COMPLEX64",
    15: "COMPLEX128",
    16: "BFLOAT16",
    17: "FLOAT8E4M3FN",
    18: "FLOAT8E4M3FNUZ",
    19: "FLOAT8E5M2",
    20: "FLOAT8E5M2FNUZ",
    21: "UINT4",
    22: "INT4",
    23: "FLOAT4E2M1",
    24: "FLOAT8E8M0",
    25: "UINT2",
    26: "INT2",
    27: "FLOAT6E2M3",
    28: "FLOAT6E3M2",
}
UNSUPPORTED_WHY: dict[int, str] = {
    8: "strings are out of scope: relaxc computes on numbers",
    14: "complex numbers are out of scope",
    15: "complex numbers are out of scope",
    **{k: "6-bit floats are out of scope" for k in (27, 28)},
}
"""Why relaxc has no dtype for an ONNX element type (the end of the refusal)."""


def require_onnx() -> Any:
    """The onnx module, or a plain error saying how to install it."""
    if onnx is None:
        raise RxError("importing ONNX models needs the onnx package: pip install 'relaxc[onnx]'")
    return onnx


def load_model(source: "str | Path | bytes | Any") -> Any:
    """An ``onnx.ModelProto`` from a path, the bytes of a file, or a model already loaded."""
    mod = require_onnx()
    if isinstance(source, mod.ModelProto):
        return source
    if isinstance(source, (bytes, bytearray)):
        try:
            return mod.load_from_string(bytes(source))
        except Exception as e:  # noqa: BLE001 - protobuf raises several kinds
            raise RxError(f"not an ONNX model: {e}") from None
    path = Path(source)
    if not path.exists():
        raise RxError(f"file {path} does not exist")
    if path.is_dir():
        raise RxError(f"{path} is a directory, not an ONNX model")
    if not path.is_file():  # a device or a pipe: protobuf would read it to the end, if any
        raise RxError(f"{path} is not a regular file (an ONNX model is read whole)")
    try:
        model = mod.load(str(path))
    except Exception as e:  # noqa: BLE001
        what = describe_non_onnx(path)
        if what is not None:
            raise RxError(f"{path} is not an ONNX model: it is {what}") from None
        raise RxError(f"{path} is not an ONNX model (or it is damaged): {e}") from None
    if not model.graph.node and not model.graph.output:
        what = describe_non_onnx(path)  # text can parse as an empty protobuf message
        raise RxError(
            f"{path} is not an ONNX model: " + (f"it is {what}" if what else "it holds no graph")
        )
    return model


def default_opset(model: Any) -> int:
    """The version of the default operator set the model imports (1..MAX_OPSET: below
    MIN_OPSET, each node's op must be as it is at MIN_OPSET, :func:`older_version_problem`)."""
    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    if not versions:
        if model.opset_import:
            others = ", ".join(sorted({o.domain for o in model.opset_import}))
            raise RxError(
                f"the model's operators are of the domain {others}, not of the default ONNX "
                "domain (ai.onnx), the only one relaxc imports"
                + (
                    " (the ai.onnx.ml domain of classical ML operators is out of scope)"
                    if "ai.onnx.ml" in others
                    else ""
                )
                + (
                    " (training operators are out of scope: relaxc compiles inference)"
                    if "training" in others
                    else ""
                )
            )
        return MIN_OPSET  # IR version 1/2 models list none; treat as the oldest supported
    version = max(versions)
    if version < 1:
        raise RxError(f"the model imports the default ONNX operator set at version {version}")
    if version > MAX_OPSET:
        raise RxError(
            f"the model uses ONNX opset {version}; relaxc imports opsets {MIN_OPSET} to "
            f"{MAX_OPSET} (onnx.version_converter can convert it down)"
        )
    return version


def older_version_problem(op: str, opset: int) -> str | None:
    """Why ``op`` at ``opset`` (below MIN_OPSET) cannot be read, or None when it is the same
    version as at MIN_OPSET (``Not``, ``Relu``-6 at opset 6)."""
    defs = require_onnx().defs
    try:
        version = defs.get_schema(op, opset).since_version
        current = defs.get_schema(op, MIN_OPSET).since_version
    except Exception:  # noqa: BLE001 - SchemaError: an op this onnx does not know there
        return None
    if version == current:
        return None
    return (
        f"opset {opset} has {op} version {version}, older than the versions relaxc's "
        f"converters read (those of opsets {MIN_OPSET} to {MAX_OPSET}; onnx.version_converter "
        "can upgrade the model)"
    )


_NOT_COMPUTED = NARROW
"""Dtypes relaxc stores and computes only through a wider type, which no converter treats
on its own (as good as lacking, for new versions: a version that adds them changes no
converter)."""


def _types_relaxc_lacks() -> frozenset[str]:
    have = {n for k, n in DTYPE_NAMES.items() if DTYPES.get(k) not in (None, *_NOT_COMPUTED)}
    return frozenset(
        f"tensor({n.lower()})" for n in set(DTYPE_NAMES.values()) - have - {"UNDEFINED"}
    )


def _signature(schema: Any) -> tuple:
    attrs = tuple(
        sorted((a.name, int(a.type), bool(a.required)) for a in schema.attributes.values())
    )
    ins = tuple((i.name, i.type_str, int(i.option)) for i in schema.inputs)
    outs = tuple((o.name, o.type_str, int(o.option)) for o in schema.outputs)
    return ins, outs, attrs


_VERSION_PROBLEMS: dict[tuple[str, int, tuple[tuple[str, int], ...]], str | None] = {}


def newer_version_problem(op: str, opset: int, reviewed: Mapping[str, int]) -> str | None:
    """Why ``op`` at ``opset`` (above REVIEWED_OPSET) cannot be read by its converter, or None.

    Each version of the op after its version at REVIEWED_OPSET (or after ``reviewed[op]``,
    the version its converter says it follows) must only add element types relaxc does not
    have (int2, 4-bit and 8-bit types, bf16, ...): the same inputs, outputs and attributes,
    the same types and more. A version that changes anything else, or only its text (a
    change of semantics), is refused naming it."""
    key = (op, opset, tuple(sorted(reviewed.items())))
    if key not in _VERSION_PROBLEMS:
        _VERSION_PROBLEMS[key] = _newer_version_problem(op, opset, reviewed)
    return _VERSION_PROBLEMS[key]


def _newer_version_problem(op: str, opset: int, reviewed: Mapping[str, int]) -> str | None:
    defs = require_onnx().defs
    try:
        schema = defs.get_schema(op, opset)
        base = defs.get_schema(op, REVIEWED_OPSET)
    except Exception:  # noqa: BLE001 - SchemaError: unknown here
        return None  # an op this onnx does not know at that opset: the converter decides
    known = max(base.since_version, reviewed.get(op, 0))
    if schema.since_version <= known:
        return None
    lacks = _types_relaxc_lacks()
    versions = sorted(
        {
            s.since_version
            for s in defs.get_all_schemas_with_history()
            if s.name == op and s.domain == "" and known < s.since_version <= opset
        }
    )
    before = defs.get_schema(op, known)
    for v in versions:
        after = defs.get_schema(op, v)
        why = _what_changed(before, after, lacks)
        if why is not None:
            return (
                f"opset {opset} has {op} version {v}, which {why}; relaxc's converter reads "
                f"{op} up to version {known} (onnx.version_converter can convert the model "
                f"down to opset {REVIEWED_OPSET})"
            )
        before = after
    return None


def _what_changed(before: Any, after: Any, lacks: frozenset[str]) -> str | None:
    if _signature(before) != _signature(after):
        return "changes its inputs, outputs or attributes"
    old = {t.type_param_str: set(t.allowed_type_strs) for t in before.type_constraints}
    new = {t.type_param_str: set(t.allowed_type_strs) for t in after.type_constraints}
    if set(old) != set(new) or any(not old[k] <= new[k] for k in old):
        return "changes its types"
    added = set().union(*(new[k] - old[k] for k in new)) if new else set()
    if not added:
        return "changes its definition (with the same signature)"
    usable = sorted(added - lacks)
    if usable:
        return f"adds the types {', '.join(usable)}"
    return None


def relax_dtype(elem_type: int, what: str) -> str:
    """The relaxc dtype of an ONNX element type, or a plain error naming ``what``."""
    dtype = DTYPES.get(elem_type)
    if dtype is None:
        kind = DTYPE_NAMES.get(elem_type, str(elem_type))
        why = UNSUPPORTED_WHY.get(elem_type)
        raise RxError(
            f"{what} has element type {kind}, which relaxc does not support"
            + (f" ({why})" if why else "")
        )
    return dtype


def tensor_array(proto: Any, what: str) -> np.ndarray:
    """A TensorProto (initializer or Constant value) as a numpy array relaxc can hold."""
    dtype = relax_dtype(proto.data_type, what)
    if dtype in NARROW and not bf16.available():
        raise RxError(
            f"{what} is a {DTYPE_NAMES[proto.data_type]} constant; relaxc holds {dtype} data "
            "only with ml_dtypes installed (pip install 'relaxc[onnx]')"
        )
    try:
        array = numpy_helper.to_array(proto)
    except Exception as e:  # noqa: BLE001
        raise RxError(f"{what}: cannot read its data: {e}") from None
    return np.asarray(array, order="C")


def value_info_type(
    info: Any, overrides: Mapping[str, Sequence[int | str]] | None = None
) -> TensorType:
    """The relaxc type of a graph input: ``dim_param`` becomes a symbolic dim."""
    what = f"input '{info.name}'"
    ttype = info.type.tensor_type if info.type.HasField("tensor_type") else None
    if ttype is None:
        raise RxError(f"{what} is not a tensor (sequences, maps and optionals are not supported)")
    dtype = relax_dtype(ttype.elem_type, what)
    if overrides and info.name in overrides:
        return TensorType(tuple(_dim(d, what) for d in overrides[info.name]), dtype)
    if not ttype.HasField("shape"):
        raise RxError(f"{what} has no shape; give one with --shape {info.name}=D1,D2,...")
    dims: list[D.Dim] = []
    for i, d in enumerate(ttype.shape.dim):
        if d.HasField("dim_value"):
            if d.dim_value < 0:
                raise RxError(f"{what} has a negative dimension {d.dim_value}")
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(D.Sym(dim_symbol(d.dim_param)))
        else:
            raise RxError(
                f"{what} has an unknown dimension {i} (neither a size nor a name); "
                f"give its shape with --shape {info.name}=D1,D2,..."
            )
    return TensorType(tuple(dims), dtype)


_RESERVED = (
    frozenset(DTYPE_TABLE)
    | frozenset(DTYPE_ALIASES)
    | {
        "inf",
        "nan",
        "true",
        "false",
        "max",
        "min",
        "fn",
        "attrs",
        "call",
        "invoke",
        "outs",
        "return",
        "Tensor",
        "Tuple",
        "Storage",
        "Object",
    }
)
"""Words the .rx grammar reads as something else than a dim name."""


def dim_symbol(name: str) -> str:
    """A symbolic-dim spelling of an ONNX ``dim_param`` or ``--shape`` name: an identifier
    that the .rx grammar reads as a dim (``f32`` becomes ``f32_``, ``2d`` becomes ``d_2d``)."""
    sym = sanitize(name, "dim")
    if sym[0].isdigit():
        sym = f"d_{sym}"
    return f"{sym}_" if sym in _RESERVED else sym


def _dim(v: int | str, what: str) -> D.Dim:
    if isinstance(v, str):
        return D.Sym(dim_symbol(v))
    if v < 0:
        raise RxError(f"{what}: a dimension in --shape must not be negative, got {v}")
    return int(v)


def node_attrs(node: Any, index: int = 0) -> dict[str, Any]:
    """A node's attributes as Python values (tensors as numpy arrays, strings decoded)."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type == onnx.AttributeProto.TENSOR:
            out[a.name] = tensor_array(
                a.t, f"attribute '{a.name}' of node {node_title(node, index)}"
            )
        elif a.type in (onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.SPARSE_TENSORS):
            out[a.name] = a  # refused by the converters that meet it (Constant's sparse_value)
        elif a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            out[a.name] = a  # subgraphs: only If/Loop/Scan carry them, and those are unsupported
        else:
            v = onnx.helper.get_attribute_value(a)
            if a.type == onnx.AttributeProto.FLOAT:
                v = _f32(v)
            elif a.type == onnx.AttributeProto.FLOATS:
                v = [_f32(x) for x in v]
            if isinstance(v, bytes):
                v = v.decode("utf-8", "replace")
            elif isinstance(v, list) and v and isinstance(v[0], bytes):
                v = [x.decode("utf-8", "replace") for x in v]
            out[a.name] = v
    return out


def _f32(v: float) -> float:
    """A float32 attribute as the shortest decimal that reads back as the same float32."""
    return float(repr(np.float32(v)).removeprefix("np.float32(").rstrip(")"))


def node_label(node: Any, index: int) -> str:
    """How a list of nodes names one: its name, or its position when it has none."""
    return f"'{node.name}'" if node.name else f"#{index}"


def node_title(node: Any, index: int) -> str:
    """How an error about one node starts: ``'name' (Op)``, or ``#index (Op)`` without a
    name (the op named once)."""
    return f"'{node.name}' ({node.op_type})" if node.name else f"#{index} ({node.op_type})"

"""The ONNX importer (optional extra ``relaxc[onnx]``): ``import_onnx(path) -> ImportResult``."""

from .importer import ImportResult, import_onnx

__all__ = ["ImportResult", "import_onnx"]

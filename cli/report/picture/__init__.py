"""Pictures of a memory report: the SVG map, the HTML page and the terminal map.

:mod:`.layout` computes what every picture shows (the time axis, the live-bytes curve, the
peak, the named buffers, the marks) from a :class:`FunctionReport`; :mod:`.svg`,
:mod:`.html` and :mod:`.terminal` only draw it; :mod:`.colours` says what a colour means and
:mod:`..origins` maps program points back to source lines and ONNX nodes.
"""

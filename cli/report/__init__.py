"""The memory report: what a planned program needs (:mod:`.analysis`, measured against
:mod:`.baseline`) and the formats it is written in, one table (:mod:`.formats`): the rich
tables (:mod:`.text`), JSON (:mod:`.json`), Chrome trace events (:mod:`.trace`) and the
pictures (:mod:`.picture`: the SVG map, the HTML page, the terminal map). :mod:`.origins`
maps program points back to source lines and ONNX nodes.

The report is no pass: it reads the IR the passes leave and changes nothing. It lives in the
command layer, which may import every layer; nothing below ``cli/`` imports it.
"""

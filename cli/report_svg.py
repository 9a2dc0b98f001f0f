"""The pictures ``relaxc report --svg`` and ``--html`` write (drawn by :mod:`.report_picture`)."""

from __future__ import annotations

from .report_picture.html import report_html
from .report_picture.origins import (
    Origins,
    origins_from_module,
    origins_from_text,
    program_origins,
)
from .report_picture.svg import function_svg, report_svg

__all__ = [
    "Origins",
    "function_svg",
    "origins_from_module",
    "origins_from_text",
    "program_origins",
    "report_html",
    "report_svg",
]

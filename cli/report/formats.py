"""The report's formats, in one table: a format's name -> the writer that turns a report
into that format's text.

``relaxc report`` prints ``text`` (``json`` with ``--json``) and writes ``svg``, ``html`` and
``trace`` into the files those options name; ``relaxc build --json`` prints ``json``. Adding a
format: its module in this package, its row here (a function of a :class:`ReportInput`), and
the option of the command that offers it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

from rich.console import Console

from relaxc.passes.base import Pass

from .analysis import FunctionReport
from .json import reports_json
from .origins import Origins
from .picture.html import report_html
from .picture.svg import report_svg
from .text import print_reports
from .trace import report_trace


@dataclass(frozen=True)
class ReportInput:
    """What every format is written from: the reports of ``file`` (the path as the user
    named it), the pipeline that planned it, and where its program points come from."""

    file: Path
    reports: Sequence[FunctionReport]
    passes: Sequence[Pass]
    origins: Origins = Origins()


Writer = Callable[[ReportInput], str]


def text_report(r: ReportInput) -> str:
    """The rich tables and memory maps, as wide as the terminal and in its colours (none
    when the output is no terminal)."""
    console = Console(soft_wrap=False)
    with console.capture() as captured:
        print_reports(list(r.reports), console, r.origins)
    return captured.get()


def json_report(r: ReportInput) -> str:
    return reports_json(r.file, r.reports, r.passes, r.origins)


def svg_report(r: ReportInput) -> str:
    return report_svg(list(r.reports), r.origins)


def html_report(r: ReportInput) -> str:
    return report_html(list(r.reports), f"relaxc memory report: {r.file.name}", r.origins)


def trace_report(r: ReportInput) -> str:
    return report_trace(r.reports, str(r.file))


FORMATS: Mapping[str, Writer] = MappingProxyType(
    {
        "text": text_report,
        "json": json_report,
        "svg": svg_report,
        "html": html_report,
        "trace": trace_report,
    }
)
"""Every format of the report, by name."""

"""Keeping ``#`` comments through ``relaxc fmt``.

The IR has no place for comments, so the formatter collects them from the text and
re-attaches them by line: a comment after code stays at the end of that statement's line,
a comment on its own line goes before the next statement (or function), and comments after
the last function stay at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from relaxc.ir.nodes import Module


@dataclass
class Comments:
    """Comments keyed by the source line of the node they belong to."""

    leading: dict[int, list[str]] = field(default_factory=dict)
    trailing: dict[int, str] = field(default_factory=dict)
    tail: list[str] = field(default_factory=list)


def scan_comments(text: str) -> list[tuple[int, bool, str]]:
    """Every comment as (line, follows_code_on_its_line, text without trailing spaces)."""
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        in_str = False
        escaped = False
        for i, ch in enumerate(line):
            if in_str:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "#":
                out.append((lineno, bool(line[:i].strip()), line[i:].rstrip()))
                break
    return out


def anchor_lines(module: Module) -> list[int]:
    """Source lines of the nodes comments can attach to (functions, statements, returns)."""
    lines = set()
    for fn in module.functions:
        if fn.loc:
            lines.add(fn.loc.line)
        for s in fn.body:
            if s.loc:
                lines.add(s.loc.line)
        if getattr(fn.ret, "loc", None):
            lines.add(fn.ret.loc.line)
    return sorted(lines)


def attach_comments(text: str, module: Module) -> Comments:
    """Assign each comment of ``text`` to a node line of ``module``."""
    import bisect

    anchors = anchor_lines(module)
    anchor_set = set(anchors)
    result = Comments()
    for line, after_code, body in scan_comments(text):
        if after_code and line in anchor_set:
            prev = result.trailing.get(line)
            result.trailing[line] = body if prev is None else f"{prev} {body}"
            continue
        i = bisect.bisect_right(anchors, line)
        if i < len(anchors):
            result.leading.setdefault(anchors[i], []).append(body)
        else:
            result.tail.append(body)
    return result

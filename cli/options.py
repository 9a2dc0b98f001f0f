"""Option types shared by several commands."""

from __future__ import annotations

import click


def parse_dims(values: tuple[str, ...], hint: str = "--dim") -> dict[str, int]:
    """``("n=128", "m=4")`` → ``{"n": 128, "m": 4}``; bad spellings are usage errors."""
    out: dict[str, int] = {}
    for item in values:
        name, sep, num = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise click.BadParameter(
                f"'{item}' is not NAME=VALUE (for example n=128)", param_hint=hint
            )
        try:
            value = int(num)
        except ValueError:
            raise click.BadParameter(
                f"'{item}': {num!r} is not an integer", param_hint=hint
            ) from None
        if value < 0:
            raise click.BadParameter(f"'{item}': a dimension cannot be negative", param_hint=hint)
        if name in out:
            raise click.BadParameter(f"'{name}' given twice", param_hint=hint)
        out[name] = value
    return out


dim_option = click.option(
    "--dim",
    "dims",
    multiple=True,
    metavar="NAME=N",
    help="Value of a symbolic dim (repeatable), e.g. --dim n=128.",
)


QUIET_HELP = (
    "Print nothing but errors (no summary, no 'wrote ...', no progress); what an option asks "
    "for explicitly (--json, -o -, --stats, --time-passes) is still printed."
)
quiet_option = click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
"""``-q``: one meaning in every command (docs/build.md, "Quiet")."""

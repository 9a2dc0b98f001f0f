"""``relaxc disasm``: print an .rxb file readably."""

from __future__ import annotations

from pathlib import Path

import click

from relaxc.backend.vm import disassemble, load_file
from relaxc.frontend.printer import print_module
from relaxc.ir.diagnostics import RxError

from .errors import Sources, reported_errors


@click.command("disasm")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--ir",
    "as_ir",
    is_flag=True,
    help="Print the program the bytecode encodes as .rx text instead.",
)
@click.pass_obj
def disasm_cmd(obj: dict, file: Path, as_ir: bool) -> None:
    """Print FILE (an .rxb made by relaxc build): its header, constant pool, function table
    and every instruction, registers shown as rN:%name.

    The file is validated first; a truncated, corrupted or wrong-version file is an error.
    """
    with reported_errors(Sources(), obj["debug"]):
        if file.suffix.lower() in (".rx", ".onnx") and file.is_file():
            raise RxError(
                f"{file} is not a relaxc bytecode file but a program: relaxc build {file} "
                f"writes {file.with_suffix('.rxb')}, which relaxc disasm prints"
            )
        exe = load_file(file)
        click.echo(print_module(exe.module) if as_ir else disassemble(exe, str(file)), nl=False)

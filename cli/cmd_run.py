"""``relaxc run``: run a program on inputs and show or save its outputs."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.ir.diagnostics import RxError

from .errors import Sources, reported_errors
from .files import refuse_overwriting_inputs
from .loading import load_program
from .options import dim_option, parse_dims
from .tensors_io import flatten_outputs, inputs_from_npz, write_npz


def entry_function(module, name: str):
    fn = module.get(name)
    if fn is None:
        names = ", ".join("@" + f.name for f in module.functions) or "none"
        raise RxError(f"the module has no function @{name} (functions: {names}); choose one with --entry")
    return fn


def outputs_table(named: list[tuple[str, np.ndarray]]) -> Table:
    table = Table(title="outputs", show_edge=False)
    for col in ("name", "shape", "dtype", "min", "max", "mean", "first values"):
        table.add_column(col, justify="right" if col in ("min", "max", "mean") else "left")
    for name, arr in named:
        flat = arr.reshape(-1)
        if flat.size and arr.dtype.kind in "biuf":
            stats = [f"{flat.min():.6g}", f"{flat.max():.6g}", f"{flat.astype(np.float64).mean():.6g}"]
        else:
            stats = ["-", "-", "-"]
        head = ", ".join(f"{x:.4g}" if arr.dtype.kind == "f" else str(x) for x in flat[:4])
        table.add_row(name, str(tuple(arr.shape)), str(arr.dtype), *stats, head + (" ..." if flat.size > 4 else ""))
    return table


@click.command("run")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--inputs", "inputs_path", type=click.Path(path_type=Path),
              help="An .npz with one array per parameter, named after it (default: random inputs).")
@click.option("-o", "--output", "output_path", type=click.Path(path_type=Path),
              help="Write the outputs to this .npz (output, or output_0, output_1 ... for tuples).")
@click.option("--params", type=click.Path(path_type=Path), help="Weights .npz (default: FILE with .npz suffix).")
@click.option("--entry", default="main", show_default=True, help="The function to run.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs.")
@dim_option
@click.pass_obj
def run_cmd(obj: dict, file: Path, inputs_path: Path | None, output_path: Path | None, params: Path | None,
            entry: str, seed: int, dims: tuple[str, ...]) -> None:
    """Run FILE (an .rx program) with the reference interpreter.

    Without --inputs, inputs are random (seeded) with the declared shapes; a symbolic dim
    takes its --dim value, else its upper bound, and an unbounded dim without --dim is an
    error.
    """
    dim_values = parse_dims(dims)
    sources = Sources()
    with reported_errors(sources, obj["debug"]):
        if output_path is not None:
            refuse_overwriting_inputs(output_path, [file, inputs_path, params])
        prog = load_program(file, sources, params)
        if output_path is not None:
            refuse_overwriting_inputs(output_path, [prog.weights_path])
        fn = entry_function(prog.module, entry)
        if inputs_path is not None:
            args = inputs_from_npz(fn, inputs_path)
        else:
            args = random_inputs(fn, resolve_dims(fn, dim_values), seed)
        interp = Interpreter(prog.module, prog.weights, types=prog.types)
        result = interp.run(fn.name, args, dim_values or None)
        named = flatten_outputs(result)
        if output_path is not None:
            write_npz(output_path, named)
            click.echo(f"wrote {len(named)} output(s) to {output_path}", err=True)
        Console(soft_wrap=True).print(outputs_table(named))

"""The ``autokernel`` Typer app: one module per command group, assembled here."""

from __future__ import annotations

from typing import Annotated

import typer

from autokernel import __version__

app = typer.Typer(
    name="autokernel",
    help="Triton GEMM kernels with fused epilogues: validate, benchmark and tune them against PyTorch.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"autokernel {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """autokernel: fast, checked GEMMs for PyTorch users."""


def _register() -> None:
    from autokernel.cli import bench, fuse_bench, validate
    from autokernel.cli import export, history, report, roofline, tune

    validate.register(app)
    bench.register(app)
    fuse_bench.register(app)
    history.register(app)
    export.register(app)
    roofline.register(app)
    report.register(app)
    tune.register(app)


_register()


def main() -> None:
    app()

"""`autokernel export-best` (alias `export`): the best config per problem from the history, as JSON."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Annotated

import typer

from autokernel.cli._common import (
    EXIT_FAILED,
    ActivationOpt,
    DtypeOpt,
    HistoryOpt,
    err_console,
    fail,
    user_errors,
    warn,
)


def export_best(
    device: Annotated[
        str | None,
        typer.Option("--device", help="The GPU as the history names it, or part of it (h100); "
                                      "default: the only one in the history, else this machine's."),
    ] = None,
    dtype: DtypeOpt = None,
    activation: ActivationOpt = None,
    history_path: HistoryOpt = None,
    output: Annotated[
        str | None, typer.Option("--output", "-o", help="Write the JSON to this file instead of stdout.")
    ] = None,
) -> None:
    """Export the fastest successful config per problem as JSON (stdout, or -o FILE); alias: export.

    Point $AUTOKERNEL_CONFIG at the file and autokernel.matmul / linear use its configs
    (the nearest shape of the same dtype and activation, on the same GPU). Each entry
    has the time (ms), TFLOP/s and the speedup over torch's time for the problem.
    """
    from autokernel import history
    from autokernel.cli.history import load_history

    path, df = load_history(history_path)
    with user_errors(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exported = history.export_best(df, device=device, dtype=dtype, activation=activation)
    for w in caught:
        warn(str(w.message))
    if not exported.entries:
        fail(f"no successful trial of our kernel in {path} for {_scope(exported.device, dtype, activation)}",
             EXIT_FAILED)
    text = exported.to_json()
    if output is None:
        typer.echo(text, nl=False)
        return
    _write(Path(output), text)
    err_console.print(f"wrote {len(exported.entries)} configs for {exported.device} to {output}",
                      highlight=False, markup=False, soft_wrap=True)  # a path or device name is no markup


def _scope(device: str, dtype: list[str] | None, activation: list[str] | None) -> str:
    parts = [device]
    if dtype:
        parts.append("dtype " + "/".join(dtype))
    if activation:
        parts.append("activation " + "/".join(activation))
    return ", ".join(parts)


def _write(path: Path, text: str) -> None:
    """Beside the target, then renamed over it: an old file survives a failed write whole."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        fail(f"cannot write {path}: {exc.strerror or exc}")


def register(app: typer.Typer) -> None:
    app.command(name="export-best")(export_best)
    app.command(name="export", hidden=True)(export_best)

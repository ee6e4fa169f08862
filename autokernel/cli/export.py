"""`autokernel export-best` (alias `export`): the best config per problem from the history, as JSON."""

from __future__ import annotations

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
from autokernel.cli.history import load_trials
from autokernel.history import is_triton_forward, resolve_history_path

# torch and Triton load only in commands that run kernels or pick configs: the modules that
# import them (best, and export, which makes best's files) are imported inside the functions
# that use them.


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
        str | None, typer.Option("--output", "-o", help="Write the JSON to this file instead of stdout "
                                                        "(- for stdout; with --per-device: this directory).")
    ] = None,
    per_device: Annotated[
        bool, typer.Option("--per-device", help="One file per device of the history (GPUs of several models "
                                                "tuned in one run), each named by its device, in the -o directory.")
    ] = False,
) -> None:
    """Export the fastest successful config per problem as JSON (stdout, or -o FILE); alias: export.

    Point $AUTOKERNEL_CONFIG at the file and autokernel.matmul / linear use its configs
    (the nearest shape of the same dtype and activation, on the same GPU). Each entry
    has the time (ms), TFLOP/s and the speedup over torch's time for the problem.
    """
    if device is not None and not device.strip():
        fail("--device is empty: name a GPU of the history (e.g. h100), or leave --device out")
    if output == "-":  # stdout, as the shell's convention has it
        output = None
    if per_device and (output is None or device is not None):
        fail("--per-device writes one file per device into the -o directory: give -o DIR, and no --device")
    if output is not None and not output.strip():
        fail("-o needs a directory name" if per_device else
             "-o needs a file name (leave -o out to print the JSON on stdout)")
    if per_device and Path(output).is_file():
        fail(f"--per-device writes into a directory; {output} is a file")
    if output is not None and not per_device:  # before anything is read
        _refuse_history(Path(output), resolve_history_path(history_path))
    path, trials = load_trials(history_path)
    if per_device:
        _export_per_device(trials, path, Path(output), dtype, activation)
        return
    exported = _export(trials, device, dtype, activation)
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


def _export(trials, device, dtype, activation):
    """The history's best configs for one device (None: the only one), its warnings shown as
    ours and bad filters as one-line errors."""
    from autokernel.export import export_best

    with user_errors(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exported = export_best(trials, device=device, dtype=dtype, activation=activation)
    for w in caught:
        warn(str(w.message))
    return exported


def _export_per_device(trials, path, directory: Path, dtype, activation) -> None:
    """Each device with successful trials of our kernel (replayed rows aside) to
    ``directory``/<device key>.json."""
    from autokernel import best

    names = sorted({t.device for t in trials if is_triton_forward(t) and t.ok and t.ms is not None
                    and t.timing != "replay" and t.device is not None})
    if not names:
        fail(f"no successful trial of our kernel in {path}", EXIT_FAILED)
    written = 0
    for name in names:
        exported = _export(trials, name, dtype, activation)
        if not exported.entries:
            continue
        target = directory / f"{best.device_key(name)}.json"
        _refuse_history(target, path)
        _write(target, exported.to_json())
        written += 1
        err_console.print(f"wrote {len(exported.entries)} configs for {name} to {target}",
                          highlight=False, markup=False, soft_wrap=True)
    if not written:
        fail(f"no successful trial of our kernel in {path} for {_scope('any device', dtype, activation)}",
             EXIT_FAILED)


def _scope(device: str, dtype: list[str] | None, activation: list[str] | None) -> str:
    parts = [device]
    if dtype:
        parts.append("dtype " + "/".join(dtype))
    if activation:
        parts.append("activation " + "/".join(activation))
    return ", ".join(parts)


def _refuse_history(path: Path, history: Path) -> None:
    """A one-line exit 2 where ``path`` is the history the configs are read from."""
    from autokernel.userfiles import same_file

    if same_file(path, history):
        fail(f"-o {path} is the history the configs are read from: the JSON would replace it; "
             "write it to another file")


def _write(path: Path, text: str) -> None:
    """Beside the target, then renamed over it: an old file survives a failed write whole
    (the caller has refused the history as a target: ``_refuse_history``)."""
    from autokernel.userfiles import write_atomically

    try:
        write_atomically(path, text)
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")


def register(app: typer.Typer) -> None:
    app.command(name="export-best")(export_best)
    app.command(name="export", hidden=True)(export_best)

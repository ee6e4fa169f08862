"""`autokernel history`: the last trials of the history file, or the best per problem."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable

import typer
from rich.markup import escape
from rich.table import Table

from autokernel.cli._common import (
    HistoryOpt,
    JsonOpt,
    console,
    fail,
    fmt,
    history_store,
    print_json,
    print_table,
    warn,
)
from autokernel.history import STATUSES, best_per_problem, to_records
from autokernel.records import ConfigError, KernelConfig, Problem, Recorded

if TYPE_CHECKING:
    import pandas as pd


def load_history(path: str | None) -> tuple[Path, "pd.DataFrame"]:
    """The resolved history path and its rows as a frame; each warning of the reader (skipped rows) is one stderr line."""
    store = _existing_store(path)
    return store.path, _warned(store.read)


def load_trials(path: str | None) -> tuple[Path, list["Recorded"]]:
    """The resolved history path and its trials (History.trials); each warning of the reader is one stderr line."""
    store = _existing_store(path)
    return store.path, _warned(store.trials)


def _existing_store(path: str | None):
    """The history to read. A file named by --history must exist (a mistyped path is an
    error, not an empty history); the default one may not exist yet."""
    store = history_store(path, append=False)
    if path is not None and not store.path.exists():
        fail(f"--history {store.path} does not exist")
    return store


def _warned(read: Callable[[], Any]) -> Any:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = read()
    for w in caught:
        warn(str(w.message))
    return out


def _problem_label(row: dict) -> str:
    """The row's problem as Problem.label() prints it; a hand-edited row that is no valid problem as is."""
    try:
        return Problem(row["M"], row["N"], row["K"], row["dtype"] or "float16", row["activation"] or "none",
                       bool(row["bias"]), row["layout"] or "nn").label()
    except (ValueError, TypeError):
        return " ".join(str(row[c]) for c in ("M", "N", "K", "dtype") if row[c] is not None) or "-"


def _config_label(text: str | None) -> str:
    if not text:
        return "-"
    try:
        return KernelConfig.from_json(text).short()
    except ConfigError:
        return text


def _config_object(text: str | None) -> dict | str | None:
    """The config column as a JSON object for --json; a hand-edited non-JSON value stays text."""
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return text


def render(rows: list[dict], title: str) -> None:
    devices = sorted({r["device"] or "-" for r in rows})
    one_device = len(devices) == 1
    table = Table(title=escape(title), caption=f"device: {escape(devices[0])}" if one_device else None)
    columns = ["when (UTC)", "by", "problem", "config", "status", "ms", "TFLOP/s", "timing"]
    columns += [] if one_device else ["device"]
    for name in columns + ["error"]:
        table.add_column(name, justify="right" if name in ("ms", "TFLOP/s") else "left",
                         min_width=min(len(name), 7))
    for r in rows:
        colour = "green" if r["status"] == "success" else "red"
        # Every cell is text from the file (hand-edited, perhaps): escaped, never read as markup.
        cells = [escape(c) for c in (
            (r["timestamp"] or "-")[5:19].replace("T", " "),
            "/".join(x for x in (r["command"], r["strategy"]) if x) or "-",
            _problem_label(r),
            _config_label(r["config"]),
        )]
        cells += [f"[{colour}]{escape(str(r['status']))}[/]", fmt(r["ms"], 4), fmt(r["tflops"], 1),
                  escape(r["timing"] or "-")]
        cells += [] if one_device else [escape(r["device"] or "-")]
        table.add_row(*cells, escape((r["error"] or "")[:80]))
    print_table(table)


def history(
    last: Annotated[int, typer.Option("--last", "-n", help="Show the last N rows; 0 shows all.")] = 20,
    best: Annotated[
        bool, typer.Option("--best", help="The fastest successful row per problem and timing kind.")
    ] = False,
    command: Annotated[
        str | None, typer.Option("--command", help="Only rows written by this command (e.g. tune).")
    ] = None,
    status: Annotated[str | None, typer.Option("--status", help="Only rows with this status (e.g. success).")] = None,
    history_path: HistoryOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show the history of evaluated trials (times in ms, throughput in TFLOP/s)."""
    if last < 0:
        fail(f"--last must be >= 0, got {last}")
    if status is not None and status not in STATUSES:
        fail(f"unknown --status {status!r}; choose one of {', '.join(STATUSES)}")
    if best:
        path, trials = load_trials(history_path)
        if command is not None:
            trials = [t for t in trials if t.command == command]
        # before --status: a failed re-time supersedes a config's earlier success
        rows = [t.to_row() for t in best_per_problem(trials)]
        if status is not None:
            rows = [r for r in rows if r["status"] == status]
        if last:
            rows = rows[-last:]
    else:
        path, df = load_history(history_path)
        if command is not None:
            df = df[df["command"] == command]
        if status is not None:
            df = df[df["status"] == status]
        if last:
            df = df.tail(last)
        rows = to_records(df)
    if json_out:
        for r in rows:
            r["config"] = _config_object(r["config"])
        print_json(rows)
        return
    if not rows:
        console.print(f"no matching rows in {escape(str(path))}")
        return
    what = "best per problem" if best else "last row" if len(rows) == 1 else f"last {len(rows)} rows"
    render(rows, f"autokernel history · {path} · {what}")


def register(app: typer.Typer) -> None:
    app.command(name="history")(history)

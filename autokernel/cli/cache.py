"""`autokernel cache`: what autokernel keeps between runs (the tuner's readings and proposals,
the first-use tuning winners), and clearing it."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from autokernel.autotune import entries, winner_json
from autokernel.autotune import files as autotune_files
from autokernel.cli._common import JsonOpt, console, err_console, fail, fmt, print_json, print_table
from autokernel.tuning.readings import cache_dir, kept_files

cache_app = typer.Typer(help="List (info) or delete (clear) the tuner's kept readings and proposals and the "
                             "first-use tuning winners.", no_args_is_help=True)

KINDS = ("readings", "proposals", "autotune")


def _files() -> tuple:
    directory = cache_dir()
    if directory.exists() and not directory.is_dir():
        fail(f"the cache dir {directory} is a file, not a directory (set AUTOKERNEL_CACHE_DIR elsewhere)")
    if not directory.is_dir():
        return directory, []
    return directory, kept_files(directory) + autotune_files(directory)


@cache_app.command("info")
def info(
    json_out: JsonOpt = False,
    winners: Annotated[bool, typer.Option("--entries", help="Also list each first-use winner (shape, config, time).")]
    = False,
) -> None:
    """List what autokernel keeps, per file.

    The cache dir is $AUTOKERNEL_CACHE_DIR, else $XDG_CACHE_HOME/autokernel, else
    ~/.cache/autokernel. Per file: what it keeps (the tuner's readings or proposals, or
    the winners of tuning on first use: "autotune"), for which GPU and software, how many
    entries, its size, and whether it is stale (written by other autokernel code or
    another torch, Triton or optuna: no run of this install reads it)."""
    directory, files = _files()
    listed = {f["path"]: _winners(f) for f in files if winners and f["kind"] == "autotune"}
    if json_out:
        print_json({"directory": str(directory),
                    "files": [{**f, "path": str(f["path"]),
                               **({"winners": [{**w, "config": winner_json(w["config"])} for w in listed[f["path"]]]}
                                  if f["path"] in listed else {})}
                              for f in files]})
        return
    table = Table(title=f"autokernel cache · {directory}")
    for name in ("file", "keeps", "device", "torch", "triton", "code", "entries", "KiB", "last written", "stale"):
        table.add_column(name, justify="right" if name in ("entries", "KiB") else "left")
    for f in files:
        env = f["env"]
        table.add_row(f["path"].name, f["kind"], env.get("device", "-"), env.get("torch", "-"), env.get("triton", "-"),
                      (env.get("code") or "-")[:10], str(f["entries"]), f"{f['bytes'] / 1024:.1f}", f["last"] or "-",
                      "yes" if f["stale"] else "unreadable" if f.get("error") else "no")
    print_table(table)
    if not files:
        console.print("nothing kept yet: `autokernel tune` keeps its readings here, and tuning on first use "
                      "(AUTOKERNEL_AUTOTUNE=1) its winners", highlight=False)
    for path, rows in listed.items():
        table = Table(title=f"first-use winners · {path.name}")
        for name in ("M", "N", "K", "dtype", "activation", "bias", "mode", "config", "ms", "raced", "failed", "written"):
            table.add_column(name, justify="right" if name in ("M", "N", "K", "ms", "raced", "failed") else "left")
        for w in rows:
            table.add_row(str(w["m"]), str(w["n"]), str(w["k"]), w["dtype"], w["activation"], "yes" if w["bias"] else "no",
                          w["mode"] or "-", _label(w["config"]), fmt(w["ms"], 4), str(w["raced"]), str(w["failed"]),
                          w["written"])
        print_table(table)


def _winners(f: dict) -> list[dict]:
    """The winners of a first-use tuning file ([] where it is unreadable: its row says so)."""
    try:
        return entries(f["path"])
    except (OSError, ValueError):
        return []


@cache_app.command("clear")
def clear(
    kind: Annotated[str, typer.Option("--kind", help="readings, proposals, autotune (first-use winners) or all.")]
    = "all",
    stale: Annotated[bool, typer.Option("--stale", help="Only the files other autokernel code wrote.")] = False,
) -> None:
    """Delete kept readings, proposals and first-use winners.

    The next tune then measures everything again, and tuning on first use races each
    shape again. With --stale, only the files this install would never read. A tune
    running meanwhile starts a new file; a process tuning on first use keeps the winners
    it has in memory and writes them to a new file."""
    if kind not in (*KINDS, "all"):
        fail(f"--kind must be {', '.join(KINDS)} or all, got {kind!r}")
    directory, files = _files()
    deleted = []
    for f in files:
        if kind in ("all", f["kind"]) and (f["stale"] or not stale):
            for path in (f["path"], f["path"].with_name(f["path"].name + ".lock")):
                try:
                    path.unlink(missing_ok=True)
                except OSError as exc:
                    fail(f"cannot delete {path}: {exc.strerror} (deleted before it: {len(deleted)} file(s))")
            deleted.append(f)
            err_console.print(f"deleted {f['path'].name} ({f['entries']} entries)", highlight=False, markup=False)
    what = f"{kind}{', stale only' if stale else ''}"
    entries = sum(f["entries"] for f in deleted)
    err_console.print(f"deleted {len(deleted)} file(s), {entries} kept entr{'y' if entries == 1 else 'ies'} ({what}) "
                      f"from {directory}", highlight=False, markup=False, soft_wrap=True)


def _label(winner) -> str:
    """A first-use winner as the tables name it: a config's short label, or "cublas"."""
    return winner if isinstance(winner, str) else winner.short()


def register(app: typer.Typer) -> None:
    app.add_typer(cache_app, name="cache")

"""`autokernel cache`: what the tuner keeps between runs (readings and proposals), and clearing it."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from autokernel.cli._common import JsonOpt, console, err_console, fail, print_json, print_table

cache_app = typer.Typer(help="List (info) or delete (clear) the tuner's kept readings and proposals.",
                        no_args_is_help=True)


def _files() -> tuple:
    from autokernel.tuning.readings import cache_dir, kept_files

    directory = cache_dir()
    if directory.exists() and not directory.is_dir():
        fail(f"the cache dir {directory} is a file, not a directory (set AUTOKERNEL_CACHE_DIR elsewhere)")
    return directory, kept_files(directory) if directory.is_dir() else []


@cache_app.command("info")
def info(json_out: JsonOpt = False) -> None:
    """List what the tuner keeps, per file.

    The cache dir is $AUTOKERNEL_CACHE_DIR, else $XDG_CACHE_HOME/autokernel, else
    ~/.cache/autokernel. Per file: what it keeps, for which GPU and software, how many
    entries, its size, and whether it is stale (written by other autokernel code or
    another torch, Triton or optuna: no run of this install reads it)."""
    directory, files = _files()
    if json_out:
        print_json({"directory": str(directory),
                    "files": [{**f, "path": str(f["path"])} for f in files]})
        return
    table = Table(title=f"autokernel cache · {directory}")
    for name in ("file", "keeps", "device", "torch", "triton", "code", "entries", "KiB", "last written", "stale"):
        table.add_column(name, justify="right" if name in ("entries", "KiB") else "left")
    for f in files:
        env = f["env"]
        table.add_row(f["path"].name, f["kind"], env.get("device", "-"), env.get("torch", "-"), env.get("triton", "-"),
                      (env.get("code") or "-")[:10], str(f["entries"]), f"{f['bytes'] / 1024:.1f}", f["last"] or "-",
                      "yes" if f["stale"] else "no")
    print_table(table)
    if not files:
        console.print("nothing kept yet: `autokernel tune` keeps its readings here", highlight=False)


@cache_app.command("clear")
def clear(
    kind: Annotated[str, typer.Option("--kind", help="readings, proposals or all.")] = "all",
    stale: Annotated[bool, typer.Option("--stale", help="Only the files other autokernel code wrote.")] = False,
) -> None:
    """Delete kept readings and proposals.

    The next tune then measures everything again. With --stale, only the files this
    install would never read. A tune running meanwhile starts a new file."""
    if kind not in ("readings", "proposals", "all"):
        fail(f"--kind must be readings, proposals or all, got {kind!r}")
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


def register(app: typer.Typer) -> None:
    app.add_typer(cache_app, name="cache")

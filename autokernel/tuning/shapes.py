"""Lists of problems to tune: shapes files (JSON or CSV) and the Linear GEMMs of a torch model.

A shapes file holds rows of M, N, K and optionally dtype, activation, bias, layout
(defaults: float16, none, false, nn), as a CSV with a header or a JSON list of objects
(or an object whose "shapes" is that list); ``autokernel shapes`` adds count and name.
Column names are case-insensitive; any other column is an error, not ignored.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
from pathlib import Path
from typing import Any

from autokernel.records import Problem, parse_dtype
from autokernel.userfiles import write_atomically

# torch loads only to read a model (model_shapes): torch and autokernel.nn are imported
# there, so that reading a shapes file (autokernel loop --shapes) loads neither.

FIELDS = ("M", "N", "K", "dtype", "activation", "bias", "layout", "count", "name")
_TRUE = {"1", "true", "yes", "y", "t"}
_FALSE = {"", "0", "false", "no", "n", "f", "none"}


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{where}: bias must be true or false, got {value!r}")


_KNOWN = {f.lower() for f in FIELDS}


def _known_columns(names, where: str) -> None:
    """ValueError naming the columns that are not FIELDS (a misspelt column would be
    ignored, and its values lost without a word); a column with no name (a trailing comma)
    is left to the rows, which may leave it empty."""
    unknown = [str(k).strip() for k in names if str(k).strip() and str(k).strip().lower() not in _KNOWN]
    if unknown:
        raise ValueError(f"{where}: unknown column{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))} (known: {', '.join(FIELDS)})")


def _problem(row: dict, where: str) -> Problem:
    if None in row:  # csv.DictReader: more cells than the header names
        raise ValueError(f"{where}: more values than the header has columns")
    _known_columns(row, where)
    if any(not str(k).strip() and str(v or "").strip() for k, v in row.items()):  # "M,N,K," is fine, not a value there
        raise ValueError(f"{where}: a value under a column with no name")
    fields = {str(k).strip().lower(): v for k, v in row.items() if str(k).strip()}
    missing = [c for c in ("m", "n", "k") if fields.get(c) in (None, "")]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(c.upper() for c in missing)}")
    try:
        m, n, k = (int(str(fields[c]).strip()) for c in ("m", "n", "k"))
    except ValueError:
        raise ValueError(f"{where}: M, N and K must be integers, got {fields['m']!r}, {fields['n']!r}, {fields['k']!r}") from None
    bias = _as_bool(fields.get("bias", False), where)  # names the place itself
    try:
        return Problem(m, n, k, fields.get("dtype") or "float16", fields.get("activation") or "none",
                       bias, fields.get("layout") or "nn")
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def read_shapes(path: str | Path) -> list[Problem]:
    """The problems of a shapes file, in file order, duplicates dropped; ValueError with
    the file and row for anything malformed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ValueError(f"shapes file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read shapes file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith(("[", "{")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"shapes file {path} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
        rows = data.get("shapes") if isinstance(data, dict) else data
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError(f"shapes file {path}: expected a list of objects with M, N, K")
        where = [f"{path} entry {i + 1}" for i in range(len(rows))]
    else:
        try:
            reader = csv.DictReader(text.splitlines())
            _known_columns(reader.fieldnames or [], f"shapes file {path}, header")
            rows = list(reader)
        except csv.Error as exc:
            raise ValueError(f"shapes file {path} is not a readable CSV: {exc}") from None
        where = [f"{path} line {i + 2}" for i in range(len(rows))]
    problems = list(dict.fromkeys(_problem(r, w) for r, w in zip(rows, where)))
    if not problems:
        raise ValueError(f"shapes file {path} lists no shapes")
    return problems


def model_shapes(spec: str, tokens: int, dtype: str | None = None) -> tuple[list[dict], list[str]]:
    """The GEMMs that ``autokernel.nn.swap_linear`` runs on autokernel's kernels in the model
    built by ``spec`` ("pkg.module:factory", a callable returning an nn.Module, called
    with no arguments), for ``tokens`` rows: one row per distinct (M, N, K, dtype,
    activation, bias), the activation being the one swap_linear fuses into the layer,
    with how many layers share it. Also one note per kind of Linear GEMM that
    swap_linear leaves to torch (not listed: a config tuned for it would never be used).
    The model is built on the meta device, so no weights are allocated; the walk is
    ``autokernel.nn.linear_sites``, the one swap_linear takes."""
    import torch  # torch and the nn layer only for --model: reading a shapes file needs neither

    from autokernel.nn import linear_sites

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--model must look like package.module:factory, got {spec!r}")
    try:
        factory = importlib.import_module(module_name)
        for part in attr.split("."):
            factory = getattr(factory, part)
    except Exception as exc:  # the user's module may raise anything while it is imported
        raise ValueError(f"cannot load {spec}: {type(exc).__name__}: {exc}") from None
    if not callable(factory):
        raise ValueError(f"{spec} is not callable")
    try:
        with torch.device("meta"):
            model = factory()
    except Exception as exc:  # the user's factory: its failure is one line, not a traceback
        raise ValueError(f"{spec}() failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"{spec}() returned {type(model).__name__}, not a torch.nn.Module")
    counts: dict[tuple, list] = {}
    skipped: dict[str, list[str]] = {}
    for site in linear_sites(model):
        if site.skipped is not None:
            skipped.setdefault(site.skipped, []).append(site.path or "(the model)")
            continue
        dt = parse_dtype(dtype) if dtype else parse_dtype(str(site.dtype))
        key = (tokens, site.out_features, site.in_features, dt, site.activation, site.bias)
        counts.setdefault(key, []).append(site.path or "(the model)")
    notes = [f"not listed, torch runs them: {_paths(paths)} ({why})" for why, paths in skipped.items()]
    if not counts:
        left = f"; {'; '.join(notes)}" if notes else ""
        raise ValueError(f"{spec}() has no Linear layer that autokernel.nn.swap_linear runs{left}")
    for m, n, k, dt, act, b in counts:  # a shape no command could read back is refused here
        try:
            Problem(m, n, k, dt, act, b, "nt")
        except ValueError as exc:
            raise ValueError(f"--tokens {tokens}: {exc}") from None
    rows = [{"M": m, "N": n, "K": k, "dtype": dt, "activation": act, "bias": b, "layout": "nt",
             "count": len(names), "name": names[0]} for (m, n, k, dt, act, b), names in counts.items()]
    return rows, notes


def _paths(paths: list[str], shown: int = 3) -> str:
    more = len(paths) - shown
    return ", ".join(paths[:shown]) + (f" and {more} more" if more > 0 else "")


def write_shapes(rows: list[dict], path: Path | None) -> str:
    """The rows as JSON (stdout or a .json path) or CSV (a .csv path); returns the text.
    A file is replaced whole (``write_atomically``): a failed write leaves the old one."""
    if path is not None and path.suffix.lower() == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(FIELDS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = buf.getvalue()
    else:
        text = json.dumps(rows, indent=2) + "\n"
    if path is not None:
        write_atomically(path, text)
    return text

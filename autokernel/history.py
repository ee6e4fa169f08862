"""The CSV history store: one row per evaluation, appended under a lock, read tolerantly.

The file is append-only. Each row is flushed and fsynced before ``append`` returns,
and writers serialise on a sibling ``<path>.lock`` file, so several tuning processes
can share one history. Every record is exactly one physical line (newlines in values
are replaced by spaces), so a torn write spoils at most its own line: the reader skips
it with a warning and the next append starts on a fresh line.

Units: ``ms``, ``ms_p20``, ``ms_p80`` in milliseconds; ``tflops`` in 10^12 FLOP/s.
``gpu_ms`` is the GPU time per call from CUDA-graph replay (no host launch cost),
where it was measured. ``note`` is free text a strategy attaches to a trial (an LLM's
rationale, "re-timed"). ``timing`` says where a time was taken, "gpu" or "interpreter", or "replay" for a trial
answered from a recorded sweep (tune --replay); they are never compared with each other.

A file written with the schema-1 header (no ``gpu_ms``/``note``) is upgraded in place on
the next append: rewritten under the lock to a temporary file with the new header and
empty new cells, then renamed over the old one, so no row is lost.
"""

from __future__ import annotations

import csv
import io
import json
import os
import secrets
import warnings
from collections.abc import Iterable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from filelock import FileLock

from autokernel import best, runtime
from autokernel.config import ConfigError, KernelConfig
from autokernel.records import Problem, normalize_activation, parse_dtype
from autokernel.timing import timing_label

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = 2

COLUMNS: list[str] = [
    "timestamp", "run_id", "command", "strategy", "generation", "name", "kernel",
    "M", "N", "K", "dtype", "activation", "bias", "layout", "config",
    "status", "ms", "ms_p20", "ms_p80", "tflops", "rel_error", "max_abs_diff",
    "timing", "device", "torch_version", "triton_version", "error", "schema_version",
    "gpu_ms", "note",
]

_COLUMNS_V1 = COLUMNS[: COLUMNS.index("schema_version") + 1]
"""The header of schema 1, upgraded on the next append."""

STATUSES = ("success", "failed_correctness", "compile_error", "out_of_resources", "runtime_error", "timeout")
TIMINGS = ("gpu", "interpreter", "replay")

PROBLEM_KEY = ["M", "N", "K", "dtype", "activation", "bias", "layout"]
"""The columns that identify a problem."""

_INT_COLUMNS = ("generation", "M", "N", "K", "schema_version")
_FLOAT_COLUMNS = ("ms", "ms_p20", "ms_p80", "tflops", "rel_error", "max_abs_diff", "gpu_ms")
_LOCK_TIMEOUT_S = 120
_MAX_LINES_NAMED = 10

HISTORY_ENV = "AUTOKERNEL_HISTORY"
DEFAULT_HISTORY = Path("results") / "history.csv"


def resolve_history_path(path: str | Path | None = None) -> Path:
    """The history file: ``path`` if given, else $AUTOKERNEL_HISTORY, else results/history.csv (cwd-relative)."""
    if path is not None and str(path) != "":
        return Path(path)
    env = os.environ.get(HISTORY_ENV)
    if env:
        return Path(env)
    return DEFAULT_HISTORY


def new_run_id() -> str:
    """A short id for one run of a command, unique across processes, e.g. 20240501-121314-3fa9c2."""
    return f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def _triton_version() -> str:
    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return ""


def make_row(
    command: str,
    problem: Problem | None = None,
    config: KernelConfig | None = None,
    *,
    status: str,
    run_id: str,
    **fields: Any,
) -> dict[str, Any]:
    """A complete history row for one evaluation.

    Fills the timestamp (UTC, ISO 8601), device, torch/triton versions, schema version,
    the problem's columns and the config as compact JSON. ``timing`` defaults to where
    kernels run here ("interpreter" or "gpu"). ``fields`` may set any other column
    (ms in milliseconds, tflops in TFLOP/s, ...) and override the defaults; an unknown
    column name, a status not in STATUSES or a timing not in TIMINGS raises ValueError.
    """
    unknown = sorted(set(fields) - set(COLUMNS))
    if unknown:
        raise ValueError(f"unknown history column(s): {', '.join(unknown)}")
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}; choose one of {', '.join(STATUSES)}")
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        timestamp=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        run_id=run_id,
        command=command,
        status=status,
        timing=timing_label(),
        device=runtime.device_name(),
        torch_version=torch.__version__,
        triton_version=_triton_version(),
        schema_version=SCHEMA_VERSION,
    )
    if problem is not None:
        row.update(
            M=problem.m, N=problem.n, K=problem.k, dtype=problem.dtype,
            activation=problem.activation, bias=problem.bias, layout=problem.layout,
        )
    if config is not None:
        row["config"] = config.model_dump_json()
    row.update(fields)
    if row["timing"] not in TIMINGS:
        raise ValueError(f"timing must be one of {', '.join(TIMINGS)}; got {row['timing']!r}")
    return row


def _cell(value: Any) -> str:
    """One CSV cell: None is empty, dicts are compact JSON, and no value spans lines."""
    if value is None:
        return ""
    if isinstance(value, dict):
        value = json.dumps(value, separators=(",", ":"))
    text = str(value)
    if "\n" in text or "\r" in text:
        text = " ".join(text.splitlines())
    return text


def _encode(fields: list[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(fields)
    return buf.getvalue()


class History:
    """An append-only CSV history at ``path`` (see the module docstring for the format)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")

    def __repr__(self) -> str:
        return f"History({str(self.path)!r})"

    def append(self, row: dict[str, Any]) -> None:
        """Append one row (keys from COLUMNS; missing ones are left empty), durably."""
        self.append_many([row])

    def append_many(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append rows under one lock; they are flushed and fsynced before this returns."""
        lines = []
        for row in rows:
            unknown = sorted(set(row) - set(COLUMNS))
            if unknown:
                raise ValueError(f"unknown history column(s): {', '.join(unknown)}")
            lines.append(_encode([_cell(row.get(c)) for c in COLUMNS]))
        if not lines:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.lock_path), timeout=_LOCK_TIMEOUT_S):
            if self.path.is_file() and self.path.stat().st_size > 0:
                with open(self.path, "rb") as f:
                    if self._check_header(f) == 1:
                        self._upgrade_v1()
            with open(self.path, "a+b") as f:
                size = f.seek(0, os.SEEK_END)
                prefix = b""
                if size == 0:
                    prefix = _encode(COLUMNS).encode()
                else:
                    f.seek(size - 1)
                    if f.read(1) != b"\n":
                        prefix = b"\n"  # a torn last line: leave it alone, start afresh
                f.write(prefix + "".join(lines).encode())
                f.flush()
                os.fsync(f.fileno())

    def check_writable(self) -> None:
        """Raise ValueError or OSError now if appends would fail later: a file that isn't
        a history of this schema (or of schema 1, upgraded on append), or a place where
        none can be created."""
        if self.path.is_file() and self.path.stat().st_size > 0:
            with open(self.path, "rb") as f:
                self._check_header(f)
            if not os.access(self.path, os.W_OK):
                raise PermissionError(f"{self.path} is not writable")
            return
        parent = next((p for p in [self.path.parent, *self.path.parent.parents] if p.exists()), None)
        if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK):
            raise PermissionError(f"cannot create {self.path}: {parent} is not a writable directory")

    def _check_header(self, f: Any) -> int:
        """The schema version of the file's header (2, or 1 for the older header); ValueError otherwise."""
        f.seek(0)
        first = f.readline().decode("utf-8", errors="replace").rstrip("\r\n")
        try:
            header = next(csv.reader([first]), [])
        except csv.Error:
            header = []
        if header == COLUMNS:
            return SCHEMA_VERSION
        if header == _COLUMNS_V1:
            return 1
        raise ValueError(
            f"{self.path} does not start with the history header of schema {SCHEMA_VERSION}; "
            "move it aside or pass another --history path"
        )

    def _upgrade_v1(self) -> None:
        """Rewrite a schema-1 file with the current header, each row padded with empty new
        cells; written beside it, fsynced, then renamed over it (caller holds the lock)."""
        pad = "," * (len(COLUMNS) - len(_COLUMNS_V1))
        tmp = self.path.with_name(self.path.name + ".upgrade")
        with open(self.path, "rb") as src, open(tmp, "wb") as dst:
            src.readline()
            dst.write(_encode(COLUMNS).encode())
            for line in src:
                body = line.rstrip(b"\r\n")
                if body.strip():
                    dst.write(body + pad.encode() + b"\n")
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, self.path)

    def read(self) -> "pd.DataFrame":
        """All well-formed rows as a DataFrame with COLUMNS, in file order.

        A missing file gives an empty frame. Rows with the wrong number of fields or an
        unparsable number (a torn write, a hand edit) are skipped with one warning that
        names their line numbers. The file is never modified.
        """
        import pandas as pd

        records: list[list[str]] = []
        bad: list[int] = []
        header = COLUMNS
        if self.path.exists():
            with open(self.path, encoding="utf-8", errors="replace", newline="") as f:
                for lineno, line in enumerate(f, start=1):
                    text = line.rstrip("\r\n")
                    if not text.strip():
                        continue
                    fields = _parse_line(text)
                    if lineno == 1 and fields is not None and "status" in fields:
                        header = fields
                        continue
                    if fields is None or len(fields) != len(header) or not _numbers_parse(header, fields):
                        bad.append(lineno)
                        continue
                    records.append(fields)
        if bad:
            named = ", ".join(map(str, bad[:_MAX_LINES_NAMED])) + (" ..." if len(bad) > _MAX_LINES_NAMED else "")
            warnings.warn(
                f"skipped {len(bad)} malformed row(s) in {self.path}: line(s) {named}",
                RuntimeWarning,
                stacklevel=2,
            )
        df = pd.DataFrame(records, columns=header, dtype=object)
        df = df.reindex(columns=COLUMNS)
        return _typed(df)


def _parse_line(text: str) -> list[str] | None:
    if "\x00" in text:
        return None
    try:
        return next(csv.reader([text], strict=True))
    except csv.Error:
        return None


def _numbers_parse(header: list[str], fields: list[str]) -> bool:
    for name, value in zip(header, fields):
        if value == "" or (name not in _INT_COLUMNS and name not in _FLOAT_COLUMNS):
            continue
        try:
            float(value)
        except ValueError:
            return False
    return True


def _typed(df: "pd.DataFrame") -> "pd.DataFrame":
    """Numbers as numbers (ints nullable), bias as a nullable bool, empty text as None."""
    import pandas as pd

    df = df.replace("", None)
    for c in _FLOAT_COLUMNS:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    for c in _INT_COLUMNS:
        df[c] = pd.to_numeric(df[c], errors="coerce").round().astype("Int64")
    df["bias"] = df["bias"].map({"True": True, "False": False, "true": True, "false": False}).astype("boolean")
    text_cols = [c for c in COLUMNS if c not in _FLOAT_COLUMNS and c not in _INT_COLUMNS and c != "bias"]
    df[text_cols] = df[text_cols].astype(object)
    return df.reset_index(drop=True)


def to_records(df: "pd.DataFrame") -> list[dict[str, Any]]:
    """Rows as plain dicts for JSON: missing values become None, numbers plain Python."""
    return [{k: _plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def _plain(value: Any) -> Any:
    """None for a missing value (None, NA, NaN), a Python scalar for a numpy one."""
    import pandas as pd

    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    return value.item() if hasattr(value, "item") else value


def is_triton_forward(df: "pd.DataFrame") -> "pd.Series":
    """Which rows time our forward kernel (kernel "triton", or empty in rows older than the
    column): not a torch baseline, not a forward + backward step."""
    return df["kernel"].fillna("triton").astype(str) == "triton"


RETIMED = "re-timed"
"""The note that ends a row measured again by the tuner (its leaders, side by side, when a problem's tuning ends)."""


def is_retimed(note: Any) -> bool:
    return isinstance(note, str) and note.endswith(RETIMED)


def drop_superseded(df: "pd.DataFrame") -> "pd.DataFrame":
    """The rows without those a re-time superseded: where a config of a problem (on one
    device, one timing kind) was re-timed, only its median re-timed row of the latest run
    that re-timed it stays.

    The median of that run's re-timed readings, ranked as the tuner ranks (``gpu_ms``
    where measured, else ``ms``; a failed reading after every success), the upper middle
    one of an even count (a config counts as fast only if most of its readings are): a
    real row, not an average. The tuner re-times its leaders in several side-by-side races
    (tuning.loop._confirm_leaders), so no single lucky reading decides; readings of other
    runs, taken at other times and perhaps one after another, are not pooled with them."""
    if df.empty:
        return df
    retimed = df["note"].map(is_retimed).astype(bool)
    if not retimed.any():
        return df
    # The config as the tuner matches it (config_key): rows written before a field existed
    # spell the same config with fewer keys.
    identity = {text: _config_identity(text) for text in df["config"].dropna().unique()}  # parse each text once
    keyed = df.assign(config=df["config"].map(identity))
    row_key = keyed[PROBLEM_KEY + ["device", "timing", "config"]].astype(str).apply(tuple, axis=1)
    again, group = keyed[retimed], row_key[retimed]
    run = again["run_id"].fillna("").astype(str) if "run_id" in again else group.map(lambda _: "")
    latest = run == run.groupby(group).transform("last")  # rows are in the order written
    again, group = again[latest], group[latest]
    speed = again["gpu_ms"].fillna(again["ms"]) if "gpu_ms" in again else again["ms"]
    ok = (again["status"] == "success") & speed.notna()
    order = speed.where(ok, float("inf")).sort_values(kind="stable").index
    again, group = again.loc[order], group.loc[order]
    position = again.groupby(group, sort=False).cumcount()
    count = group.map(group.value_counts())
    median = again[position == count // 2]
    hit = row_key.isin(set(group[median.index]))
    return df[~hit | df.index.isin(median.index)]


def _config_identity(text: Any) -> Any:
    """A config's JSON with every field spelled out (the text itself if it is no config)."""
    from autokernel.config import KernelConfig

    if not isinstance(text, str):
        return text
    try:
        return KernelConfig.from_json(text).to_json()
    except ValueError:
        return text


def best_per_problem(df: "pd.DataFrame") -> "pd.DataFrame":
    """The fastest successful Triton forward row per problem, device and timing kind, sorted
    by problem. Fastest as the tuner ranks (``Trial.rank_ms``): lowest ``gpu_ms`` where it
    was measured, else ``ms``.

    Torch baselines (kernel "torch", "cublaslt", "torch_compile") and forward + backward
    rows (bench --backward, kernels ending in "_autograd", three GEMMs) never count: the
    best is what our kernel reached, on the GPU that ran it. A winner the tuner re-timed
    counts by its median re-timed row (drop_superseded)."""
    ours = drop_superseded(df[is_triton_forward(df)])  # before the success filter: a failed re-time supersedes too
    ok = ours[(ours["status"] == "success") & ours["ms"].notna()]
    keys = PROBLEM_KEY + ["device", "timing"]
    if ok.empty:
        return ok.reset_index(drop=True)
    rank = ok["gpu_ms"].fillna(ok["ms"]).rename("rank_ms")
    idx = rank.groupby([ok[c] for c in keys], dropna=False, sort=True).idxmin()
    return ok.loc[idx.to_numpy()].reset_index(drop=True)


# --- a best-config file from the history -----------------------------------------------


def export_best(df: "pd.DataFrame", device: str | None = None, dtype: str | Iterable[str] | None = None,
                activation: str | Iterable[str] | None = None) -> best.BestFile:
    """The best successful config per problem in history rows ``df`` (``History.read()``).

    device: the GPU name as the history writes it, its ``device_key``, or a part of that
    key naming one device of the history (e.g. "h100"); by default the only device
    with successful trials, else this machine's. Only the device's own kind of timing
    counts: interpreter rows for the interpreter's device, GPU rows for a GPU (replayed
    rows, "replay", never: they repeat a recorded sweep; a warning counts what was skipped).
    dtype, activation: keep only these (names or aliases; one or several).

    Raises ValueError for an unknown dtype or activation, or when no device is given and
    the history has trials of several. No successful trial gives a file with no entries.
    Rows whose config is not a valid KernelConfig (a hand edit) are skipped with a warning.
    """
    dtypes = _names(dtype, parse_dtype)
    activations = _names(activation, normalize_activation)
    df = df[df[["M", "N", "K", "dtype"]].notna().all(axis=1)]
    df = df.assign(activation=df["activation"].fillna("none"), layout=df["layout"].fillna("nn"),
                   bias=df["bias"].fillna(False))
    if dtypes:
        df = df[df["dtype"].isin(dtypes)]
    if activations:
        df = df[df["activation"].isin(activations)]
    ours = is_triton_forward(df)
    success = (df["status"] == "success") & df["ms"].notna()
    name = _pick_device(df, df[ours & success], device)
    timing = "interpreter" if name == runtime.INTERPRETER_DEVICE else "gpu"
    on_device = df["device"] == name
    other = df[ours & success & on_device & (df["timing"] != timing)]
    if not other.empty:
        kinds = ", ".join(sorted(set(other["timing"].fillna("unlabelled"))))
        warnings.warn(f"skipped {len(other)} successful row(s) of {name} timed as {kinds}: "
                      f"only {timing} timings are exported for it", RuntimeWarning, stacklevel=2)
    here = on_device & (df["timing"] == timing)
    ok = drop_superseded(df[ours & here & df["config"].notna()])  # a failed re-time supersedes too
    ok = ok[(ok["status"] == "success") & ok["ms"].notna()]
    configs = _parse_configs(ok["config"])
    ok = ok[ok["config"].map(configs).notna()]
    winners = best_per_problem(ok)
    trials = df[ours & here].groupby(PROBLEM_KEY, dropna=False).size()
    baselines = df[here & success & (df["kernel"] == "torch")]
    torch_ms = baselines.groupby(PROBLEM_KEY, dropna=False)["ms"].min()
    entries = []
    for row in to_records(winners):
        key = tuple(row[c] for c in PROBLEM_KEY)
        base = float(torch_ms[key]) if key in torch_ms.index else None
        entries.append(best.BestEntry(
            **{c: row[c] for c in PROBLEM_KEY}, config=configs[row["config"]], ms=row["ms"],
            gpu_ms=row["gpu_ms"], tflops=row["tflops"], torch_ms=base,
            speedup_vs_cublas=base / row["ms"] if base is not None else None, trials=int(trials[key]),
        ))
    return best.BestFile(
        schema_version=best.SCHEMA_VERSION,
        generated=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        device=name,
        timing=timing,
        torch_version=_joined(winners["torch_version"]),
        triton_version=_joined(winners["triton_version"]),
        entries=entries,
    )


def _names(value: str | Iterable[str] | None, parse) -> list[str]:
    if value is None:
        return []
    return [parse(v) for v in ([value] if isinstance(value, str) else value)]


def _pick_device(df: "pd.DataFrame", successes: "pd.DataFrame", device: str | None) -> str:
    """The history's name of the device to export (see ``export``)."""
    if device is not None:
        known = sorted(set(df["device"].dropna()))
        exact = [d for d in known if best.device_key(d) == best.device_key(device)]
        if exact:
            return exact[0]
        part = [d for d in known if best.device_key(device) in best.device_key(d)]
        if len(part) > 1:
            raise ValueError(f"--device {device!r} matches several devices of the history ({', '.join(part)}); "
                             "name one")
        return part[0] if part else device
    names = sorted(set(successes["device"].dropna()))
    if len(names) <= 1:
        return names[0] if names else runtime.device_name()
    here = runtime.device_name()
    if here in names:
        return here
    raise ValueError(f"the history has trials of several devices ({', '.join(names)}); pick one with --device")


def _parse_configs(texts: "pd.Series") -> dict[str, KernelConfig | None]:
    """Each distinct config text parsed once; None (and one warning) for those that aren't a KernelConfig."""
    parsed: dict[str, KernelConfig | None] = {}
    for text in texts.unique():
        try:
            parsed[text] = KernelConfig.from_dict(json.loads(text))
        except (json.JSONDecodeError, ConfigError):
            parsed[text] = None
    bad = sum(texts.map(parsed).isna())
    if bad:
        warnings.warn(f"skipped {bad} successful row(s) whose config is not a valid KernelConfig",
                      RuntimeWarning, stacklevel=3)
    return parsed


def _joined(values: "pd.Series") -> str | None:
    """The distinct versions the winners were measured with, comma-separated."""
    names = sorted(set(values.dropna()))
    return ", ".join(names) or None

"""The CSV history store: one row per evaluation, appended under a lock, read tolerantly.

The file is append-only. Each row is flushed and fsynced before ``append`` returns,
and writers serialise on a sibling ``<path>.lock`` file, so several tuning processes
can share one history. Every record is exactly one physical line (newlines in values
are replaced by spaces), so a torn write spoils at most its own line: the reader skips
it with a warning and the next append starts on a fresh line. Rows with a number that
cannot be one (an integer with a fraction or beyond int64, a time that is not finite and
positive) are skipped the same way.

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
import math
import os
import secrets
import warnings
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autokernel.records import (
    BIAS_CELLS,
    FLOAT_COLUMNS,
    HISTORY_COLUMNS,
    HISTORY_SCHEMA,
    INT_COLUMNS,
    PROBLEM_COLUMNS,
    STATUSES,
    TIMINGS,
    KernelConfig,
    Problem,
    Recorded,
    Trial,
    problem_columns,
)
from autokernel.userfiles import file_lock

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = HISTORY_SCHEMA
COLUMNS = HISTORY_COLUMNS

_COLUMNS_V1 = COLUMNS[: COLUMNS.index("schema_version") + 1]
"""The header of schema 1, upgraded on the next append."""

PROBLEM_KEY = PROBLEM_COLUMNS
"""The columns that identify a problem."""

_INT_COLUMNS = INT_COLUMNS
_FLOAT_COLUMNS = FLOAT_COLUMNS
_TIME_COLUMNS = ("ms", "ms_p20", "ms_p80", "gpu_ms")
"""The columns that hold a measured time: a finite positive number where filled."""
_INT_LIMIT = 2.0**63
"""Integers at or beyond this magnitude do not fit the nullable int64 columns."""
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
    """A short id for one run of a command, unique across processes, e.g. 20240501-121314-3fa9c27b (32 random bits: two runs in one second share an id about once in 4 billion)."""
    return f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


def _triton_version() -> str:
    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return ""


def _machine() -> dict[str, str]:
    """The columns this machine fills in a row: where timings are taken, the device, the versions.

    Asked only when a row is made: runtime and timing load torch, which reading the
    store (``autokernel history``, the tuner's strategies) does without.
    """
    import torch

    from autokernel import runtime
    from autokernel.timing import timing_label

    return {"timing": timing_label(), "device": runtime.device_name(), "torch_version": torch.__version__,
            "triton_version": _triton_version()}


def make_row(
    command: str,
    problem: Problem | None = None,
    config: KernelConfig | None = None,
    *,
    status: str,
    run_id: str,
    **fields: Any,
) -> dict[str, Any]:
    """A complete history row from its columns, for a row no Trial stands for (a check's).

    Fills the timestamp (UTC, ISO 8601), device, torch/triton versions, schema version,
    the problem's columns and the config as compact JSON. ``timing`` defaults to where
    kernels run here ("interpreter" or "gpu"). ``fields`` may set any other column
    (ms in milliseconds, tflops in TFLOP/s, ...) and override the defaults; an unknown
    column name, a status not in STATUSES or a timing not in TIMINGS raises ValueError.
    """
    own: dict[str, Any] = {"status": status}
    if problem is not None:
        own.update(problem_columns(problem))
    if config is not None:
        own["config"] = config.to_json()
    return _row(command, run_id, own, fields)


def trial_row(command: str, trial: Trial, *, run_id: str, **fields: Any) -> dict[str, Any]:
    """The history row of ``trial``: its own columns (Trial.to_row; an unset timing is this
    machine's), the context make_row fills, then ``fields`` (the strategy, generation, a
    device name) over them; ValueError as make_row's."""
    return _row(command, run_id, {k: v for k, v in trial.to_row().items() if v is not None}, fields)


def _row(command: str, run_id: str, own: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(fields) - set(COLUMNS))
    if unknown:
        raise ValueError(f"unknown history column(s): {', '.join(unknown)}")
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        timestamp=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        run_id=run_id,
        command=command,
        schema_version=SCHEMA_VERSION,
        **_machine(),
    )
    row.update(own)
    row.update(fields)
    if row["status"] not in STATUSES:
        raise ValueError(f"unknown status {row['status']!r}; choose one of {', '.join(STATUSES)}")
    if row["timing"] not in TIMINGS:
        raise ValueError(f"timing must be one of {', '.join(TIMINGS)}; got {row['timing']!r}")
    return row


def as_read(rows: Iterable[dict[str, Any]]) -> list[Recorded]:
    """Rows (make_row's, trial_row's) as History.trials reads them back once appended: each
    cell written as ``append`` writes it, then parsed; a row that names no valid problem is
    left out."""
    configs: dict[str, KernelConfig | None] = {}
    out = []
    for row in rows:
        record = Recorded.from_row({c: _cell(row.get(c)) for c in COLUMNS}, configs=configs)
        if record is not None:
            out.append(record)
    return out


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
        with file_lock(self.lock_path).acquire(timeout=_LOCK_TIMEOUT_S):
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
        first = f.readline().decode("utf-8-sig", errors="replace").rstrip("\r\n")  # a spreadsheet may add a BOM
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

    def trials(self) -> list[Recorded]:
        """Every well-formed row as a Recorded, in file order, each config text parsed once.

        As ``read``: a missing file gives none, torn or malformed rows are skipped with one
        warning, columns the file lacks are empty and columns it has beyond the history's
        are ignored. Rows whose cells name no valid problem (a hand edit) are skipped too,
        with one more warning that names their lines.
        """
        header, rows = self._parse()
        configs: dict[str, KernelConfig | None] = {}
        out: list[Recorded] = []
        bad: list[int] = []
        for line, fields in rows:
            record = Recorded.from_row(dict(zip(header, fields)), line=line, configs=configs)
            if record is None:
                bad.append(line)
            else:
                out.append(record)
        if bad:
            warnings.warn(f"skipped {len(bad)} row(s) that name no valid problem in {self.path}: "
                          f"line(s) {_named(bad)}", RuntimeWarning, stacklevel=2)
        return out

    def read(self) -> "pd.DataFrame":
        """All well-formed rows as a DataFrame with COLUMNS, in file order, for analysis
        (the ``history`` command); the tuner and export read ``trials``.

        A missing file gives an empty frame. Rows with the wrong number of fields or a
        number that is unparsable or impossible (a torn write, a hand edit: an integer
        with a fraction or beyond int64, a time that is not finite and positive) are
        skipped with one warning that names their line numbers. The file is never modified.
        """
        import pandas as pd

        header, rows = self._parse()
        df = pd.DataFrame([fields for _, fields in rows], columns=header, dtype=object)
        df = df.reindex(columns=COLUMNS)
        return _typed(df)

    def _parse(self) -> tuple[list[str], list[tuple[int, list[str]]]]:
        """The file's header and its well-formed rows (line number, cells); one warning
        names the lines of the rows skipped. The file is never modified."""
        rows: list[tuple[int, list[str]]] = []
        bad: list[int] = []
        header = COLUMNS
        if self.path.exists():
            with open(self.path, encoding="utf-8-sig", errors="replace", newline="") as f:
                for lineno, line in enumerate(f, start=1):
                    text = line.rstrip("\r\n")
                    if not text.strip():
                        continue
                    fields = _parse_line(text)
                    if lineno == 1 and fields is not None and "status" in fields:
                        header = fields
                        continue
                    if fields is None or len(fields) != len(header) or not _numbers_valid(header, fields):
                        bad.append(lineno)
                        continue
                    rows.append((lineno, fields))
        if bad:
            warnings.warn(f"skipped {len(bad)} malformed row(s) in {self.path}: line(s) {_named(bad)}",
                          RuntimeWarning, stacklevel=3)
        return header, rows


def _named(lines: list[int]) -> str:
    return ", ".join(map(str, lines[:_MAX_LINES_NAMED])) + (" ..." if len(lines) > _MAX_LINES_NAMED else "")


def _parse_line(text: str) -> list[str] | None:
    if "\x00" in text:
        return None
    try:
        return next(csv.reader([text], strict=True))
    except csv.Error:
        return None


def _numbers_valid(header: list[str], fields: list[str]) -> bool:
    """Whether every filled number cell parses and could have been written: integers
    whole and within int64, times finite and positive (not-a-number reads as empty); and a
    filled bias is true or false."""
    for name, value in zip(header, fields):
        if name == "bias" and value and value not in BIAS_CELLS:
            return False
        if value == "" or (name not in _INT_COLUMNS and name not in _FLOAT_COLUMNS):
            continue
        try:
            number = float(value)
        except ValueError:
            return False
        if number != number:
            continue
        if name in _INT_COLUMNS and not (abs(number) < _INT_LIMIT and number == int(number)):
            return False
        if name in _TIME_COLUMNS and not (0 < number < math.inf):
            return False
    return True


def _typed(df: "pd.DataFrame") -> "pd.DataFrame":
    """Numbers as numbers (ints nullable), bias as a nullable bool, empty text as None."""
    import pandas as pd

    df = df.replace("", None)
    for c in _FLOAT_COLUMNS:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    for c in _INT_COLUMNS:
        df[c] = pd.to_numeric(df[c], errors="coerce").round().astype("Int64")  # _numbers_valid kept them within int64
    df["bias"] = df["bias"].map(BIAS_CELLS).astype("boolean")
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


def is_triton_forward(trial: Trial) -> bool:
    """Whether ``trial`` times our forward kernel (kernel "triton"; a row older than the
    column reads as one): not a torch baseline, not a forward + backward step."""
    return trial.kernel == "triton"


RETIMED = "re-timed"
"""The note that ends a row measured again by the tuner (its leaders, side by side, when a problem's tuning ends)."""


def is_retimed(note: Any) -> bool:
    return isinstance(note, str) and note.endswith(RETIMED)


def _speed(trial: Trial) -> float:
    """How the tuner ranks ``trial``: its rank_ms, a failure (or no time) after every success."""
    return trial.rank_ms if trial.ok and trial.rank_ms is not None else math.inf


def drop_superseded(trials: Sequence[Recorded]) -> list[Recorded]:
    """The trials without those a re-time superseded: where a config of a problem (on one
    device, one timing kind) was re-timed, only its median re-timed row of the latest run
    that re-timed it stays.

    The median of that run's re-timed readings, ranked as the tuner ranks (``gpu_ms``
    where measured, else ``ms``; a failed reading after every success), the upper middle
    one of an even count (a config counts as fast only if most of its readings are): a
    real row, not an average. The tuner re-times its leaders in several side-by-side races
    (tuning.loop._confirm_leaders), so no single lucky reading decides; readings of other
    runs, taken at other times and perhaps one after another, are not pooled with them.
    Configs match as the tuner matches them: rows written before a field existed spell the
    same config with fewer keys."""

    def key(t: Recorded) -> tuple:
        return t.problem, t.device, t.timing, t.same_config

    again: dict[tuple, list[Recorded]] = {}
    for t in trials:
        if is_retimed(t.note):
            again.setdefault(key(t), []).append(t)
    if not again:
        return list(trials)
    medians: set[int] = set()
    for rows in again.values():
        latest = rows[-1].run_id or ""  # rows are in the order written
        rows = sorted((t for t in rows if (t.run_id or "") == latest), key=_speed)  # stable: ties in file order
        medians.add(id(rows[len(rows) // 2]))
    return [t for t in trials if key(t) not in again or id(t) in medians]


def best_per_problem(trials: Sequence[Recorded]) -> list[Recorded]:
    """The fastest successful Triton forward trial per problem, device and timing kind,
    sorted by problem. Fastest as the tuner ranks (``Trial.rank_ms``): lowest ``gpu_ms``
    where it was measured, else ``ms``; the first written of equals.

    Torch baselines (kernel "torch", "cublaslt", "torch_compile") and forward + backward
    rows (bench --backward, kernels ending in "_autograd", three GEMMs) never count: the
    best is what our kernel reached, on the GPU that ran it. A winner the tuner re-timed
    counts by its median re-timed row (drop_superseded)."""
    ours = drop_superseded([t for t in trials if is_triton_forward(t)])  # before the success filter: a failed re-time supersedes too
    best: dict[tuple, Recorded] = {}
    for t in ours:
        if not (t.ok and t.ms is not None):
            continue
        group = (t.problem, t.device, t.timing)
        if group not in best or t.rank_ms < best[group].rank_ms:
            best[group] = t
    return sorted(best.values(), key=_problem_order)


def _problem_order(t: Recorded) -> tuple:
    """Sorted as the history's columns sort: by problem, then device and timing, a missing one last."""
    p = t.problem
    return (p.m, p.n, p.k, p.dtype, p.activation, p.bias, p.layout, t.device is None, t.device or "",
            t.timing is None, t.timing or "")

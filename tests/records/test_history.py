"""The CSV history: concurrent appends, torn and malformed rows, path resolution."""

from __future__ import annotations

import csv
import gc
import multiprocessing as mp
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from autokernel import history, userfiles
from autokernel.config import KernelConfig
from autokernel.history import COLUMNS, History, best_per_problem, make_row, new_run_id, resolve_history_path
from autokernel.records import Problem

ROOT = Path(__file__).resolve().parents[2]

WORKERS = 4
ROWS_PER_WORKER = 50


def _row(ms: float = 1.0, m: int = 64, status: str = "success", **fields):
    return make_row("test", Problem(m, 32, 16), KernelConfig(), status=status, run_id="r1", ms=ms, **fields)


def _append_rows(path: str, worker: int, start) -> None:
    h = History(path)
    start.wait()  # all workers append at the same moment
    for i in range(ROWS_PER_WORKER):
        h.append(make_row("tune", Problem(64, 64, 64), status="success", run_id=f"w{worker}", generation=i, ms=0.1 + i))


def test_concurrent_appends_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "history.csv"
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(WORKERS)
    procs = [ctx.Process(target=_append_rows, args=(str(path), w, start)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    lines = path.read_text().splitlines()
    assert len(lines) == 1 + WORKERS * ROWS_PER_WORKER
    assert sum(line.startswith("timestamp,") for line in lines) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = History(path).read()
    assert len(df) == WORKERS * ROWS_PER_WORKER
    assert sorted(df["run_id"].value_counts().to_dict().items()) == [(f"w{w}", ROWS_PER_WORKER) for w in range(WORKERS)]
    for w in range(WORKERS):
        assert sorted(df.loc[df["run_id"] == f"w{w}", "generation"]) == list(range(ROWS_PER_WORKER))


def test_appends_keep_one_lock_object_per_file(tmp_path: Path, monkeypatch) -> None:
    """A FileLock dropped after each append is released again by its finalizer, where a
    Ctrl-C that lands is swallowed and the run goes on: the process keeps one per file."""
    made = []

    class Counting(userfiles.FileLock):
        def __init__(self, *args, **kwargs):
            made.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(userfiles, "FileLock", Counting)
    h = History(tmp_path / "h.csv")
    for i in range(3):
        h.append(_row(ms=1.0 + i))
    gc.collect()
    assert made == [str(h.lock_path)]
    assert userfiles.file_lock(h.lock_path) is userfiles.file_lock(str(h.lock_path))
    assert len(h.read()) == 3


def test_round_trip_types(tmp_path: Path) -> None:
    h = History(tmp_path / "h.csv")
    cfg = KernelConfig(block_m=64)
    h.append(make_row("bench", Problem(8, 16, 32, dtype="bf16", bias=True, activation="relu"), cfg,
                      status="success", run_id="r", ms=0.25, tflops=1.5, error="two\nlines"))
    row = history.to_records(h.read())[0]
    assert (row["M"], row["N"], row["K"]) == (8, 16, 32)
    assert row["dtype"] == "bfloat16" and row["activation"] == "relu" and row["bias"] is True
    assert KernelConfig.from_json(row["config"]) == cfg
    assert row["ms"] == 0.25 and row["tflops"] == 1.5
    assert row["error"] == "two lines"
    assert row["timing"] in ("gpu", "interpreter")
    assert row["schema_version"] == history.SCHEMA_VERSION
    assert row["strategy"] is None


def test_missing_file_reads_empty(tmp_path: Path) -> None:
    df = History(tmp_path / "none.csv").read()
    assert df.empty and list(df.columns) == COLUMNS
    assert not (tmp_path / "none.csv").exists()


def test_torn_last_line_is_skipped_and_next_append_parses(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    h = History(path)
    h.append_many([_row(1.0), _row(2.0)])
    full = _row(3.0)
    line = ",".join("" if full[c] is None else str(full[c]) for c in COLUMNS)
    with open(path, "a") as f:
        f.write(line[: len(line) // 2] + '"half a quoted')  # a writer died mid-row
    before = path.read_bytes()
    with pytest.warns(RuntimeWarning, match=r"line\(s\) 4"):
        df = h.read()
    assert list(df["ms"]) == [1.0, 2.0]
    assert path.read_bytes() == before  # reading never modifies the file

    h.append(_row(4.0))
    assert path.read_bytes().startswith(before)  # existing bytes untouched
    with pytest.warns(RuntimeWarning, match=r"line\(s\) 4"):
        df = h.read()
    assert list(df["ms"]) == [1.0, 2.0, 4.0]


def test_malformed_middle_rows_are_skipped_with_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    h = History(path)
    h.append(_row(1.0))
    with open(path, "a", newline="") as f:
        f.write("only,three,fields\n")
        bad_number = _row(9.0)
        bad_number["ms"] = "fast"
        csv.writer(f, lineterminator="\n").writerow(["" if bad_number[c] is None else bad_number[c] for c in COLUMNS])
    h.append(_row(2.0))
    with pytest.warns(RuntimeWarning, match=r"skipped 2 malformed row\(s\).*line\(s\) 3, 4"):
        df = h.read()
    assert list(df["ms"]) == [1.0, 2.0]


def test_a_size_with_a_fraction_is_no_size(tmp_path: Path) -> None:
    """M = 16.5 (a hand edit) was read as 16: the row is skipped with its line named, by
    both readers; 16.0, as a spreadsheet writes a whole number, is 16."""
    path = tmp_path / "h.csv"
    h = History(path)
    h.append(_row(1.0))
    with open(path, "a", newline="") as f:
        for m, ms in (("16.5", 9.0), ("16.0", 2.0)):
            row = _row(ms)
            row["M"] = m
            csv.writer(f, lineterminator="\n").writerow(["" if row[c] is None else row[c] for c in COLUMNS])
    with pytest.warns(RuntimeWarning, match=r"skipped 1 malformed row\(s\).*line\(s\) 3$"):
        df = h.read()
    assert list(df["ms"]) == [1.0, 2.0] and list(df["M"]) == [64, 16]
    with pytest.warns(RuntimeWarning, match=r"line\(s\) 3$"):
        trials = h.trials()
    assert [(t.problem.m, t.ms) for t in trials] == [(64, 1.0), (16, 2.0)]


def test_a_bias_cell_that_is_neither_true_nor_false_is_no_problem(tmp_path: Path) -> None:
    """bias "yes" (a hand edit) was read as no bias: the row is skipped with its line named,
    by both readers."""
    path = tmp_path / "h.csv"
    h = History(path)
    h.append(_row(1.0))
    with open(path, "a", newline="") as f:
        row = _row(9.0)
        row["bias"] = "yes"
        csv.writer(f, lineterminator="\n").writerow(["" if row[c] is None else row[c] for c in COLUMNS])
    with pytest.warns(RuntimeWarning, match=r"line\(s\) 3$"):
        trials = h.trials()
    assert [t.ms for t in trials] == [1.0]
    with pytest.warns(RuntimeWarning, match=r"line\(s\) 3$"):
        assert list(h.read()["ms"]) == [1.0]


def test_append_refuses_a_foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(ValueError, match="header"):
        History(path).append(_row())
    assert path.read_text() == "a,b,c\n1,2,3\n"


def test_make_row_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown history column"):
        make_row("x", status="success", run_id="r", speed=3)
    with pytest.raises(ValueError, match="unknown status"):
        make_row("x", status="ok", run_id="r")
    with pytest.raises(ValueError, match="timing"):
        make_row("x", status="success", run_id="r", timing="cpu")
    with pytest.raises(ValueError, match="unknown history column"):
        History("unused.csv").append({"speed": 3})


def test_new_run_ids_are_unique() -> None:
    ids = {new_run_id() for _ in range(100)}
    assert len(ids) == 100


def test_best_per_problem_keeps_fastest_success_per_problem_and_timing(tmp_path: Path) -> None:
    h = History(tmp_path / "h.csv")
    h.append_many([
        _row(3.0, timing="gpu"),
        _row(1.0, timing="gpu"),
        _row(0.5, status="failed_correctness", timing="gpu"),
        _row(0.1, timing="interpreter"),
        _row(2.0, m=128, timing="gpu"),
    ])
    got = sorted((t.problem.m, t.timing, t.ms) for t in best_per_problem(h.trials()))
    assert got == [(64, "gpu", 1.0), (64, "interpreter", 0.1), (128, "gpu", 2.0)]


def test_history_path_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AUTOKERNEL_HISTORY", raising=False)
    assert resolve_history_path() == Path("results") / "history.csv"
    monkeypatch.setenv("AUTOKERNEL_HISTORY", str(tmp_path / "env.csv"))
    assert resolve_history_path() == tmp_path / "env.csv"
    assert resolve_history_path(tmp_path / "explicit.csv") == tmp_path / "explicit.csv"
    assert resolve_history_path(str(tmp_path / "s.csv")) == tmp_path / "s.csv"


def test_best_per_problem_is_ours_per_device(tmp_path):
    from autokernel.history import best_per_problem

    p = Problem(64, 64, 64)
    h = History(tmp_path / "h.csv")
    h.append_many([
        make_row("bench", p, status="success", run_id="r", kernel="torch", ms=0.5, timing="gpu", device="H100"),
        make_row("bench", p, status="success", run_id="r", kernel="triton", ms=1.2, timing="gpu", device="H100"),
        make_row("bench", p, status="success", run_id="r", kernel="triton", ms=0.9, timing="gpu", device="H200"),
        make_row("bench", p, status="success", run_id="r", kernel="triton_autograd", ms=0.1, timing="gpu",
                 device="H100"),
    ])
    best = best_per_problem(h.trials())
    assert sorted((t.device, t.ms) for t in best) == [("H100", 1.2), ("H200", 0.9)]


def test_best_per_problem_ranks_by_gpu_time_where_measured(tmp_path):
    p = Problem(64, 64, 64)
    h = History(tmp_path / "h.csv")
    h.append_many([make_row("tune", p, status="success", run_id="r", ms=ms, gpu_ms=gpu_ms, timing="gpu", device="H100")
                   for ms, gpu_ms in ((1.0, 0.9), (1.1, 0.6), (0.8, None))])
    (best,) = best_per_problem(h.trials())
    assert (best.ms, best.gpu_ms) == (1.1, 0.6)  # as Trial.rank_ms ranks: the tuner's winner


def test_reading_the_history_loads_neither_torch_nor_triton(tmp_path: Path) -> None:
    """The store and its rankings are light (``autokernel history`` reads them); torch loads
    only when a row is made, for the machine's columns."""
    path = tmp_path / "h.csv"
    History(path).append(make_row("bench", Problem(8, 8, 8), KernelConfig(), status="success", run_id="r", ms=1.0))
    code = ("import sys; from autokernel.history import History, best_per_problem; "
            f"print(len(best_per_problem(History({str(path)!r}).trials()))); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'triton', 'pandas'}))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["1", "[]"]


def test_a_row_names_this_machine(tmp_path: Path) -> None:
    import torch

    from autokernel import runtime
    from autokernel.timing import timing_label

    row = make_row("bench", Problem(8, 8, 8), status="success", run_id="r")
    assert (row["device"], row["timing"], row["torch_version"]) == (runtime.device_name(), timing_label(),
                                                                    torch.__version__)
    assert row["triton_version"] == history._triton_version()

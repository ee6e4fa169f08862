"""The history read into records (History.trials): the CSV row <-> Recorded mapping, and
what the reader guarantees (torn rows, schema-1 files, columns it does not know)."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import pytest

from autokernel import history
from autokernel.config import KernelConfig
from autokernel.history import COLUMNS, History, make_row, to_records, trial_row
from autokernel.records import Problem, Recorded, Trial

P = Problem(64, 32, 16, "bf16", "gelu", True, "tn")
CFG = KernelConfig(block_m=64, block_n=32, block_k=16, num_warps=4)


def _trial(ms: float = 0.5, **fields) -> Trial:
    return Trial(P, CFG, "success", ms=ms, p20=ms * 0.9, p80=ms * 1.1, tflops=2.0, rel_error=1e-3,
                 max_abs_diff=1e-2, timing="gpu", gpu_ms=ms * 0.8, note="why", **fields)


def _quiet_trials(store: History) -> list[Recorded]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return store.trials()


def test_a_trial_reads_back_as_it_was_written(tmp_path: Path) -> None:
    store = History(tmp_path / "h.csv")
    trial = _trial()
    store.append(trial_row("tune", trial, run_id="r1", strategy="grid", generation=3, name="triton", device="GPU X"))
    (back,) = _quiet_trials(store)
    assert isinstance(back, Trial) and back.problem == P and back.config == CFG
    for name in ("status", "kernel", "ms", "p20", "p80", "tflops", "rel_error", "max_abs_diff", "timing", "gpu_ms",
                 "note", "error"):
        assert getattr(back, name) == getattr(trial, name), name
    assert (back.run_id, back.command, back.strategy, back.generation, back.name, back.device) == (
        "r1", "tune", "grid", 3, "triton", "GPU X")
    assert back.schema_version == history.SCHEMA_VERSION and back.line == 2
    assert back.rank_ms == trial.rank_ms and back.timed
    # the same row either way: the record's columns are the frame's
    assert back.to_row() == to_records(store.read())[0]


def test_each_config_text_is_parsed_once(tmp_path: Path) -> None:
    store = History(tmp_path / "h.csv")
    store.append_many([trial_row("tune", _trial(ms), run_id="r") for ms in (0.1, 0.2)])
    a, b = _quiet_trials(store)
    assert a.config is b.config


def test_a_config_that_is_none_keeps_its_text(tmp_path: Path) -> None:
    store = History(tmp_path / "h.csv")
    row = make_row("tune", P, None, status="success", run_id="r", ms=0.1)
    store.append_many([{**row, "config": '{"block_m": 3}'}, make_row("bench", P, None, status="success", run_id="r",
                                                                      kernel="torch", ms=0.2)])
    bad, torch_row = _quiet_trials(store)
    assert bad.config is None and bad.config_text == '{"block_m": 3}' and bad.kernel == "triton"
    assert torch_row.config is None and torch_row.config_text is None and torch_row.kernel == "torch"


def test_a_torn_row_is_skipped_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    store = History(path)
    store.append_many([trial_row("tune", _trial(ms), run_id="r") for ms in (0.1, 0.2)])
    with open(path, "a") as f:
        f.write("2024-01-01T00:00:00,torn,\"half")
    with pytest.warns(RuntimeWarning, match=r"skipped 1 malformed row\(s\).*line\(s\) 4"):
        trials = store.trials()
    assert [t.ms for t in trials] == [0.1, 0.2]
    store.append(trial_row("tune", _trial(0.3), run_id="r"))  # starts on a fresh line
    with pytest.warns(RuntimeWarning, match=r"line\(s\) 4"):
        assert [t.ms for t in store.trials()] == [0.1, 0.2, 0.3]


def test_a_schema_1_file_reads_and_upgrades(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    v1 = COLUMNS[: COLUMNS.index("schema_version") + 1]
    old = make_row("tune", P, CFG, status="success", run_id="old", ms=0.4, timing="gpu", device="GPU X",
                   schema_version=1)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(v1)
        writer.writerow(["" if old[c] is None else old[c] for c in v1])
    (first,) = _quiet_trials(History(path))
    assert first.config == CFG and first.ms == 0.4 and first.gpu_ms is None and first.note is None
    assert first.rank_ms == 0.4 and first.schema_version == 1
    History(path).append(trial_row("tune", _trial(0.3), run_id="new"))
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    a, b = _quiet_trials(History(path))
    assert (a.run_id, a.gpu_ms) == ("old", None) and (b.run_id, b.gpu_ms) == ("new", pytest.approx(0.24))


def test_columns_it_does_not_know_are_ignored_and_order_does_not_matter(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    row = trial_row("tune", _trial(0.5), run_id="r", device="GPU X")
    header = ["extra", *reversed([c for c in COLUMNS if c != "note"])]  # one column unknown, one missing
    with open(path, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerow(["x" if c == "extra" else "" if row[c] is None else row[c] for c in header])
    (t,) = _quiet_trials(History(path))
    assert t.problem == P and t.config == CFG and t.ms == 0.5 and t.device == "GPU X" and t.note is None
    df = History(path).read()
    assert list(df.columns) == COLUMNS and df["ms"].tolist() == [0.5]


def test_a_row_that_names_no_problem_is_left_out_of_the_trials(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    store = History(path)
    good = make_row("tune", P, CFG, status="success", run_id="r", ms=0.1)
    store.append_many([{**good, "dtype": "float8"}, {**good, "M": None}, good])
    with pytest.warns(RuntimeWarning, match=r"skipped 2 row\(s\) that name no valid problem.*line\(s\) 2, 3"):
        (t,) = store.trials()
    assert t.line == 4
    assert len(History(path).read()) == 3  # the frame, for people, keeps every well-formed row


def test_missing_file_gives_no_trials(tmp_path: Path) -> None:
    assert _quiet_trials(History(tmp_path / "none.csv")) == []
    assert not (tmp_path / "none.csv").exists()

"""Hand-edited or foreign history rows: skipped where read, never a crash downstream."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autokernel.cli import app
from autokernel.config import KernelConfig
from autokernel.history import COLUMNS, History, make_row
from autokernel.records import Problem, Trial
from autokernel.tuning.space import config_key
from autokernel.tuning.strategies import make_strategy

from tests.helpers import gpu_space

runner = CliRunner()
P = Problem(64, 32, 16)
DEVICE = "NVIDIA H100 80GB HBM3"


def _row(**fields) -> dict:
    return make_row("tune", P, KernelConfig(), status="success", run_id="r", timing="gpu", device=DEVICE,
                    **{"ms": 0.5, **fields})


def _write_by_hand(path: Path, row: dict, **cells: str) -> None:
    """Append ``row`` with ``cells`` typed over it, as a hand edit would (no checks)."""
    row = {**row, **cells}
    with open(path, "a", newline="") as f:
        csv.writer(f, lineterminator="\n").writerow(["" if row[c] is None else row[c] for c in COLUMNS])


@pytest.mark.parametrize("timed", [2, 12], ids=["start-up", "tpe"])
def test_tpe_leaves_out_history_configs_outside_the_space(timed: int) -> None:
    """A config of another space (variant "auto", not among this space's variants; a tile
    beyond its choices) cannot be told to the study: TPE proposes around it."""
    space = gpu_space()
    valid = space.configs()[:timed]
    foreign = [KernelConfig(), KernelConfig(variant="grouped", block_k=16)]
    assert not any(space.contains(c) for c in foreign)
    history = [Trial(P, c, "success", ms=0.1 * (i + 1)) for i, c in enumerate(valid)]
    history += [Trial(P, c, "success", ms=0.01) for c in foreign]
    proposed = make_strategy("optuna", seed=3).propose(space, history, 6)
    keys = [config_key(c) for c in proposed]
    assert len(set(keys)) == 6 and all(space.contains(c) for c in proposed)
    assert not set(keys) & {config_key(t.config) for t in history}


def test_integers_beyond_int64_skip_their_rows(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    store = History(path)
    store.append(_row(ms=1.0))
    for m in ("1e20", "1e30", "inf", "-inf", "99999999999999999999"):
        _write_by_hand(path, _row(), M=m)
    store.append(_row(ms=2.0))
    before = path.read_bytes()
    with pytest.warns(RuntimeWarning, match=r"skipped 5 malformed row\(s\).*line\(s\) 3, 4, 5, 6, 7$"):
        df = store.read()
    assert list(df["ms"]) == [1.0, 2.0] and list(df["M"]) == [64, 64] and str(df["M"].dtype) == "Int64"
    with pytest.warns(RuntimeWarning, match=r"skipped 5 malformed row\(s\)"):
        assert [t.ms for t in store.trials()] == [1.0, 2.0]
    assert path.read_bytes() == before

    result = runner.invoke(app, ["history", "--history", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert [r["ms"] for r in json.loads(result.stdout)] == [1.0, 2.0]
    assert "skipped 5 malformed row(s)" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("column", ["ms", "ms_p20", "ms_p80", "gpu_ms"])
def test_times_that_are_no_measurement_skip_their_rows(tmp_path: Path, column: str) -> None:
    path = tmp_path / "h.csv"
    store = History(path)
    store.append(_row(ms=1.0))
    for bad in ("0", "-1", "-0.0", "inf", "-inf"):
        _write_by_hand(path, _row(), **{column: bad})
    with pytest.warns(RuntimeWarning, match=r"skipped 5 malformed row\(s\).*line\(s\) 3, 4, 5, 6, 7$"):
        assert list(store.read()["ms"]) == [1.0]


def test_export_best_exports_the_good_row_beside_impossible_times(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    store = History(path)
    store.append_many([make_row("bench", P, None, status="success", run_id="r", kernel="torch", ms=1.0,
                                timing="gpu", device=DEVICE), _row(ms=0.5)])
    for bad in ("0", "-1", "inf"):
        _write_by_hand(path, _row(), ms=bad)
    before = path.read_bytes()
    result = runner.invoke(app, ["export-best", "--history", str(path), "--device", "h100"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["entries"]
    assert (entry["ms"], entry["torch_ms"], entry["speedup_vs_cublas"]) == (0.5, 1.0, 2.0)
    assert entry["trials"] == 1 and all(math.isfinite(v) for v in (entry["ms"], entry["speedup_vs_cublas"]))
    assert "skipped 3 malformed row(s)" in result.output and "line(s) 4, 5, 6" in result.output
    assert path.read_bytes() == before


def test_a_history_saved_with_a_byte_order_mark_is_read_and_appended(tmp_path: Path) -> None:
    """A spreadsheet that saves the CSV may put a UTF-8 byte order mark first: the header is
    still the header, the rows keep their first column, and appends go on."""
    path = tmp_path / "h.csv"
    store = History(path)
    store.append(_row(ms=1.0))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    df = store.read()
    assert len(df) == 1 and df["timestamp"].notna().all() and df["ms"].tolist() == [1.0]
    store.check_writable()
    store.append(_row(ms=2.0))
    assert store.read()["ms"].tolist() == [1.0, 2.0]
    assert [t.ms for t in store.trials()] == [1.0, 2.0]

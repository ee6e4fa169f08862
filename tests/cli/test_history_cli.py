"""`autokernel history`: last rows, best per problem, filters, JSON, refusals."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autokernel.cli import app
from autokernel.cli._common import console
from autokernel.config import KernelConfig
from autokernel.history import History, make_row
from autokernel.records import Problem

runner = CliRunner()


@pytest.fixture
def hist(tmp_path, monkeypatch):
    path = tmp_path / "history.csv"
    monkeypatch.setenv("AUTOKERNEL_HISTORY", str(path))
    rows = [make_row("tune", Problem(64, 64, 64), KernelConfig(block_m=64), status="success", run_id="r",
                     strategy="grid", generation=i, ms=ms, timing="gpu", device="NVIDIA H100 80GB HBM3")
            for i, ms in enumerate([0.3, 0.1, 0.2])]
    rows.append(make_row("bench", Problem(32, 32, 32), status="compile_error", run_id="r2", timing="gpu",
                         device="NVIDIA H100 80GB HBM3", error="out of shared memory"))
    History(path).append_many(rows)
    return path


def test_table_shows_rows(hist, monkeypatch) -> None:
    monkeypatch.setattr(console, "width", 200)  # the console is built once, at import
    result = runner.invoke(app, ["history"])
    assert result.exit_code == 0, result.output
    assert "last 4 rows" in result.stdout
    assert "64x64x64 float16" in result.stdout and "32x32x32 float16" in result.stdout
    assert "64x128x64 g8 w8 s3" in result.stdout
    assert "compile_error" in result.stdout and "out of shared memory" in result.stdout
    assert "tune/grid" in result.stdout


def test_last_n_json(hist) -> None:
    result = runner.invoke(app, ["history", "-n", "2", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["status"] for r in rows] == ["success", "compile_error"]
    assert rows[0]["ms"] == 0.2 and rows[0]["config"]["block_m"] == 64 and rows[1]["config"] is None


def test_best_and_filters(hist) -> None:
    result = runner.invoke(app, ["history", "--best", "--json"])
    assert result.exit_code == 0, result.output
    (best,) = json.loads(result.stdout)
    assert (best["M"], best["ms"], best["generation"]) == (64, 0.1, 1)

    result = runner.invoke(app, ["history", "--command", "bench", "--status", "compile_error", "--json"])
    assert [r["M"] for r in json.loads(result.stdout)] == [32]
    result = runner.invoke(app, ["history", "--command", "nope"])
    assert result.exit_code == 0 and "no matching rows" in result.stdout


@pytest.mark.parametrize("command", [["history", "--json"], ["history", "--best"], ["export-best"]])
def test_a_history_named_that_does_not_exist_is_an_error(hist, tmp_path, command) -> None:
    """A mistyped --history is one error line and a non-zero exit, not an empty history."""
    missing = tmp_path / "other.csv"
    result = runner.invoke(app, [*command, "--history", str(missing)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == f"error: --history {missing} does not exist"
    assert not missing.exists()


def test_the_default_history_may_not_exist_yet(hist) -> None:
    hist.unlink()
    result = runner.invoke(app, ["history", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    assert not hist.exists()


def test_torn_row_is_one_warning_line(hist) -> None:
    with open(hist, "a") as f:
        f.write("2024-01-01T00:00:00,torn")
    result = runner.invoke(app, ["history", "--json"])
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)) == 4
    assert result.stderr.strip().splitlines() == [f"warning: skipped 1 malformed row(s) in {hist}: line(s) 6"]


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--status", "ok"], "unknown --status 'ok'"), (["--last", "-1"], "--last must be >= 0")],
)
def test_bad_options_exit_2(hist, args, message) -> None:
    result = runner.invoke(app, ["history", *args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_best_with_status_success_agrees_with_the_tuner(hist) -> None:
    """A config whose latest re-time failed counts as failed (drop_superseded), also under
    --status success: the filter applies after the best is found, not before."""
    cfg = KernelConfig(block_m=32, block_n=32, block_k=32, num_warps=4)
    problem = Problem(64, 64, 64)
    History(hist).append_many([
        make_row("tune", problem, cfg, status="success", run_id="r3", ms=0.05, timing="gpu",
                 device="NVIDIA H100 80GB HBM3"),
        make_row("tune", problem, cfg, status="runtime_error", run_id="r3", timing="gpu",
                 device="NVIDIA H100 80GB HBM3", error="x", note="re-timed"),
    ])
    for extra in ([], ["--status", "success"]):
        result = runner.invoke(app, ["history", "--best", "--json", *extra])
        (best,) = json.loads(result.stdout)
        assert best["ms"] == 0.1, extra  # not the 0.05 reading its failed re-time superseded

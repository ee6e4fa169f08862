"""Under the interpreter: problems it cannot finish are refused (exit 2) unless --force,
from a memory estimate and a time estimate calibrated here; Ctrl-C ends a run promptly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autokernel import runtime
from autokernel.cli import app
from tests.helpers import one_error_line

runner = CliRunner()
pytestmark = pytest.mark.skipif(not runtime.INTERPRETER, reason="the limits are the interpreter's")


def test_a_problem_too_big_for_memory_is_refused_before_any_work(hist):
    result = runner.invoke(app, ["validate", "--m", "100000", "--n", "100000", "--k", "16", "-d", "fp16", "-a", "none",
                                 "--no-bias"])
    line = one_error_line(result, 2)
    assert "100000x100000x16" in line and "GiB" in line and "--force" in line
    assert not hist.exists()


@pytest.mark.parametrize("command", [["bench", "--interpret"], ["fuse-bench", "--interpret", "-a", "relu"],
                                     ["tune", "--interpret", "-g", "1", "-n", "1"]], ids=lambda c: c[0])
def test_a_problem_too_slow_for_the_interpreter_is_refused(command, hist):
    result = runner.invoke(app, [*command, "-s", "8192"])
    line = one_error_line(result, 2)
    assert "8192x8192x8192" in line and "per kernel call" in line and "--force" in line
    assert not hist.exists()


def test_the_time_estimate_is_calibrated_here_and_force_runs_anyway(monkeypatch, hist):
    from autokernel.cli import _common

    calls = []
    real = _common._seconds_per_tile_step
    monkeypatch.setattr(_common, "_seconds_per_tile_step", lambda dtype: calls.append(dtype) or real(dtype))
    monkeypatch.setattr(_common, "_CALIBRATE_ABOVE", 0)
    monkeypatch.setattr(_common, "_MAX_CALL_S", 1e-6)
    args = ["validate", "-s", "32", "-d", "fp16", "-a", "none", "--no-bias"]
    line = one_error_line(runner.invoke(app, args), 2)
    assert "--force" in line and len(calls) == 1 and real(calls[0]) > 0
    result = runner.invoke(app, [*args, "--force"])
    assert result.exit_code == 0, result.output
    assert "1/1 cases passed" in result.stdout


def test_validate_takes_interpret():
    result = runner.invoke(app, ["validate", "--interpret", "-s", "16", "-d", "fp16", "-a", "none", "--no-bias"])
    assert result.exit_code == 0, result.output


def test_ctrl_c_ends_an_interpreted_run_promptly_with_the_rows_saved(tmp_path):
    """Ctrl-C once the first row is in the history, while the second problem runs: one long
    enough (~10 s interpreted) that a loaded machine cannot finish it before the signal lands."""
    path = tmp_path / "h.csv"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "autokernel", "validate", "-s", "16", "-s", "1536",
                             "-d", "fp16", "-a", "none", "--no-bias", "--history", str(path), "--force"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if path.exists() and len(path.read_text().splitlines()) >= 2:  # the header and a row
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == f"interrupted, 1 rows saved to {path}"
    assert took < 15, took  # under a second on an idle machine; the bound leaves room for a loaded one

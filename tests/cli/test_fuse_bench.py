"""`autokernel fuse-bench` on the CPU: every implementation side by side, history rows, refusals."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autokernel import runtime
from autokernel.cli import app
from autokernel.cli.fuse_bench import unfused_bytes
from autokernel.history import History
from autokernel.records import Problem
from tests.helpers import write_best

pytestmark = pytest.mark.skipif(not runtime.INTERPRETER, reason="CPU tests: kernels run under the interpreter")

runner = CliRunner()
ROW_KEYS = {"name", "problem", "kernel", "config", "status", "ms", "p20", "p80", "tflops", "gbps", "speedup_vs_eager",
            "extra_bytes", "rel_error", "max_abs_diff", "timing", "error"}


def test_interpret_json_and_history(hist, tmp_path):
    best = tmp_path / "best.json"
    write_best(best, {"M": 16, "N": 16, "K": 16, "dtype": "fp16", "activation": "relu", "bias": True,
                      "config": {"block_m": 16, "block_n": 16, "block_k": 16, "num_warps": 1, "num_stages": 1}})
    result = runner.invoke(app, ["fuse-bench", "--interpret", "--json", "-s", "16", "-a", "relu", "-a", "silu",
                                 "--best", str(best), "--repeat", "2"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert all(ROW_KEYS <= set(r) for r in rows)
    by_act = {}
    for r in rows:
        by_act.setdefault(r["problem"]["activation"], []).append(r["name"])
    # cuBLASLt's epilogue has relu but no silu; the tuned config matches relu only
    assert by_act == {"relu": ["eager", "cublaslt", "default", "tuned"], "silu": ["eager", "default"]}
    assert "no config in" in result.stderr
    for r in rows:
        assert r["status"] == "success" and r["timing"] == "interpreter"
        assert r["extra_bytes"] == (2 * 16 * 16 * 2 if r["name"] == "eager" else 0)
        assert r["gbps"] > 0 and r["speedup_vs_eager"] > 0
    assert [r["speedup_vs_eager"] for r in rows if r["name"] == "eager"] == [1.0, 1.0]
    df = History(hist).read()
    assert len(df) == len(rows)
    assert set(df["command"]) == {"fuse-bench"} and set(df["timing"]) == {"interpreter"}
    assert list(df["name"]) == [r["name"] for r in rows]


def test_unfused_bytes():
    assert unfused_bytes(Problem(4096, 4096, 4096, "float16", "gelu_tanh", True)) == 2 * 4096 * 4096 * 2
    assert unfused_bytes(Problem(64, 32, 8, "float32", "none", True)) == 0


def test_refuses_without_interpret_on_cpu(hist):
    result = runner.invoke(app, ["fuse-bench"])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "--interpret" in result.stderr
    assert not hist.exists()


@pytest.mark.parametrize(
    "args, needle",
    [(["-s", "-1"], "--size"), (["-d", "fp8"], "dtype"), (["-a", "tanh"], "activation"),
     (["--best", "/nonexistent/best.json"], "--best"), (["-s", "16", "--best", ""], "--best is empty")],
)
def test_bad_input_is_one_line_and_no_history(hist, args, needle):
    result = runner.invoke(app, ["fuse-bench", "--interpret", "--json", *args])
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in result.output
    assert result.stdout == "" and not hist.exists()


def test_gpu_time_side_by_side_for_every_implementation(hist, tmp_path, monkeypatch):
    """On a GPU every implementation of a problem gets its GPU and wall time from one reading
    of them all (here faked: the interpreter has none), and its speedup over eager by GPU
    time; JSON, the table and the history carry them. A reading that fails leaves its time
    unmeasured with one warning, and the run still succeeds."""
    import autokernel.evaluate as ev

    raced = []
    gpu = {"torch": 0.03, "cublaslt": 0.024, "triton": 0.02}

    def race_trials(problem, trials):
        raced.append([t.kernel for t in trials])
        for t in trials:
            t.gpu_ms = gpu[t.kernel]
        return True

    def wall_trials(problem, trials):
        for t in trials:
            t.wall_ms = gpu[t.kernel] * (2 if t.kernel == "torch" else 1.05)  # eager's calls host-bound
        return True

    monkeypatch.setattr(ev, "race_trials", race_trials)
    monkeypatch.setattr(ev, "wall_trials", wall_trials)
    result = runner.invoke(app, ["fuse-bench", "--interpret", "--json", "-s", "16", "-a", "relu", "--repeat", "1"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert raced == [["torch", "cublaslt", "triton"]]  # one reading of all three
    assert [r["name"] for r in rows] == ["eager", "cublaslt", "default"]
    assert [r["gpu_speedup_vs_eager"] for r in rows] == pytest.approx([1.0, 1.25, 1.5])
    assert [r["gpu_ms"] for r in rows] == [0.03, 0.024, 0.02] and rows[0]["wall_ms"] == pytest.approx(0.06)
    assert History(hist).read()["gpu_ms"].tolist() == [0.03, 0.024, 0.02]
    shown = runner.invoke(app, ["fuse-bench", "--interpret", "-s", "16", "-a", "relu", "--repeat", "1"])
    assert shown.exit_code == 0, shown.output
    assert "GPU speedup" in shown.stdout and "1.50x" in shown.stdout and "1.25x" in shown.stdout
    assert "60.0*" in shown.stdout and "21.0" in shown.stdout and "host-bound" in shown.stdout

    def broken(problem, trials):
        raise RuntimeError("capture failed")

    monkeypatch.setattr(ev, "race_trials", broken)
    result = runner.invoke(app, ["fuse-bench", "--interpret", "--json", "-s", "16", "-a", "relu", "--repeat", "1"])
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert all(r["gpu_speedup_vs_eager"] is None and r["gpu_ms"] is None for r in rows)
    assert rows[2]["wall_ms"] == pytest.approx(0.021)  # the other reading stands
    assert "16x16x16 float16 bias relu: GPU time not measured (RuntimeError: capture failed)" in result.stderr
    shown = runner.invoke(app, ["fuse-bench", "--interpret", "-s", "16", "-a", "relu", "--repeat", "1"])
    assert "GPU speedup" not in shown.stdout  # no GPU time: no GPU columns

"""`autokernel bench` on the CPU: --interpret runs, JSON, CSV and history rows, refusals."""

from __future__ import annotations

import csv
import json

import pytest
import torch
from typer.testing import CliRunner

from autokernel import runtime
from autokernel.cli import app
from autokernel.history import History
from tests.helpers import one_error_line, write_best

pytestmark = pytest.mark.skipif(not runtime.INTERPRETER, reason="CPU tests: kernels run under the interpreter")

runner = CliRunner()
TRIAL_KEYS = {"problem", "config", "status", "kernel", "ms", "p20", "p80", "tflops", "rel_error", "max_abs_diff",
              "timing", "error"}


def test_interpret_json_and_history(hist, tmp_path):
    table = tmp_path / "run.csv"
    result = runner.invoke(app, ["bench", "--interpret", "--json", "-s", "16", "-s", "24", "--repeat", "2",
                                 "--csv", str(table)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [r["problem"]["m"] for r in out] == [16, 24]
    for r in out:
        assert {"problem", "config", "config_source", "torch", "triton", "speedup"} <= set(r)
        assert TRIAL_KEYS <= set(r["triton"]) and TRIAL_KEYS <= set(r["torch"])
        assert r["triton"]["status"] == "success" and r["torch"]["status"] == "success"
        assert r["triton"]["timing"] == "interpreter" and r["config_source"] == "default"
        assert r["speedup"] == pytest.approx(r["torch"]["ms"] / r["triton"]["ms"])
    df = History(hist).read()
    assert len(df) == 4
    assert list(df["kernel"]) == ["torch", "triton", "torch", "triton"]
    assert set(df["command"]) == {"bench"} and set(df["timing"]) == {"interpreter"} and df["ms"].notna().all()
    assert df["run_id"].nunique() == 1
    rows = list(csv.DictReader(table.open()))
    assert [int(r["M"]) for r in rows] == [16, 24] and rows[0]["timing"] == "interpreter"
    assert rows[0]["gpu_speedup"] == "" and rows[0]["triton_gpu_ms"] == ""  # no GPU: no GPU time
    assert all(r["gpu_speedup"] is None for r in out)


def test_gpu_time_side_by_side_in_table_json_csv_and_history(hist, tmp_path, monkeypatch):
    """On a GPU the two of a forward problem get their GPU time from one race (here faked:
    the interpreter has none): the table, JSON, CSV and history rows carry it; a race that
    fails leaves it unmeasured with one warning, and the run still succeeds."""
    import autokernel.evaluate as ev

    raced = []

    def race_trials(problem, trials):
        raced.append([t.kernel for t in trials])
        for t, ms in zip(trials, (0.02, 0.01)):
            t.gpu_ms = ms
        return True

    def wall_trials(problem, trials):
        for t, ms in zip(trials, (0.03, 0.0105)):  # torch's call host-bound, ours within 10 % of its GPU time
            t.wall_ms = ms
        return True

    monkeypatch.setattr(ev, "race_trials", race_trials)
    monkeypatch.setattr(ev, "wall_trials", wall_trials)
    table = tmp_path / "run.csv"
    result = runner.invoke(app, ["bench", "--interpret", "--json", "-s", "16", "--repeat", "1", "--csv", str(table)])
    assert result.exit_code == 0, result.output
    (r,) = json.loads(result.stdout)
    assert raced == [["torch", "triton"]]
    assert r["torch"]["gpu_ms"] == 0.02 and r["triton"]["gpu_ms"] == 0.01 and r["gpu_speedup"] == pytest.approx(2.0)
    assert r["torch"]["wall_ms"] == 0.03 and r["triton"]["wall_ms"] == 0.0105
    row = next(csv.DictReader(table.open()))
    assert row["gpu_speedup"] == "2.0" and row["torch_wall_ms"] == "0.03" and row["triton_host_bound"] == "False"
    assert History(hist).read()["gpu_ms"].tolist() == [0.02, 0.01]
    shown = runner.invoke(app, ["bench", "--interpret", "-s", "16", "--repeat", "1"])
    assert "20.0 / 10.0" in shown.stdout and "2.00x" in shown.stdout
    assert "30.0* / 10.5" in shown.stdout and "host-bound" in shown.stdout  # torch's marked, ours not

    def broken(problem, trials):
        raise RuntimeError("capture failed")

    monkeypatch.setattr(ev, "race_trials", broken)
    result = runner.invoke(app, ["bench", "--interpret", "--json", "-s", "16", "--repeat", "1"])
    assert result.exit_code == 0 and json.loads(result.stdout)[0]["gpu_speedup"] is None
    assert "16x16x16 float16: GPU time not measured (RuntimeError: capture failed)" in result.stderr
    assert json.loads(result.stdout)[0]["triton"]["wall_ms"] == 0.0105  # the other reading stands

    monkeypatch.setattr(ev, "wall_trials", broken)
    result = runner.invoke(app, ["bench", "--interpret", "--json", "-s", "16", "--repeat", "1"])
    assert result.exit_code == 0 and json.loads(result.stdout)[0]["triton"]["wall_ms"] is None
    assert "16x16x16 float16: wall time per call not measured (RuntimeError: capture failed)" in result.stderr


def test_bench_times_the_config_matmul_would_pick(hist, tmp_path, monkeypatch):
    """With no --config or --best, bench times what autokernel.matmul launches with when
    given none: here the $AUTOKERNEL_CONFIG entry ("env"), the default where the file has
    none near the problem; --untuned times the default config even where a tuned one
    exists, and it does not combine with --config or --best."""
    from autokernel import best

    tuned = {"block_m": 16, "block_n": 32, "block_k": 16, "group_m": 4, "num_warps": 1, "num_stages": 1}
    path = tmp_path / "tuned.json"
    write_best(path, {"M": 16, "N": 16, "K": 16, "activation": "none", "bias": False, "config": tuned})
    monkeypatch.setenv(best.CONFIG_ENV, str(path))
    best.clear_cache()
    try:
        result = runner.invoke(app, ["bench", "--interpret", "--json", "-s", "16", "-s", "128", "--repeat", "1"])
        assert result.exit_code == 0, result.output
        near, far = json.loads(result.stdout)  # 128 is 8x the entry's shape: out of reach
        assert near["config_source"] == "env" and {k: near["config"][k] for k in tuned} == tuned
        assert far["config_source"] == "default" and far["config"]["block_n"] != 32
        shown = runner.invoke(app, ["bench", "--interpret", "-s", "16", "--repeat", "1"])
        assert "(env)" in shown.stdout
        untuned = runner.invoke(app, ["bench", "--interpret", "--json", "-s", "16", "--repeat", "1", "--untuned"])
        (r,) = json.loads(untuned.stdout)
        assert r["config_source"] == "default" and r["config"]["block_n"] != 32
        both = runner.invoke(app, ["bench", "--interpret", "-s", "16", "--untuned", "--best", str(path)])
        assert both.exit_code != 0 and "give one of --config, --best and --untuned" in both.output
    finally:
        monkeypatch.delenv(best.CONFIG_ENV)
        best.clear_cache()


def test_untuned_backward_runs_all_three_gemms_on_default_configs(hist, monkeypatch):
    """--untuned --backward: the forward, dX and dW GEMMs all take default_config; no
    tuned lookup is asked for any of them (without --untuned, linear asks it for dX and dW)."""
    from autokernel import best

    best.clear_cache()  # and the launch plans: a cached plan asks no lookup
    asked = []
    real = best.resolve
    monkeypatch.setattr(best, "resolve", lambda *a, **k: asked.append(a[:3]) or real(*a, **k))
    args = ["bench", "--interpret", "--json", "--backward", "--m", "24", "--n", "40", "--k", "16", "--repeat", "1"]
    result = runner.invoke(app, args + ["--untuned"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["config_source"] == "default" and asked == []
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert {(24, 40, 16), (24, 16, 40), (40, 16, 24)} <= set(asked)  # forward (bench), dX and dW (linear)


def test_bias_activation_and_config(hist):
    cfg = '{"block_m": 16, "block_n": 16, "block_k": 16, "num_warps": 1, "num_stages": 1}'
    result = runner.invoke(app, ["bench", "--interpret", "--json", "--m", "20", "--n", "36", "--k", "12", "--bias",
                                 "-a", "gelu_tanh", "-d", "bf16", "--config", cfg, "--repeat", "1"])
    assert result.exit_code == 0, result.output
    (r,) = json.loads(result.stdout)
    assert r["problem"] == {"m": 20, "n": 36, "k": 12, "dtype": "bfloat16", "activation": "gelu_tanh", "bias": True,
                            "layout": "nn"}
    assert r["config"]["block_m"] == 16 and r["config_source"] == "config"
    assert r["torch"]["rel_error"] < 1e-2 and r["triton"]["rel_error"] < 1e-2


def test_best_file(hist, tmp_path):
    best = tmp_path / "best.json"
    write_best(best, {"M": 16, "N": 16, "K": 16, "dtype": "float16", "activation": "none", "bias": False,
                      "config": {"block_m": 16, "block_n": 16, "block_k": 16, "num_warps": 1, "num_stages": 1}})
    result = runner.invoke(app, ["bench", "--interpret", "--json", "-s", "16", "-s", "32", "--best", str(best),
                                 "--repeat", "1"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [r["config_source"] for r in out] == ["best", "default"]
    assert "no config in" in result.stderr
    assert list(History(hist).read()["name"]) == ["torch", "best", "torch", "default"]


def test_refuses_without_interpret_on_cpu(hist):
    result = runner.invoke(app, ["bench", "-s", "16"])
    assert result.exit_code == 2
    assert "--interpret" in one_error_line(result)
    assert not hist.exists()


def test_interpret_needs_the_interpreter(hist, monkeypatch):
    import torch

    monkeypatch.setattr(runtime, "INTERPRETER", False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU machine, the kernels compiled for it
    result = runner.invoke(app, ["bench", "--interpret", "-s", "16"])
    line = one_error_line(result, 2)
    assert "--interpret on a machine with a GPU" in line and "TRITON_INTERPRET=1" in line


@pytest.mark.parametrize(
    "args, needle",
    [
        (["-s", "-4"], "--size"),
        (["-s", "16", "--dtype", "int8"], "dtype"),
        (["-s", "16", "--activation", "swish"], "activation"),
        (["-s", "16", "--repeat", "0"], "--repeat"),
        (["-s", "16", "--config", '{"block_m": 17}'], "block_m"),
        (["-s", "16", "--m", "4"], "--size"),
        (["-s", "16", "--best", ""], "--best is empty"),
    ],
)
def test_bad_input_is_one_line_and_no_history(hist, args, needle):
    result = runner.invoke(app, ["bench", "--interpret", "--json", *args])
    assert result.exit_code != 0
    assert needle in one_error_line(result)
    assert result.stdout == ""
    assert not hist.exists()


def test_backward_json_checks_gradients_and_records_both(hist):
    result = runner.invoke(app, ["bench", "--interpret", "--json", "--backward", "--m", "24", "--n", "40",
                                 "--k", "16", "-a", "gelu", "--bias", "-d", "bf16", "--repeat", "1"])
    assert result.exit_code == 0, result.output
    (r,) = json.loads(result.stdout)
    assert r["problem"]["layout"] == "nt"
    assert r["torch"]["kernel"] == "torch_autograd" and r["triton"]["kernel"] == "triton_autograd"
    assert r["triton"]["status"] == "success" and r["triton"]["rel_error"] < 1e-2
    assert r["triton"]["config"]["block_m"] >= 16  # the forward GEMM's config is reported
    # TFLOP/s count the three GEMMs of a training step
    assert r["triton"]["tflops"] == pytest.approx(6 * 24 * 40 * 16 / (r["triton"]["ms"] * 1e-3) / 1e12)
    df = History(hist).read()
    assert list(df["kernel"]) == ["torch_autograd", "triton_autograd"]


@pytest.mark.parametrize("corrupt", [lambda t: t * 2, lambda t: t.index_fill(0, torch.tensor([1]), float("nan"))],
                         ids=["scaled", "one-nan-row"])
def test_backward_wrong_gradient_is_a_failed_trial(hist, monkeypatch, corrupt):
    import autokernel.autograd as autograd

    real = autograd.BackwardPlan.run  # what LinearFunction.backward and linear_backward run

    def broken(*args, **kwargs):
        dx, dw, db = real(*args, **kwargs)
        return dx, None if dw is None else corrupt(dw), db

    monkeypatch.setattr(autograd.BackwardPlan, "run", broken)
    result = runner.invoke(app, ["bench", "--interpret", "--json", "--backward", "-s", "16", "--repeat", "1"])
    assert result.exit_code == 1
    (r,) = json.loads(result.stdout)
    assert r["triton"]["status"] == "failed_correctness" and "dw" in r["triton"]["error"]
    assert r["torch"]["status"] == "success"


def test_best_per_problem_ignores_training_rows(hist):
    from autokernel.history import best_per_problem

    assert runner.invoke(app, ["bench", "--interpret", "-s", "16", "--repeat", "1"]).exit_code == 0
    assert runner.invoke(app, ["bench", "--interpret", "-s", "16", "--repeat", "1", "--backward"]).exit_code == 0
    best = best_per_problem(History(hist).trials())
    assert best and not any(t.kernel.endswith("_autograd") for t in best)

"""`autokernel tune`, `loop` and `shapes` on the CPU: replayed sweeps, JSON, history, refusals."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autokernel.cli import app
from autokernel.history import History
from tests.helpers import one_error_line

runner = CliRunner()


def test_tune_replay_json_history_and_continuation(sweep, hist, tmp_path):
    args = ["tune", "--replay", str(sweep), "-s", "4096", "--strategy", "optuna", "--seed", "5", "-g", "2", "-n", "4",
            "--json"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    out = json.loads(first.stdout)
    assert len(out) == 1 and out[0]["trials"] == 8 and out[0]["prior_trials"] == 0
    assert [g["generation"] for g in out[0]["generations"]] == [1, 2]
    assert out[0]["baseline"]["ms"] == pytest.approx(0.19) and out[0]["speedup"] > 0
    # The leaders' re-timing is reported as a note, not a warning (nothing went wrong).
    assert out[0]["confirmation"].startswith("re-timed") and f"note: {out[0]['confirmation'][:30]}" in first.stderr
    assert "warning: re-timed" not in first.stderr
    best = [g["best_ms"] for g in out[0]["generations"]]
    assert best == sorted(best, reverse=True)  # best so far never gets worse
    second = json.loads(runner.invoke(app, args).stdout)
    assert second[0]["prior_trials"] == 8 and [g["generation"] for g in second[0]["generations"]] == [3, 4]
    df = History(hist).read()
    df = df[~df["note"].fillna("").str.endswith("re-timed")]  # a far-ahead winner may be measured again
    assert len(df) == 16 and set(df["timing"]) == {"replay"} and df["config"].nunique() == 16


def test_tune_table_and_plot(sweep, tmp_path):
    png = tmp_path / "curve.png"
    result = runner.invoke(app, ["tune", "--replay", str(sweep), "-s", "4096", "--strategy", "random", "-g", "2",
                                 "-n", "3", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert "best so far" in result.stdout and "winner" in result.stdout and "cuBLAS" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"written to {png}" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--strategy", "magic"], "unknown strategy"),
    (["-g", "0"], "--generations must be >= 1"),
    (["-n", "0"], "--per-generation must be >= 1"),
    (["--timeout", "0"], "--timeout must be a finite number of seconds > 0"),
    (["--timeout", "nan"], "--timeout must be a finite"),  # nan would disable every deadline
    (["--timeout", "inf"], "--timeout must be a finite"),
    (["--plot", "curve.txt"], "ending in .png"),
])
def test_tune_bad_options_are_one_line(sweep, args, message):
    result = runner.invoke(app, ["tune", "--replay", str(sweep), "-s", "4096", *args])
    line = one_error_line(result, 2)
    assert message in line


@pytest.mark.parametrize("args, message", [
    (["tune", "--strategy", "nope"], "unknown strategy 'nope'"),
    (["tune", "--generations", "0"], "--generations must be >= 1"),
    (["loop", "--patience", "0"], "--patience must be >= 1"),
    (["loop", "--strategy", "nope"], "unknown strategy 'nope'"),
])
def test_a_bad_option_is_named_before_the_machine_is_judged(args, message):
    """Off the GPU without --interpret the run is refused too; the mistyped option is what
    the one line names, so that fixing the machine first does not lead to a second error."""
    assert message in one_error_line(runner.invoke(app, args), 2)


def test_tune_missing_replay_file(tmp_path):
    line = one_error_line(runner.invoke(app, ["tune", "--replay", str(tmp_path / "no.csv")]), 2)
    assert "does not exist" in line


def test_tune_replay_of_a_directory_says_so(tmp_path):
    line = one_error_line(runner.invoke(app, ["tune", "--replay", str(tmp_path), "-s", "4096"]), 2)
    assert line == f"error: --replay {tmp_path} is a directory, not a history CSV"
    assert list(tmp_path.iterdir()) == []


def test_loop_over_a_shapes_file_stops_on_patience(sweep, tmp_path, hist):
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("M,N,K,dtype\n4096,4096,4096,fp16\n1024,4096,4096,float16\n")
    result = runner.invoke(app, ["loop", "--replay", str(sweep), "--shapes", str(shapes), "--strategy", "random",
                                 "--seed", "1", "--patience", "2", "--min-gain", "0.5", "-n", "4", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [(o["problem"]["m"], o["stopped"]) for o in out] == [(4096, "converged"), (1024, "converged")]
    assert all(len(o["generations"]) == 3 for o in out)
    assert set(History(hist).read()["command"]) == {"loop"}


def test_loop_max_trials_and_bad_shapes(sweep, tmp_path):
    result = runner.invoke(app, ["loop", "--replay", str(sweep), "-s", "4096", "--strategy", "grid", "--max-trials", "5",
                                 "-n", "4", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)[0]
    assert out["trials"] == 5 and out["stopped"] == "max_trials"
    bad = tmp_path / "bad.csv"
    bad.write_text("M,N,K\n16,abc,16\n")
    line = one_error_line(runner.invoke(app, ["loop", "--replay", str(sweep), "-s", "4096", "--time-budget", "nan"]), 2)
    assert "--time-budget must be a finite" in line
    line = one_error_line(runner.invoke(app, ["loop", "--replay", str(sweep), "--shapes", str(bad)]), 2)
    assert "line 2" in line and "integers" in line
    line = one_error_line(runner.invoke(app, ["loop", "--replay", str(sweep), "--shapes", str(tmp_path / "x.json")]), 2)
    assert "does not exist" in line


def test_shapes_lists_a_models_linear_gemms(tmp_path):
    result = runner.invoke(app, ["shapes", "--model", "tests.cli.shapes_model:build", "--tokens", "256"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    got = sorted((r["M"], r["N"], r["K"], r["activation"], r["bias"], r["count"], r["layout"]) for r in rows)
    # the first Linear takes the ReLU after it into its kernel: its own problem
    assert got == [(256, 64, 128, "none", False, 1, "nt"), (256, 128, 64, "none", True, 1, "nt"),
                   (256, 128, 64, "relu", True, 1, "nt")]
    out = tmp_path / "shapes.csv"
    assert runner.invoke(app, ["shapes", "--model", "tests.cli.shapes_model:build", "-o", str(out)]).exit_code == 0
    from autokernel.tuning.shapes import read_shapes

    assert sorted((p.m, p.n, p.k, p.activation, p.layout) for p in read_shapes(out)) == [
        (4096, 64, 128, "none", "nt"), (4096, 128, 64, "none", "nt"), (4096, 128, 64, "relu", "nt")]
    line = one_error_line(runner.invoke(app, ["shapes", "--model", "nowhere.at_all:f"]), 2)
    assert "cannot load" in line


@pytest.mark.parametrize("spelling", ["env", "default"])
def test_shapes_refuses_to_write_over_the_history(spelling, hist, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if spelling == "default":
        monkeypatch.delenv("AUTOKERNEL_HISTORY")
        hist = tmp_path / "results" / "history.csv"
        hist.parent.mkdir()
    hist.write_text("timestamp,run_id,command\n2026-01-01T00:00:00+00:00,r,tune\n")
    before = hist.read_bytes()
    target = "results/history.csv" if spelling == "default" else str(hist)
    line = one_error_line(runner.invoke(app, ["shapes", "--model", "tests.cli.shapes_model:build", "-o", target]), 2)
    assert line == (f"error: -o {target} is the history of every run's trials: the shapes would replace it; "
                    "write them to another file")
    assert hist.read_bytes() == before


def test_shapes_write_that_fails_keeps_the_old_file(tmp_path, monkeypatch):
    import autokernel.userfiles
    from tests.helpers import fail_renames_onto

    out = tmp_path / "shapes.json"
    out.write_text("the previous shapes\n")
    fail_renames_onto(monkeypatch, autokernel.userfiles, out)
    line = one_error_line(runner.invoke(app, ["shapes", "--model", "tests.cli.shapes_model:build", "-o", str(out)]), 2)
    assert line == f"error: cannot write {out}: Permission denied"
    assert out.read_text() == "the previous shapes\n" and sorted(p.name for p in tmp_path.iterdir()) == ["shapes.json"]


def test_shapes_no_tensor_can_hold_are_one_line_and_write_nothing(tmp_path):
    out = tmp_path / "shapes.json"
    out.write_text("the previous shapes\n")
    huge = "99999999999999999999"  # M of every GEMM: past int64
    result = runner.invoke(app, ["shapes", "--model", "tests.cli.shapes_model:build", "--tokens", huge, "-o", str(out)])
    line = one_error_line(result, 2)
    assert line.startswith(f"error: --tokens {huge}: ") and "more than a tensor can" in line
    assert out.read_text() == "the previous shapes\n"


@pytest.mark.parametrize("change", [{"ms": "fast"}, {"ms": -1.0}], ids=["not a number", "no time"])
def test_a_kept_reading_edited_by_hand_is_measured_again(change, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTOKERNEL_CACHE_DIR", str(cache))
    args = ["tune", "--interpret", "--m", "20", "--n", "24", "--k", "16", "-g", "1", "-n", "1", "--seed", "2",
            "--strategy", "random", "--json"]
    assert runner.invoke(app, [*args, "--history", str(tmp_path / "a.csv")]).exit_code == 0
    [kept] = cache.glob("readings-*.jsonl")
    records = [json.loads(line) for line in kept.read_text().splitlines()]
    for record in records:
        record["payload"] = [{**trial, **change} for trial in record["payload"]]
    kept.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = runner.invoke(app, [*args, "--history", str(tmp_path / "b.csv")])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert json.loads(result.stdout)[0]["reused_readings"] == 0
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a row the history cannot read back would warn
        rows = History(tmp_path / "b.csv").trials()
    assert rows and all(t.ok and t.ms > 0 and "reused" not in (t.note or "") for t in rows)


def _swapped_gemms(factory) -> list[tuple]:
    """(N, K, activation, bias) of each layer that swap_linear runs on autokernel's kernels."""
    import warnings

    import torch

    from autokernel.nn import Linear, swap_linear

    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the LazyLinear's warning: tested in test_nn
        model = swap_linear(factory())
    return sorted((m.out_features, m.in_features, m.activation, m.bias is not None)
                  for m in model.modules() if isinstance(m, Linear))


@pytest.mark.parametrize("factory", ["build", "block", "block_run"])
def test_shapes_lists_exactly_what_swap_linear_runs(factory):
    """A fused GELU is the row's activation; MultiheadAttention's projections and an
    unrun LazyLinear, which torch keeps running, are left out with a note naming them."""
    from tests.cli import shapes_model

    result = runner.invoke(app, ["shapes", "--model", f"tests.cli.shapes_model:{factory}", "--tokens", "8"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    listed = sorted((r["N"], r["K"], r["activation"], r["bias"]) for r in rows for _ in range(r["count"]))
    assert listed == _swapped_gemms(getattr(shapes_model, factory))
    assert all(r["K"] > 0 for r in rows)
    if factory != "build":
        assert (32 * 3, 32, "gelu", True) in listed
        assert "encoder.self_attn.in_proj, encoder.self_attn.out_proj" in result.stderr
    assert ("LazyLinear" in result.stderr) == (factory == "block")


def test_shapes_imports_the_model_from_the_current_directory(tmp_path, monkeypatch):
    """`autokernel shapes --model mypkg.models:build` from the project's folder, as the
    console script runs it: its sys.path holds the script's folder, not the current one."""
    import os
    import sys

    pkg = tmp_path / "mypkg_cwd"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "models.py").write_text("import torch\n\ndef build():\n    return torch.nn.Linear(8, 24)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", os.getcwd())])
    result = runner.invoke(app, ["shapes", "--model", "mypkg_cwd.models:build", "--tokens", "4"])
    assert result.exit_code == 0, result.output
    assert [(r["M"], r["N"], r["K"]) for r in json.loads(result.stdout)] == [(4, 24, 8)]


def test_loop_llm_end_to_end_under_the_interpreter(tmp_path, hist, monkeypatch):
    """`autokernel loop --strategy llm --interpret` on a tiny problem: the real openai client
    against a local chat-completions server, candidates run in the worker, rationales kept."""
    from tests.tuning.llm_server import LLMServer, Reply, config_reply

    good = [dict(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1, variant="grouped", split_k=1),
            dict(block_m=32, block_n=16, block_k=16, group_m=1, num_warps=2, num_stages=1, variant="grouped", split_k=1)]
    with LLMServer(default=Reply(config_reply(good, "small tiles for a small problem"))) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-key")
        monkeypatch.setenv("AUTOKERNEL_LLM_MODEL", "test-model")
        result = runner.invoke(app, ["loop", "--interpret", "--m", "20", "--n", "24", "--k", "16", "--strategy", "llm",
                                     "--per-generation", "2", "--max-trials", "4", "--seed", "0", "--json"])
        assert result.exit_code == 0, result.output
        assert server.chat_requests(), "the LLM was never asked"
    out = json.loads(result.stdout)[0]
    assert out["trials"] == 4 and out["best"] is not None
    df = History(hist).read()
    triton = df[(df["kernel"] == "triton") & ~df["note"].fillna("").str.endswith("re-timed")]
    assert len(triton) == 4 and (triton["status"] == "success").all()
    assert triton["note"].fillna("").str.contains("small tiles").sum() == 2  # gen 1: the LLM's two, with rationale
    assert (df["note"].fillna("").str.contains("re-timed") <= df["note"].fillna("").str.endswith("re-timed")).all()
    assert "sk-test-secret-key" not in hist.read_text() + result.output


def test_replay_refusals_are_one_line(sweep, tmp_path):
    line = one_error_line(runner.invoke(app, ["tune", "--replay", str(sweep), "-s", "1234", "-g", "1"]), 2)
    assert "has no trials of 1234x1234x1234" in line
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert "holds no recorded trials" in one_error_line(runner.invoke(app, ["tune", "--replay", str(empty)]), 2)
    line = one_error_line(runner.invoke(app, ["tune", "--interpret", "--m", "0", "--n", "8", "--k", "8"]), 2)
    assert "must be > 0" in line


def test_a_second_run_reports_the_earlier_winner_with_its_figures(sweep):
    args = ["tune", "--replay", str(sweep), "-s", "4096", "--strategy", "grid", "-g", "1", "-n", "2", "--json"]
    first = json.loads(runner.invoke(app, [*args[:-3], "-n", "40", "--json"]).stdout)[0]
    second = json.loads(runner.invoke(app, args).stdout)[0]
    assert second["best"]["this_run"] is False and second["best"]["config"] == first["best"]["config"]
    assert second["best"]["ms"] == pytest.approx(first["best"]["ms"]) and second["speedup"] == pytest.approx(first["speedup"])


def test_auto_with_a_seed_repeats_across_processes(sweep, tmp_path):
    import subprocess
    import sys

    runs = []
    for i in range(2):
        out = subprocess.run([sys.executable, "-m", "autokernel", "tune", "--replay", str(sweep), "-s", "4096",
                              "--strategy", "auto", "--seed", "7", "-g", "3", "-n", "4",
                              "--history", str(tmp_path / f"h{i}.csv")], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        runs.append(History(tmp_path / f"h{i}.csv").read()["config"].tolist())
    assert runs[0] == runs[1]


def test_shapes_errors_are_one_line(tmp_path, monkeypatch):
    (tmp_path / "badmodel.py").write_text("def build():\n    raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    line = one_error_line(runner.invoke(app, ["shapes", "--model", "badmodel:build"]), 2)
    assert "badmodel:build() failed: RuntimeError: boom" in line
    bad = tmp_path / "b.json"
    bad.write_text('[{"M": 64, "N": 64, "K": 64, "bias": "maybe"}]')
    from autokernel.tuning.shapes import read_shapes

    with pytest.raises(ValueError) as err:
        read_shapes(bad)
    assert str(err.value).count("entry 1") == 1 and "bias must be true or false" in str(err.value)


def test_loop_time_budget_is_for_the_whole_run(tmp_path, monkeypatch):
    """--time-budget counts from the start of the run: each problem gets what is left of
    it, once (a budget shrunk by the elapsed time twice stopped an H100 run after 86 s of 500)."""
    import types

    import autokernel.tuning.run as tune_run
    from tests.helpers import synthetic_sweep

    sweep = tmp_path / "sweep.csv"
    synthetic_sweep(sweep, shapes=[(m, 4096, 4096) for m in (4096, 2048, 1024, 512)])
    clock = iter(range(0, 1000, 30))  # every look at the clock: 30 s later
    monkeypatch.setattr(tune_run, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("M,N,K\n4096,4096,4096\n2048,4096,4096\n1024,4096,4096\n512,4096,4096\n")
    result = runner.invoke(app, ["loop", "--replay", str(sweep), "--shapes", str(shapes), "--strategy", "random",
                                 "--seed", "0", "--max-trials", "2", "-n", "2", "--time-budget", "100", "--json"])
    assert result.exit_code == 0, result.output
    # looks at 30, 60, 90 s leave 70, 40, 10 s: three problems run; at 120 s none is left
    assert [o["problem"]["m"] for o in json.loads(result.stdout)] == [4096, 2048, 1024]
    assert "512x4096x4096" in result.stderr and "not tuned" in result.stderr


def test_a_winner_found_by_another_run_says_so(sweep, tmp_path):
    """Two tunes on one history: the second reports the history's best, and names the run
    that found it rather than passing it off as its own."""
    history = str(tmp_path / "h.csv")
    base = ["tune", "--replay", str(sweep), "-s", "4096", "--strategy", "random", "--history", history]
    first = runner.invoke(app, [*base, "--seed", "1", "-g", "2", "-n", "8"])
    assert first.exit_code == 0, first.output
    assert "not this one" not in first.output
    second = runner.invoke(app, [*base, "--seed", "2", "-g", "1", "-n", "2"])
    assert second.exit_code == 0, second.output
    run_ids = set(History(history).read()["run_id"])
    line = next(l for l in second.output.splitlines() if l.startswith("winner"))
    assert "not this one" in line and any(r in line for r in run_ids), line


def test_a_group_past_every_row_of_tiles_is_the_same_launch():
    """tune says matmul already runs the winner where the two differ only in a group_m that
    covers every row of tiles (one tile order), and not otherwise."""
    from autokernel.cli.tune import _same_launch
    from autokernel.config import KernelConfig
    from autokernel.records import Problem

    a = KernelConfig(block_m=16, block_n=64, block_k=128, group_m=8, num_warps=4, num_stages=4, split_k=16)
    b = a.model_copy(update={"group_m": 1})
    assert _same_launch(a, b, Problem(12, 512, 19328)) and _same_launch(a, a, Problem(4096, 4096, 4096))
    assert not _same_launch(a, b, Problem(40, 512, 19328))  # three rows of tiles: group 1 and 8 order them differently
    assert not _same_launch(a, a.model_copy(update={"num_stages": 3}), Problem(12, 512, 19328))
    # nine rows of tiles: the ninth joins a group of 8, one group as with 16
    tile = KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma")
    assert _same_launch(tile, tile.model_copy(update={"group_m": 16}), Problem(1100, 4096, 4096))
    assert not _same_launch(tile, tile.model_copy(update={"group_m": 16}), Problem(1700, 4096, 4096))  # 14 rows

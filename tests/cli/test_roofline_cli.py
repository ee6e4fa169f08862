"""`autokernel roofline`: the table, a problem's analysis, history times, charts, refusals."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from autokernel.cli import app
from autokernel.cli._common import console
from autokernel.history import History, make_row
from autokernel.records import Problem
from tests.helpers import one_error_line

runner = CliRunner()
RESULT_KEYS = {"flops", "bytes", "arithmetic_intensity", "memory_bound_tflops", "compute_bound_tflops",
               "roofline_tflops", "achieved_tflops", "efficiency", "bound", "ridge_point", "time_from"}


def test_table_lists_every_gpu(monkeypatch) -> None:
    monkeypatch.setattr(console, "width", 160)  # the console is built once, at import
    result = runner.invoke(app, ["roofline"])
    assert result.exit_code == 0, result.output
    for name in ("A100 SXM4 80GB", "A100 PCIe 80GB", "H100 SXM5", "H100 PCIe", "H100 NVL", "H200 SXM", "L40S",
                 "RTX 4090"):
        assert name in result.stdout
    assert "fitted" in result.stdout and "carried" in result.stdout and "sm_90" in result.stdout
    if not torch.cuda.is_available():
        assert "no GPU detected here" in result.stdout


def test_json_table() -> None:
    result = runner.invoke(app, ["roofline", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert {"A100 SXM4 80GB", "H100 SXM5", "RTX 4090"} <= {g["name"] for g in out["gpus"]}
    assert out["measured"] is None
    # Which GPUs the selector serves: models fitted on the H100 and the H200, carried to the
    # other Hopper parts, none for Ampere and Ada (the default config there).
    by_name = {g["name"]: g for g in out["gpus"]}
    assert by_name["H100 SXM5"]["selector"] == "fitted" and by_name["H100 SXM5"]["sms"] == 132
    assert by_name["H200 SXM"]["selector"] == "fitted"
    assert {by_name[n]["selector"] for n in ("H100 PCIe", "H100 NVL", "H200 NVL")} == {"carried"}
    assert {by_name[n]["selector"] for n in ("A100 SXM4 80GB", "L40S", "RTX 4090")} == {None}
    assert by_name["A100 SXM4 80GB"]["arch"] == "sm_80"


def test_problem_json_with_ms(hist) -> None:
    result = runner.invoke(app, ["roofline", "--gpu", "A100", "--size", "4096", "--ms", "0.5", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)  # one problem: the analysis keys at the top level
    assert r["gpu"]["name"] == "A100 SXM4 80GB"
    assert RESULT_KEYS <= set(r)
    assert r["arithmetic_intensity"] == pytest.approx(1365.333, rel=1e-5)
    assert r["memory_bound_tflops"] == pytest.approx(2039 * 1365.333 / 1000, rel=1e-5)
    assert r["roofline_tflops"] == 312.0 and r["bound"] == "compute"
    assert r["achieved_tflops"] == pytest.approx(274.878, rel=1e-5)
    assert r["efficiency"] == pytest.approx(274.878 / 312, rel=1e-5)
    assert r["time_from"] == "--ms"
    assert not hist.exists()


def test_best_gpu_time_of_the_same_gpu_comes_from_the_history(hist) -> None:
    p = Problem(4096, 4096, 4096)
    rows = [make_row("tune", p, status="success", run_id="r", ms=ms, timing=timing, device=device)
            for ms, timing, device in [
                (0.60, "gpu", "NVIDIA H100 80GB HBM3"),
                (0.20, "gpu", "NVIDIA H100 80GB HBM3"),
                (0.10, "gpu", "NVIDIA A100-SXM4-80GB"),  # another GPU
                (0.01, "interpreter", "cpu (triton interpreter)"),  # never mixed with GPU times
            ]]
    rows.append(make_row("tune", p, status="failed_correctness", run_id="r", ms=0.05, timing="gpu",
                         device="NVIDIA H100 80GB HBM3"))
    rows.append(make_row("tune", Problem(4096, 4096, 4096, bias=True), status="success", run_id="r", ms=0.05,
                         timing="gpu", device="NVIDIA H100 80GB HBM3"))
    History(hist).append_many(rows)
    result = runner.invoke(app, ["roofline", "--gpu", "H100", "--m", "4096", "--n", "4096", "--k", "4096", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["ms"] == 0.20 and r["time_from"] == "history"
    assert r["achieved_tflops"] == pytest.approx(2 * 4096**3 / 0.2e-3 / 1e12)


def test_no_time_anywhere_leaves_efficiency_empty(hist) -> None:
    result = runner.invoke(app, ["roofline", "--gpu", "H100", "-s", "1024", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["achieved_tflops"] is None and r["efficiency"] is None and r["time_from"] is None


def test_plot_writes_a_png(hist, tmp_path) -> None:
    chart = tmp_path / "charts" / "roof.png"
    result = runner.invoke(app, ["roofline", "--gpu", "H100", "-s", "4096", "--ms", "1", "--plot", str(chart)])
    assert result.exit_code == 0, result.output
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "chart written" in result.stdout


@pytest.mark.parametrize("with_problem", [True, False])
def test_plot_without_a_suffix_names_the_file_written(hist, tmp_path, with_problem) -> None:
    chart = tmp_path / "chart"
    problem = ["-s", "4096", "--ms", "1"] if with_problem else []
    result = runner.invoke(app, ["roofline", "--gpu", "H100", *problem, "--plot", str(chart)])
    assert result.exit_code == 0, result.output
    written = tmp_path / "chart.png"
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not chart.exists()
    assert f"roofline chart written to {written}" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "B200", "-s", "64"], "unknown GPU 'B200'; known: A100 SXM4 80GB"),
        (["--gpu", "H100", "--m", "-4", "--n", "8", "--k", "8"], "--m must be >= 0"),
        (["--gpu", "H100", "-s", "64", "--dtype", "int8"], "unknown dtype 'int8'"),
        (["--gpu", "H100", "-s", "0"], "M, N and K > 0"),
        (["--gpu", "H100", "-s", "64", "-s", "128", "--ms", "1"], "--ms needs exactly one problem"),
        (["--gpu", "H100", "-s", "64", "--ms", "-1"], "--ms must be > 0"),
        (["--gpu", "H100", "-s", "64", "--layout", "xx"], "layout must be one of"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, hist, args, message) -> None:
    chart = tmp_path / "roof.png"
    result = runner.invoke(app, ["roofline", *args, "--plot", str(chart)])
    assert result.exit_code == 2
    assert message in one_error_line(result)
    assert result.stdout == ""
    assert not chart.exists() and not hist.exists()


@pytest.mark.parametrize("under", ["a file", "a directory named like a chart"])
def test_a_chart_that_cannot_be_written_is_one_plain_line(under, tmp_path, hist) -> None:
    blocker = tmp_path / "roof.png"
    if under == "a file":
        blocker.write_text("kept\n")
        chart, says = blocker / "chart.png", f"cannot write the chart to {blocker / 'chart.png'}: Not a directory"
    else:
        blocker.mkdir()
        chart, says = blocker, f"cannot write the chart to {blocker}: Is a directory"
    line = one_error_line(runner.invoke(app, ["roofline", "--gpu", "H100", "-s", "64", "--plot", str(chart)]), 2)
    assert line == f"error: {says}"
    assert blocker.is_dir() or blocker.read_text() == "kept\n"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the GPU-free refusals")
def test_without_a_gpu_a_problem_needs_gpu_and_measure_refuses() -> None:
    result = runner.invoke(app, ["roofline", "-s", "64"])
    assert result.exit_code == 2
    assert "no GPU detected here; pass --gpu NAME" in one_error_line(result)
    result = runner.invoke(app, ["roofline", "--gpu", "H100", "--measure"])
    assert result.exit_code == 2
    assert "needs a CUDA GPU" in one_error_line(result)


def test_several_problems_json_is_a_list(hist) -> None:
    result = runner.invoke(app, ["roofline", "--gpu", "H100", "-s", "1024", "-s", "2048", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [o["flops"] for o in out] == [2 * 1024**3, 2 * 2048**3]
    assert all(RESULT_KEYS <= set(o) for o in out)

"""What a user notices in the CLI's output: help text, narrow and piped tables, wording."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from autokernel import runtime
from autokernel.cli import _common, app
from autokernel.config import ConfigError, KernelConfig
from tests.helpers import one_error_line

runner = CliRunner()


def test_help_reads_as_prose_without_placeholders():
    bench = runner.invoke(app, ["bench", "--help"]).stdout
    assert "a tuned one from $AUTOKERNEL_CONFIG" in bench  # a source line break is no line break
    assert "<bool>" not in bench
    report = runner.invoke(app, ["report", "--help"]).stdout
    assert "report [OPTIONS] RESULTS" in report and "{" not in report and "issue" not in report


def test_plot_help_says_what_the_chart_shows():
    assert "best TFLOP/s so far" in runner.invoke(app, ["tune", "--help"]).stdout


def test_an_unwritable_plot_stops_the_run_before_it_starts(sweep, hist, tmp_path):
    plot = tmp_path / "curve.png"
    plot.mkdir()
    result = runner.invoke(app, ["tune", "--replay", str(sweep), "-s", "4096", "-g", "1", "-n", "2",
                                 "--plot", str(plot)])
    assert "is a directory" in one_error_line(result, 2)
    assert not hist.exists()  # nothing tuned


def test_a_plot_under_a_file_says_the_file_is_no_directory(sweep, hist, tmp_path):
    blocker = tmp_path / "plots"
    blocker.write_text("kept\n")
    result = runner.invoke(app, ["tune", "--replay", str(sweep), "-s", "4096", "-g", "1", "-n", "2",
                                 "--plot", str(blocker / "curve.png")])
    assert one_error_line(result, 2) == f"error: cannot write --plot {blocker / 'curve.png'}: Not a directory"
    assert blocker.read_text() == "kept\n" and not hist.exists()


def test_piped_lines_are_not_cut_at_80_columns(sweep, monkeypatch):
    monkeypatch.setattr(_common.console, "width", 80)
    result = runner.invoke(app, ["tune", "--replay", str(sweep), "-s", "4096", "--strategy", "grid", "-g", "1",
                                 "-n", "4"])
    assert result.exit_code == 0, result.output
    (winner,) = [line for line in result.stdout.splitlines() if line.startswith("winner")]
    assert len(winner) > 80 and "cuBLAS" in winner and "speedup" in winner


def test_a_narrow_terminal_folds_cells_and_drops_empty_columns(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(_common, "console", Console(file=out, force_terminal=True, width=80))
    table = Table(title="t")
    for name in ("problem", "config", "torch ms", "triton ms (p20–p80)", "TFLOP/s", "speedup", "GPU µs", "result"):
        table.add_column(name)
    table.add_row("4096x4096x4096 float16", "128x256x64 g8 w8 s3 (shipped)", "0.123456", "0.120001 (0.1–0.13)",
                  "1145.2", "1.03x", "-", "pass")
    _common.print_table(table)
    text = out.getvalue()
    assert "…" not in text and "GPU µs" not in text


@pytest.mark.skipif(not runtime.INTERPRETER, reason="CPU tests: kernels run under the interpreter")
def test_bench_under_the_interpreter_shows_no_empty_gpu_columns():
    result = runner.invoke(app, ["bench", "--interpret", "-s", "16", "--repeat", "1"])
    assert result.exit_code == 0, result.output
    assert "GPU speedup" not in result.stdout and "wall µs" not in result.stdout
    assert "torch ms" in result.stdout


def test_history_of_one_row_says_so(hist):
    from autokernel.history import History, make_row
    from autokernel.records import Problem

    History(hist).append_many([make_row("bench", Problem(16, 16, 16), status="success", run_id="r", ms=0.1)])
    result = runner.invoke(app, ["history"])
    assert result.exit_code == 0, result.output
    assert "last row" in result.stdout and "1 rows" not in result.stdout


def test_fuse_bench_extra_megabytes_keep_small_values():
    from autokernel.cli.fuse_bench import _megabytes

    assert _megabytes(16384) == "0.0164" and _megabytes(0) == "0" and _megabytes(None) == "-"
    assert _megabytes(2 * 4096 * 4096 * 2) == "67.1"


@pytest.mark.parametrize("make, says", [
    (lambda tmp: str(tmp), "is a directory"),
    (lambda tmp: '{"block_m": true}', "block_m: must be an integer, got true"),
    (lambda tmp: _write(tmp / "c.bin", bytes(range(256)) * 4), "c.bin is not text"),
    (lambda tmp: _write(tmp / "c.json", b'{"block_m": 64,}'), "c.json is not valid JSON"),
])
def test_config_messages_name_the_problem(make, says, tmp_path):
    with pytest.raises(ConfigError) as info:
        KernelConfig.from_json(make(tmp_path))
    assert says in str(info.value)


def test_a_config_directory_is_one_line_in_the_cli(tmp_path):
    line = one_error_line(runner.invoke(app, ["validate", "-s", "16", "--config", str(tmp_path)]), 2)
    assert "is a directory" in line


def _write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


@pytest.mark.skipif(not runtime.INTERPRETER, reason="CPU tests: kernels run under the interpreter")
def test_fuse_bench_under_the_interpreter_says_what_ran():
    result = runner.invoke(app, ["fuse-bench", "--interpret", "-s", "16", "-a", "relu", "--repeat", "1"])
    assert result.exit_code == 0, result.output
    assert "torch _addmm_activation (CPU)" in result.stdout and "cuBLASLt" not in result.stdout
    assert "0.00102" in result.stdout  # relu's extra pass over a 16x16 fp16 C: 1024 bytes

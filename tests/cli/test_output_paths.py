"""Output files of bench --csv, export-best -o and report -o: never over a file the command
reads (the history, a results file), an empty name or a directory is one line, and a write
that fails leaves the old file whole and no temporary file beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autokernel import runtime
from autokernel.cli import app
from autokernel.config import KernelConfig
from autokernel.history import History, make_row
from autokernel.records import Problem
from tests.helpers import fail_renames_onto, one_error_line, write_best

runner = CliRunner()
interpreted = pytest.mark.skipif(not runtime.INTERPRETER, reason="CPU tests: kernels run under the interpreter")
BENCH = ["bench", "--interpret", "-s", "16", "--repeat", "1"]


def _history(path: Path) -> bytes:
    """A history of a few successful trials of our kernel at ``path``; its bytes."""
    History(path).append_many([
        make_row("bench", Problem(64, 64, 64), KernelConfig(), status="success", run_id="r", kernel="triton", ms=ms)
        for ms in (2.0, 1.0, 3.0)])
    return path.read_bytes()


def _files(directory: Path) -> list[str]:
    """The names in ``directory`` (the history's lock file aside): a temporary file left is seen."""
    return sorted(p.name for p in directory.iterdir() if p.suffix != ".lock")


# ---- bench --csv ----

@interpreted
@pytest.mark.parametrize("spelling", ["same", "relative", "default", "link"])
def test_bench_refuses_a_csv_that_is_the_history(spelling, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    history = tmp_path / "results" / "history.csv"
    history.parent.mkdir()
    before = _history(history)
    args = {"same": ["--history", str(history), "--csv", str(history)],
            "relative": ["--history", str(history), "--csv", "./results/../results/history.csv"],
            "default": ["--csv", "results/history.csv"],
            "link": ["--history", str(history), "--csv", "table.csv"]}[spelling]
    if spelling == "default":
        monkeypatch.delenv("AUTOKERNEL_HISTORY")
    if spelling == "link":
        (tmp_path / "table.csv").symlink_to(history)
    line = one_error_line(runner.invoke(app, [*BENCH, *args]), 2)
    assert "--csv" in line and "history" in line
    assert history.read_bytes() == before


@interpreted
def test_bench_refuses_a_csv_that_is_the_best_file(tmp_path, hist):
    best = tmp_path / "best.json"
    write_best(best, {"M": 16, "N": 16, "K": 16, "activation": "none", "bias": False,
                      "config": KernelConfig(block_m=16, block_n=16, block_k=16, num_warps=1).model_dump()})
    before = best.read_bytes()
    line = one_error_line(runner.invoke(app, [*BENCH, "--best", str(best), "--csv", str(best)]), 2)
    assert "--best" in line
    assert best.read_bytes() == before and not hist.exists()  # refused before anything was measured


@interpreted
def test_bench_refuses_a_csv_that_is_the_tuned_config_file_it_reads(tmp_path, hist, monkeypatch):
    best = tmp_path / "best.json"
    write_best(best, {"M": 16, "N": 16, "K": 16, "activation": "none", "bias": False,
                      "config": KernelConfig(block_m=16, block_n=16, block_k=16, num_warps=1).model_dump()})
    monkeypatch.setenv("AUTOKERNEL_CONFIG", str(best))
    before = best.read_bytes()
    line = one_error_line(runner.invoke(app, [*BENCH, "--csv", str(best)]), 2)
    assert line == (f"error: --csv {best} is the tuned-config file of $AUTOKERNEL_CONFIG: this run's table would "
                    "replace it; write the table to another file")
    assert best.read_bytes() == before and not hist.exists()


@interpreted
@pytest.mark.parametrize("name, says", [("", "needs a file name"), ("adir", "is a directory")])
def test_bench_csv_without_a_file_name_is_one_line(name, says, tmp_path, hist, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    assert says in one_error_line(runner.invoke(app, [*BENCH, "--csv", name]), 2)
    assert not hist.exists() and _files(tmp_path / "adir") == []


@interpreted
def test_bench_csv_write_that_fails_keeps_the_old_table(tmp_path, hist, monkeypatch):
    import autokernel.report

    table = tmp_path / "tables" / "t.csv"
    table.parent.mkdir()
    table.write_text("the previous table\n")
    # only the table's rename fails; the history is written as ever
    fail_renames_onto(monkeypatch, autokernel.report, table, OSError(28, "No space left on device"))
    line = one_error_line(runner.invoke(app, [*BENCH, "--csv", str(table)]), 2)
    assert "cannot write --csv" in line and "No space left" in line
    assert table.read_text() == "the previous table\n" and _files(table.parent) == ["t.csv"]
    assert len(History(hist).trials()) == 2  # the measurements themselves are kept


@interpreted
def test_bench_csv_is_written_whole(tmp_path, hist):
    table = tmp_path / "out" / "t.csv"
    result = runner.invoke(app, [*BENCH, "--csv", str(table)])
    assert result.exit_code == 0, result.output
    lines = table.read_bytes().split(b"\r\n")
    assert lines[0].startswith(b"M,N,K,dtype") and lines[1].startswith(b"16,16,16,float16") and lines[2] == b""
    assert _files(table.parent) == ["t.csv"] and table.stat().st_mode & 0o777 == 0o644


# ---- export-best -o ----

@pytest.mark.parametrize("spelling", ["explicit", "default"])
def test_export_refuses_to_write_over_the_history(spelling, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    history = tmp_path / "results" / "history.csv"
    history.parent.mkdir()
    before = _history(history)
    if spelling == "explicit":
        args = ["--history", "results/history.csv", "-o", str(history)]
    else:
        monkeypatch.delenv("AUTOKERNEL_HISTORY")
        args = ["-o", "results/history.csv"]
    line = one_error_line(runner.invoke(app, ["export-best", *args]), 2)
    assert "history" in line and "-o" in line
    assert history.read_bytes() == before


@pytest.mark.parametrize("args, says", [
    (["-o", ""], "-o needs a file name"),
    (["--per-device", "-o", ""], "-o needs a directory name"),
    (["-o", "adir"], "adir"),
])
def test_export_output_without_a_file_name_is_one_line(args, says, tmp_path, hist, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    before = _history(hist)
    assert says in one_error_line(runner.invoke(app, ["export-best", *args]), 2)
    assert hist.read_bytes() == before
    assert _files(tmp_path) == ["adir", "history.csv"] and _files(tmp_path / "adir") == []


def test_export_writes_the_configs(tmp_path, hist):
    _history(hist)
    out = tmp_path / "best.json"
    result = runner.invoke(app, ["export-best", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["entries"] and _files(tmp_path) == ["best.json", "history.csv"]


@pytest.mark.parametrize("command", ["export-best", "report"])
def test_a_dash_for_output_is_stdout(command, results, tmp_path, hist, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _history(hist)
    args = ["export-best", "-o", "-"] if command == "export-best" else ["report", str(results), "-o", "-"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    if command == "export-best":
        assert json.loads(result.stdout)["entries"]
    else:
        assert result.stdout.startswith("#")
    assert not (tmp_path / "-").exists() and not (tmp_path / "img").exists()


@pytest.mark.parametrize("command", ["export-best", "report"])
def test_an_output_under_a_file_says_the_file_is_no_directory(command, results, tmp_path, hist):
    before = _history(hist)
    out = hist / "out.md"  # the history, a file, where a directory should be
    args = ["export-best", "-o", str(out)] if command == "export-best" else ["report", str(results), "-o", str(out),
                                                                            "--no-plots"]
    line = one_error_line(runner.invoke(app, args), 2)
    assert "Not a directory" in line and str(hist) in line and "File exists" not in line
    assert hist.read_bytes() == before


def test_export_through_a_link_writes_the_file_it_names(tmp_path, hist):
    _history(hist)
    shared = tmp_path / "shared" / "best.json"
    shared.parent.mkdir()
    shared.write_text("the previous configs\n")
    link = tmp_path / "best.json"
    link.symlink_to(shared)
    result = runner.invoke(app, ["export-best", "-o", str(link)])
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and json.loads(shared.read_text())["entries"]
    assert _files(shared.parent) == ["best.json"]


# ---- report -o, and results files with values of the wrong type ----

def _result_row(**changes) -> dict:
    return {"suite": "squares", "impl": "triton", "M": 64, "N": 64, "K": 64, "dtype": "float16",
            "activation": "none", "bias": False, "layout": "nn", "status": "success", "ms": 0.5, "gpu_ms": 0.4,
            "timing": "gpu", "device": "NVIDIA H100 80GB HBM3 (synthetic)", "run_id": "r", **changes}


def _check_row(**changes) -> dict:
    return {"m": 64, "n": 64, "k": 64, "dtype": "float16", "activation": "none", "bias": False, "layout": "nn",
            "label": "a", "roles": ["pick", "default"], "status": "success", "gpu_ms": 0.4,
            "device": "NVIDIA H100 80GB HBM3 (synthetic)", "index": 0, **changes}


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def results(tmp_path) -> Path:
    return _jsonl(tmp_path / "r1.jsonl", [_result_row(impl="cublas", ms=0.6, gpu_ms=0.5), _result_row()])


@pytest.fixture
def check(tmp_path) -> Path:
    return _jsonl(tmp_path / "check.jsonl", [_check_row(label="cublas", roles=[]), _check_row()])


@pytest.mark.parametrize("args", [
    ["{r}", "-o", "{r}", "--no-plots"],
    ["{r}", "-o", "{d}/sub/../r1.jsonl", "--no-plots"],
    ["{r}", "--classes", "{c}", "-o", "{c}", "--no-plots"],
    ["{c}", "-o", "{c}"],
], ids=["same", "other spelling", "the classes check", "a selector check"])
def test_report_refuses_to_write_over_its_input(args, results, check, tmp_path):
    before = {p: p.read_bytes() for p in (results, check)}
    argv = [a.format(r=results, c=check, d=tmp_path) for a in args]
    line = one_error_line(runner.invoke(app, ["report", *argv]), 2)
    assert "would replace the results file" in line
    assert {p: p.read_bytes() for p in before} == before and _files(tmp_path) == ["check.jsonl", "r1.jsonl"]


def test_report_refuses_a_chart_over_its_input(tmp_path):
    results = _jsonl(tmp_path / "squares.png", [_result_row()])
    before = results.read_bytes()
    line = one_error_line(runner.invoke(app, ["report", str(results), "-o", str(tmp_path / "B.md"),
                                              "--plots-dir", str(tmp_path)]), 2)
    assert "a chart would replace the results file" in line
    assert results.read_bytes() == before and _files(tmp_path) == ["squares.png"]


def test_report_output_without_a_file_name_is_one_line(results, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "-o needs a file name" in one_error_line(runner.invoke(app, ["report", str(results), "-o", ""]), 2)
    assert _files(tmp_path) == ["r1.jsonl"]


def test_report_plots_dir_without_a_name_is_one_line(results, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_error_line(runner.invoke(app, ["report", str(results), "-o", "out/B.md", "--plots-dir", ""]), 2)
    assert line == "error: --plots-dir needs a directory name (--no-plots writes no charts)"
    assert _files(tmp_path) == ["r1.jsonl"]


def test_report_into_a_directory_leaves_no_temporary_file(results, tmp_path):
    (tmp_path / "SOMEDIR").mkdir()
    line = one_error_line(runner.invoke(app, ["report", str(results), "-o", str(tmp_path / "SOMEDIR"),
                                              "--no-plots"]), 2)
    assert "cannot write the report" in line and "Is a directory" in line and line.endswith("SOMEDIR")
    assert _files(tmp_path) == ["SOMEDIR", "r1.jsonl"] and _files(tmp_path / "SOMEDIR") == []


def test_report_write_that_fails_keeps_the_old_report(results, tmp_path, monkeypatch):
    import autokernel.report

    out = tmp_path / "B.md"
    out.write_text("the previous report\n")
    fail_renames_onto(monkeypatch, autokernel.report, out)
    line = one_error_line(runner.invoke(app, ["report", str(results), "-o", str(out), "--no-plots"]), 2)
    assert line == f"error: cannot write the report: Permission denied: {out}"
    assert out.read_text() == "the previous report\n" and _files(tmp_path) == ["B.md", "r1.jsonl"]


def test_report_written_whole(results, tmp_path):
    out = tmp_path / "docs" / "B.md"
    result = runner.invoke(app, ["report", str(results), "-o", str(out), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("# Benchmarks") and _files(out.parent) == ["B.md"]
    assert out.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("field, value", [
    ("suite", None), ("suite", 5), ("suite", ["squares"]), ("impl", ["triton"]), ("impl", None), ("status", 3),
])
def test_results_with_a_value_of_the_wrong_type_are_one_line(field, value, tmp_path):
    path = _jsonl(tmp_path / "bad.jsonl", [_result_row(impl="cublas"), _result_row(**{field: value})])
    out = tmp_path / "B.md"
    out.write_text("the previous report\n")
    result = runner.invoke(app, ["report", str(path), "-o", str(out), "--plots-dir", str(tmp_path / "img")])
    line = one_error_line(result, 2)
    assert line == f"error: {path} line 2: {field} must be a string, got {value!r}"
    assert out.read_text() == "the previous report\n" and not (tmp_path / "img").exists()


@pytest.mark.parametrize("field", ["ms", "gpu_ms"])
@pytest.mark.parametrize("value, says", [
    (-1.0, "must be > 0 and finite"), (0, "must be > 0 and finite"), (float("nan"), "must be > 0 and finite"),
    (float("inf"), "must be > 0 and finite"), (True, "must be a number"),
])
def test_results_with_a_time_that_is_no_time_are_one_line(field, value, says, tmp_path):
    path = _jsonl(tmp_path / "bad.jsonl", [_result_row(impl="cublas"), _result_row(**{field: value})])
    out = tmp_path / "B.md"
    out.write_text("the previous report\n")
    result = runner.invoke(app, ["report", str(path), "-o", str(out), "--plots-dir", str(tmp_path / "img")])
    assert one_error_line(result, 2) == f"error: {path} line 2: {field} {says}, got {value!r}"
    assert out.read_text() == "the previous report\n" and not (tmp_path / "img").exists()


@pytest.mark.parametrize("value", [-1.0, 0, float("nan"), float("inf")])
def test_selector_check_with_a_time_that_is_no_time_is_one_line(value, tmp_path):
    path = _jsonl(tmp_path / "bad.jsonl", [_check_row(label="cublas", roles=[]), _check_row(gpu_ms=value)])
    line = one_error_line(runner.invoke(app, ["report", str(path), "-o", str(tmp_path / "B.md")]), 2)
    assert line == f"error: {path} line 2: gpu_ms must be > 0 and finite, got {value!r}"
    assert not (tmp_path / "B.md").exists()


@pytest.mark.parametrize("field, value, says", [
    ("label", None, "label must be a string"), ("label", 7, "label must be a string"),
    ("label", ["a"], "label must be a string"), ("status", 3, "status must be a string"),
    ("index", [1], "index must be a whole number"), ("index", "0", "index must be a whole number"),
])
def test_selector_check_with_a_value_of_the_wrong_type_is_one_line(field, value, says, tmp_path):
    path = _jsonl(tmp_path / "bad.jsonl", [_check_row(label="cublas", roles=[]), _check_row(**{field: value})])
    line = one_error_line(runner.invoke(app, ["report", str(path), "-o", str(tmp_path / "B.md")]), 2)
    assert line == f"error: {path} line 2: {says}, got {value!r}"
    assert not (tmp_path / "B.md").exists()
    line = one_error_line(runner.invoke(app, ["report", str(_jsonl(tmp_path / "r.jsonl", [_result_row()])),
                                              "--classes", str(path), "--no-plots"]), 2)
    assert f"{path} line 2: {says}" in line  # as --classes, the same


def test_selector_check_of_the_right_types_is_reported(check, tmp_path):
    result = runner.invoke(app, ["report", str(check), "-o", str(tmp_path / "B.md")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "B.md").read_text().startswith("# Selector check")
    assert _files(tmp_path) == ["B.md", "check.jsonl"]

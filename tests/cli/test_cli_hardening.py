"""The CLI on bad input, as a new user meets it: one line on stderr, the right exit code,
nothing written that was there before."""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autokernel.cli import app
from tests.helpers import one_error_line

runner = CliRunner()

# Commands that append to the history, each on a problem small enough for the interpreter.
APPENDING = [["validate", "-s", "16"], ["bench", "--interpret", "-s", "16"], ["fuse-bench", "--interpret", "-s", "16"]]
ODD_FILES = {
    "carriage return": b"a\rb,c\n",
    "random bytes": random.Random(11).randbytes(4000),
    "a NUL in the header": b"timestamp,run_id\x00,command\n",
    "an open quote": b'"timestamp,run_id\n1,2\n',
}


@pytest.mark.parametrize("command", APPENDING, ids=lambda c: c[0])
@pytest.mark.parametrize("name", list(ODD_FILES))
def test_history_with_odd_bytes_is_one_line_and_left_untouched(name, command, tmp_path):
    path = tmp_path / "odd.csv"
    path.write_bytes(ODD_FILES[name])
    result = runner.invoke(app, [*command, "--history", str(path)])
    line = one_error_line(result, 2)
    assert "history" in line and str(path) in line
    assert path.read_bytes() == ODD_FILES[name]


@pytest.mark.parametrize("name", list(ODD_FILES))
def test_reading_a_history_with_odd_bytes_skips_them(name, tmp_path):
    path = tmp_path / "odd.csv"
    path.write_bytes(ODD_FILES[name])
    result = runner.invoke(app, ["history", "--history", str(path)])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "skipped" in result.stderr
    assert path.read_bytes() == ODD_FILES[name]


# ---- the console script: usage errors and Ctrl-C, one line each ----

def _main(args, capsys):
    """Run the console script's main(args): (exit code, stdout, stderr)."""
    from autokernel.cli import main

    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    return info.value.code, out, err


@pytest.mark.parametrize("args, says", [
    (["validate", "-s", "abc"], "--size"),
    (["validate", "--bogus"], "--bogus"),
    (["bench", "--size"], "requires an argument"),
    (["no-such-command"], "no-such-command"),
])
def test_usage_errors_are_one_line(args, says, capsys):
    code, out, err = _main(args, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and says in lines[0], err
    assert "╭" not in err and "Traceback" not in err and out == ""


HUGE = "99999999999999999999"  # past int64


@pytest.mark.parametrize("args", [
    ["explain", "--m", HUGE, "--n", "1", "--k", "1", "--device", "h100"],
    ["validate", "--size", HUGE, "--force"],
    ["roofline", "--gpu", "h100", "--m", "3037000500", "--n", "3037000500", "--k", "1"],
], ids=["explain", "validate", "roofline"])
def test_sizes_no_tensor_can_hold_are_one_line(args, tmp_path, capsys):
    """An operand of 2^63 elements or more is refused as the problem is read, before any
    row reaches the history (a row no reader could type)."""
    history = tmp_path / "h.csv"
    code, out, err = _main([*args, *(["--history", str(history)] if args[0] == "validate" else [])], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "2^63" in lines[0], err
    assert "Traceback" not in err and not history.exists()


@pytest.mark.parametrize("ms", ["nan", "inf", "0"])
def test_roofline_ms_must_be_a_finite_positive_number(ms, capsys):
    code, out, err = _main(["roofline", "--gpu", "h100", "--size", "16", "--ms", ms, "--json"], capsys)
    assert code == 2 and "--ms" in err and out == ""


@pytest.mark.parametrize("args, says", [
    (["explain", "--m", "8", "--n", "8", "--k", "8", "--device", "h100", "--top", "0"], "--top"),
    (["loop", "-s", "16", "--interpret", "--min-gain", "nan"], "--min-gain"),
    (["loop", "-s", "16", "--interpret", "--min-gain", "inf"], "--min-gain"),
    (["loop", "-s", "16", "--interpret", "--max-generations", "0"], "--max-generations"),
    (["validate", "-s", "16", "--seed", HUGE], "--seed"),
])
def test_out_of_range_options_name_themselves(args, says, tmp_path, capsys):
    code, out, err = _main([*args, "--history", str(tmp_path / "h.csv")] if args[0] != "explain" else args, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and says in lines[0], err
    assert not (tmp_path / "h.csv").exists()


@pytest.mark.parametrize("command, says", [
    (["explain", "--m", "8", "--n", "8", "--k", "8"], "leave --device out for this machine's"),
    (["export-best"], "leave --device out"),
], ids=["explain", "export-best"])
@pytest.mark.parametrize("device", ["", " "])
def test_an_empty_device_is_an_error_not_any_gpu(command, says, device, hist):
    from autokernel.config import KernelConfig
    from autokernel.history import History, make_row
    from autokernel.records import Problem

    History(hist).append_many([make_row("tune", Problem(64, 64, 64), KernelConfig(), status="success", run_id="r",
                                        kernel="triton", ms=1.0)])
    before = hist.read_bytes()
    line = one_error_line(runner.invoke(app, [*command, "--device", device]), 2)
    assert line.startswith("error: --device is empty") and says in line
    assert hist.read_bytes() == before


def test_files_saved_with_a_byte_order_mark_are_read(tmp_path):
    """A UTF-8 byte order mark (what some editors put first) is not part of the content."""
    from autokernel import best
    from autokernel.records import KernelConfig
    from autokernel.tuning.shapes import read_shapes

    bom = "\ufeff"
    config = tmp_path / "config.json"
    config.write_text(bom + KernelConfig(block_m=32, block_n=32, block_k=32, num_warps=4).model_dump_json(), encoding="utf-8")
    assert KernelConfig.from_json(str(config)).block_m == 32
    shapes = tmp_path / "shapes.csv"
    shapes.write_text(bom + "M,N,K,dtype\n48,64,80,bfloat16\n", encoding="utf-8")
    assert [(p.m, p.n, p.k, p.dtype) for p in read_shapes(shapes)] == [(48, 64, 80, "bfloat16")]
    shipped = next((best.SHIPPED_DIR).glob("*.json"))
    exported = tmp_path / "best.json"
    exported.write_text(bom + shipped.read_text(), encoding="utf-8")
    assert best.load(exported) == best.load(shipped)


@pytest.mark.parametrize("text, says", [
    ("M,N,K,activaton\n64,64,64,relu\n", "header: unknown column 'activaton' (known: M, N, K, dtype,"),
    ("M,N,K\n64,64,64,relu\n", "line 2: more values than the header has columns"),
    ('[{"M": 64, "N": 64, "K": 64, "bais": true}]', "entry 1: unknown column 'bais'"),
    ("M,N,K,\n64,64,64,relu\n", "line 2: a value under a column with no name"),
])
def test_a_shapes_file_s_unknown_column_is_an_error_not_ignored(tmp_path, text, says):
    """A misspelt column (or a cell past the header) was dropped without a word: the
    problems were tuned without the activation or bias the file asked for."""
    shapes = tmp_path / ("shapes.json" if text.startswith("[") else "shapes.csv")
    shapes.write_text(text)
    line = one_error_line(runner.invoke(app, ["loop", "--shapes", str(shapes), "--interpret"]), 2)
    assert says in line and str(shapes) in line


@pytest.mark.parametrize("command", [
    ["loop", "--interpret", "--shapes"], ["tune", "--interpret", "-s", "16", "--plot"], ["tune", "--replay"],
    ["roofline", "--gpu", "h100", "--plot"], ["shapes", "--model", "x:y", "-o"],
], ids=lambda c: " ".join(c[:1] + c[-1:]))
def test_an_empty_path_is_an_error_not_the_working_directory(command, tmp_path, monkeypatch, capsys):
    """Typer's Path reads "" as ".": --shapes "" said "cannot read shapes file .: Is a directory"."""
    monkeypatch.chdir(tmp_path)
    code, out, err = _main([*command, ""], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "needs a path, got an empty string" in lines[0], err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, says", [
    ([""], "RESULTS needs a file name"),
    ([str(Path(__file__).resolve().parents[2] / "docs/runs/suite/h100_v8.jsonl"), "--classes", ""],
     "--classes needs a file name"),
])
def test_report_s_empty_file_names_are_errors(args, says, capsys):
    """report "" said "results file . is a directory"."""
    code, out, err = _main(["report", *args], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and says in lines[0], err
    assert out == ""


def test_a_shapes_file_s_trailing_commas_are_no_column(tmp_path):
    """A spreadsheet's export ends rows with a comma: an unnamed, empty column is no error."""
    from autokernel.tuning.shapes import read_shapes

    shapes = tmp_path / "shapes.csv"
    shapes.write_text("M,N,K,dtype,\n48,64,80,bfloat16,\n")
    assert [(p.m, p.n, p.k, p.dtype) for p in read_shapes(shapes)] == [(48, 64, 80, "bfloat16")]


def test_a_size_given_twice_is_one_problem():
    from autokernel.cli._common import problem_sizes

    assert problem_sizes([16, 32, 16], None, None, None) == [(16, 16, 16), (32, 32, 32)]


@pytest.mark.parametrize("command", [
    ["validate", "-s", "16"], ["bench", "-s", "16"], ["bench", "--interpret", "-s", "16"], ["fuse-bench", "-s", "16"],
    ["tune", "-s", "16"], ["tune", "--replay", "tests/data/sweep_h100.csv", "-s", "4096"],
    ["loop", "--replay", "tests/data/sweep_h100.csv", "-s", "4096"], ["explain", "--m", "8", "--n", "8", "--k", "8"],
], ids=lambda c: " ".join(c[:2]))
def test_interpreter_off_without_a_gpu_is_one_line(command, hist, monkeypatch):
    import torch

    from autokernel import runtime
    from tests.helpers import ROOT

    if torch.cuda.is_available():
        pytest.skip("needs a machine without a CUDA GPU")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(runtime, "INTERPRETER", False)  # as TRITON_INTERPRET=0 leaves it when autokernel is imported
    line = one_error_line(runner.invoke(app, command), 2)
    assert line == ("error: TRITON_INTERPRET=0 turns Triton's interpreter off, and torch sees no CUDA GPU here: "
                    "unset it (or set it to 1) to run the kernels under the interpreter on the CPU")
    assert not hist.exists()


@pytest.mark.parametrize("command", [["history"], ["export-best"], ["validate", "-s", "16"]], ids=lambda c: c[0])
def test_a_history_that_is_a_pipe_is_refused_not_read(command, tmp_path, capsys):
    """Opening a named pipe to read waits for a writer: refused before it is opened."""
    import os

    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    code, out, err = _main([*command, "--history", str(fifo)], capsys)
    assert code == 2 and "not a regular file" in err and "Traceback" not in err


def test_json_output_is_strict_json(capsys):
    """A number JSON cannot hold (NaN, inf) is printed as null, so every reader parses it."""
    import json

    from autokernel.cli._common import print_json

    print_json({"ms": float("nan"), "rows": [1.5, float("inf"), {"x": -float("inf")}], "name": "a"})
    out = capsys.readouterr().out
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in --json output")) == {
        "ms": None, "rows": [1.5, None, {"x": None}], "name": "a"}


def test_ctrl_c_is_one_line_with_the_rows_saved(tmp_path, monkeypatch, capsys):
    import autokernel.evaluate
    from autokernel.cli._common import this_run
    from autokernel.history import History

    monkeypatch.setattr(this_run, "store", None)
    check = autokernel.evaluate.check_correctness
    calls = []

    def interrupted_on_the_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            signal.raise_signal(signal.SIGINT)  # as Ctrl-C would
        return check(*args, **kwargs)

    monkeypatch.setattr(autokernel.evaluate, "check_correctness", interrupted_on_the_third)
    path = tmp_path / "h.csv"
    code, _, err = _main(["validate", "-s", "16", "--history", str(path)], capsys)
    assert code == 130
    assert err.strip().splitlines() == [f"interrupted, 2 rows saved to {path}"]
    assert len(History(path).read()) == 2


def test_ctrl_c_before_any_row(monkeypatch, capsys):
    import autokernel.cli.history as history_cli
    from autokernel.cli._common import this_run

    monkeypatch.setattr(this_run, "store", None)

    def interrupted(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(history_cli, "load_history", interrupted)
    code, _, err = _main(["history"], capsys)
    assert code == 130 and err.strip().splitlines() == ["interrupted, 0 rows saved"]


# ---- what the user typed is shown as typed ----

def test_markup_in_arguments_is_printed_literally():
    result = runner.invoke(app, ["validate", "-s", "8", "-a", "[bold]gelu[/bold]"])
    assert "'[bold]gelu[/bold]'" in one_error_line(result, 2)


def test_markup_in_history_cells_and_paths_is_printed_literally(tmp_path):
    from autokernel.history import History, make_row
    from autokernel.records import Problem

    path = tmp_path / "runs[x]" / "h.csv"
    History(path).append(make_row("bench", Problem(8, 8, 8), status="runtime_error", run_id="r",
                                  error="[red]boom[/red] at [x]"))
    result = runner.invoke(app, ["history", "--history", str(path)])
    assert result.exit_code == 0, result.output
    assert "[red]boom[/red] at [x]" in result.stdout and "runs[x]" in result.stdout


def test_piped_tables_are_plain_and_not_cut(tmp_path, monkeypatch):
    from autokernel.cli._common import console
    from autokernel.history import History, make_row
    from autokernel.records import Problem

    monkeypatch.setattr(console, "width", 80)  # what a pipe gets
    error = "a message that cannot fit in 80 columns beside the other cells"
    path = tmp_path / "h.csv"
    History(path).append(make_row("bench", Problem(8, 8, 8), status="failed_correctness", run_id="r", error=error))
    result = runner.invoke(app, ["history", "--history", str(path)])
    assert result.exit_code == 0, result.output
    assert error in result.stdout and "failed_correctness" in result.stdout
    assert "…" not in result.stdout and "│" not in result.stdout
    assert console.width == 80  # restored


# ---- --config ----

def test_empty_config_is_an_error():
    assert "--config is empty" in one_error_line(runner.invoke(app, ["validate", "-s", "8", "-c", ""]), 2)


def test_missing_config_file_is_named(tmp_path):
    missing = tmp_path / "missing.json"
    line = one_error_line(runner.invoke(app, ["validate", "-s", "8", "-c", str(missing)]), 2)
    assert f"config file {missing} does not exist" in line


# ---- help without torch, a warning before slow interpreted runs ----

@pytest.mark.parametrize("args", [["--help"], ["bench", "--help"], ["validate", "-s", "abc"]])
def test_help_and_usage_errors_import_no_torch(args):
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys\nfrom autokernel.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[2])
    assert proc.stderr.strip().splitlines()[-1] == "no torch", proc.stderr


def test_slow_interpreted_problems_are_warned_with_an_estimate(capsys):
    from autokernel import runtime
    from autokernel.cli._common import check_interpreter_budget
    from autokernel.records import Problem

    if not runtime.INTERPRETER:
        pytest.skip("the warning is for the interpreter")
    check_interpreter_budget([Problem(64, 64, 64), Problem(8192, 8192, 8192)], force=True)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "8192x8192x8192" in lines[0] and "per kernel call" in lines[0], lines
    check_interpreter_budget([Problem(256, 256, 256)], force=True)
    assert capsys.readouterr().err == ""


def test_ctrl_c_in_tune_keeps_every_trial(sweep, tmp_path, monkeypatch, capsys):
    from autokernel.cli._common import this_run
    from autokernel.history import History

    monkeypatch.setattr(this_run, "store", None)
    append_many = History.append_many
    calls = []

    def interrupted_after_the_third(self, rows):
        append_many(self, rows)
        calls.append(1)
        if len(calls) == 3:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(History, "append_many", interrupted_after_the_third)
    path = tmp_path / "h.csv"
    code, _, err = _main(["tune", "--replay", str(sweep), "-s", "4096", "--strategy", "random", "-g", "3", "-n", "4",
                          "--seed", "1", "--history", str(path)], capsys)
    assert code == 130
    assert err.strip().splitlines()[-1] == f"interrupted, 3 rows saved to {path}"
    assert len(History(path).read()) == 3

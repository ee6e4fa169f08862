"""The CLI on bad input, as a new user meets it: one line on stderr, the right exit code,
nothing written that was there before."""

from __future__ import annotations

import random

import pytest
from typer.testing import CliRunner

from autokernel.cli import app
from conftest import one_error_line

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

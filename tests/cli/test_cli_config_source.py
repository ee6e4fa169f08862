"""One rule for every command: each measures and checks the config autokernel.matmul
would run ($AUTOKERNEL_CONFIG, the shipped file, else the default), says which in its
table, and a tuned-config file that can't be read is one line and exit 2 everywhere."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autokernel import best, runtime
from autokernel.cli import app
from tests.helpers import one_error_line, write_best

pytestmark = pytest.mark.skipif(not runtime.INTERPRETER, reason="CPU tests: kernels run under the interpreter")

runner = CliRunner()
TUNED = {"block_m": 16, "block_n": 32, "block_k": 16, "group_m": 4, "num_warps": 1, "num_stages": 1}


@pytest.fixture
def tuned_env(tmp_path, monkeypatch):
    """$AUTOKERNEL_CONFIG names a file with a 16x16x16 float16 entry, with and without bias and relu."""
    path = tmp_path / "tuned.json"
    write_best(path, *({"M": 16, "N": 16, "K": 16, "activation": act, "bias": bias, "config": TUNED}
                       for act in ("none", "relu") for bias in (False, True)))
    monkeypatch.setenv(best.CONFIG_ENV, str(path))
    best.clear_cache()
    yield path
    monkeypatch.delenv(best.CONFIG_ENV)
    best.clear_cache()


@pytest.fixture
def broken_env(tmp_path, monkeypatch):
    """$AUTOKERNEL_CONFIG names the empty file a failed `export-best > file` leaves."""
    path = tmp_path / "best_config.json"
    path.write_text("")
    monkeypatch.setenv(best.CONFIG_ENV, str(path))
    best.clear_cache()
    yield path
    monkeypatch.delenv(best.CONFIG_ENV)
    best.clear_cache()


def test_validate_checks_the_config_matmul_would_run(tuned_env):
    result = runner.invoke(app, ["validate", "-s", "16", "-s", "128", "-d", "fp16", "--no-bias", "--json"])
    assert result.exit_code == 0, result.output
    near, far = json.loads(result.stdout)  # 128 is 8x the entry's shape: out of reach
    assert near["config_source"] == "env" and {k: near["config"][k] for k in TUNED} == TUNED
    assert far["config_source"] == "default"
    shown = runner.invoke(app, ["validate", "-s", "16", "-d", "fp16", "--no-bias"])
    assert "16x32x16 g4 w1 s1 (env)" in shown.stdout


def test_fuse_bench_times_the_config_matmul_would_run(tuned_env):
    result = runner.invoke(app, ["fuse-bench", "--interpret", "-s", "16", "-a", "relu", "--repeat", "1", "--json"])
    assert result.exit_code == 0, result.output
    (ours,) = [r for r in json.loads(result.stdout) if r["kernel"] == "triton"]
    assert ours["name"] == "env" and {k: ours["config"][k] for k in TUNED} == TUNED
    shown = runner.invoke(app, ["fuse-bench", "--interpret", "-s", "16", "-a", "relu", "--repeat", "1"])
    assert "triton 16x32x16 g4 w1 s1 (env)" in shown.stdout and "triton default" not in shown.stdout


@pytest.mark.parametrize("command", [
    ["validate", "-s", "16"],
    ["bench", "--interpret", "-s", "16"],
    ["fuse-bench", "--interpret", "-s", "16"],
    ["tune", "--interpret", "-s", "16", "-g", "1", "-n", "1"],
    ["loop", "--interpret", "-s", "16", "--max-trials", "1"],
], ids=lambda c: c[0])
def test_a_broken_config_file_stops_every_command(command, broken_env, hist):
    line = one_error_line(runner.invoke(app, command), 2)
    assert best.CONFIG_ENV in line and str(broken_env) in line and "empty" in line
    assert not hist.exists()


def test_matmul_with_a_broken_config_file_is_one_clear_line(broken_env):
    import torch

    import autokernel
    from autokernel.config import ConfigError

    a = torch.randn(8, 8, device=runtime.kernel_device())
    with pytest.raises(ConfigError) as info:
        autokernel.matmul(a, a)
    message = str(info.value)
    assert "\n" not in message and best.CONFIG_ENV in message and str(broken_env) in message and "empty" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_binary_config_file_is_named(tmp_path, monkeypatch):
    path = tmp_path / "best.bin"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(best.ConfigError) as info:
        best.load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)

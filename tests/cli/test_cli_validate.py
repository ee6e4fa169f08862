import json

from typer.testing import CliRunner

from autokernel import __version__
from autokernel.cli import app
from tests.helpers import one_error_line

runner = CliRunner()


def test_version_and_help():
    assert runner.invoke(app, ["--version"]).stdout.strip() == f"autokernel {__version__}"
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "validate" in result.stdout


def test_default_suite_json_passes_and_covers_the_matrix():
    result = runner.invoke(app, ["validate", "--json"])
    assert result.exit_code == 0, result.stdout[-2000:]
    cases = json.loads(result.stdout)
    assert all(c["passed"] for c in cases)
    problems = [c["problem"] for c in cases]
    assert {p["dtype"] for p in problems} == {"float16", "bfloat16"}
    assert {p["activation"] for p in problems} == {"none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu"}
    assert {p["layout"] for p in problems} == {"nn", "tn", "nt", "tt"}
    assert {p["bias"] for p in problems} == {True, False}
    assert {"m": 1, "n": 1, "k": 1} in [{k: p[k] for k in "mnk"} for p in problems]
    assert any(p["k"] == 0 for p in problems) and any(p["m"] == 0 for p in problems)


def test_explicit_problem_and_config_table():
    cfg = json.dumps({"block_m": 16, "block_n": 32, "block_k": 16, "group_m": 2, "num_warps": 2, "num_stages": 1})
    result = runner.invoke(
        app, ["validate", "--m", "19", "--n", "23", "--k", "29", "-d", "bf16", "-a", "silu", "--bias", "--config", cfg]
    )
    assert result.exit_code == 0, result.stdout
    assert "19x23x29 bfloat16 bias silu" in result.stdout
    assert "16x32x16 g2 w2 s1" in result.stdout
    assert "1/1 cases passed" in result.stdout


def test_failing_case_exits_1(monkeypatch):
    # A kernel that writes nothing must be caught by the NaN poison: exit code 1.
    monkeypatch.setattr("autokernel.kernels.matmul.plan_matmul", lambda *a, **k: lambda *tensors: None)
    result = runner.invoke(app, ["validate", "-s", "8", "-d", "fp16", "--no-bias", "--json"])
    assert result.exit_code == 1
    case = json.loads(result.stdout)[0]
    assert case["passed"] is False and case["all_written"] is False


def test_bad_inputs_are_one_line():
    assert "--size must be >= 0" in one_error_line(runner.invoke(app, ["validate", "-s", "-3"]), 2)
    assert "unknown dtype 'float8'" in one_error_line(runner.invoke(app, ["validate", "-s", "8", "-d", "float8"]), 2)
    assert "activation must be one of" in one_error_line(runner.invoke(app, ["validate", "-s", "8", "-a", "tanh"]), 2)
    assert "invalid config" in one_error_line(runner.invoke(app, ["validate", "-s", "8", "-c", '{"block_m": 3}']), 2)
    assert "give all three" in one_error_line(runner.invoke(app, ["validate", "--m", "8"]), 2)


def test_every_case_is_a_history_row(hist):
    from autokernel.history import History

    result = runner.invoke(app, ["validate", "-s", "9", "-d", "fp16", "-a", "relu", "-a", "silu", "--bias"])
    assert result.exit_code == 0, result.output
    df = History(hist).read()
    assert list(df["activation"]) == ["relu", "silu"]
    assert set(df["command"]) == {"validate"} and set(df["status"]) == {"success"}
    assert (df["rel_error"] < 1e-2).all() and df["ms"].isna().all()  # validate times nothing


def test_fp32_and_narrowing_options_still_give_cases():
    for args in (["-d", "fp32"], ["--no-bias", "-a", "relu"], ["-l", "tt"]):
        result = runner.invoke(app, ["validate", "--json", *args])
        assert result.exit_code == 0, result.output
        assert len(json.loads(result.stdout)) >= len(["1x1x1", "17x33x65", "127x255x63", "64^3", "K=0", "M=0"])

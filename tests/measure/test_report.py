"""`autokernel report` on a small synthetic results file and bad inputs (benchmarks/suite.py,
which writes such files, has its smoke tests in tests/benchmarks/test_suite.py).

The results built here are SYNTHETIC (hand-picked times, device "... (synthetic)"): they test the
arithmetic and the rendering, and must never be committed as benchmark figures.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autokernel.cli import app
from autokernel.evaluate import Trial
from autokernel.records import Problem
from autokernel.report import build_report, evaluate_targets, group, read_results, result_row
from tests.helpers import one_error_line

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
DEVICE = "NVIDIA H100 80GB HBM3 (synthetic)"
COPY_GBS = 3000.0
CMD = "python3 benchmarks/suite.py --out synthetic.jsonl"

SQ = Problem(4096, 4096, 4096, "float16")
BIG = Problem(8192, 8192, 8192, "bfloat16")
DEC1 = Problem(1, 4096, 4096, "float16", layout="nt")
DEC16 = Problem(16, 4096, 4096, "float16", layout="nt")
DEC128 = Problem(128, 4096, 4096, "float16", layout="nt")
RELU = Problem(4096, 4096, 4096, "float16", "relu", True, "nt")
SILU = Problem(4096, 4096, 4096, "float16", "silu", True, "nt")

# (suite, impl, problem, wall ms, GPU ms) — synthetic, chosen so the geomeans can be checked by hand.
TIMES = [
    ("squares", "cublas", SQ, 0.21, 0.20), ("squares", "triton", SQ, 0.21, 0.25),        # gpu 0.8x, wall 1.0x
    ("squares", "cublas", BIG, 1.60, 1.40625), ("squares", "triton", BIG, 1.60, 1.25),  # gpu 1.125x, wall 1.0x
    ("decode", "cublas", DEC1, 0.030, 0.020), ("decode", "triton", DEC1, 0.030, 0.016),  # gpu 1.25x
    ("decode", "cublas", DEC16, 0.040, 0.030), ("decode", "triton", DEC16, 0.040, 0.020),  # gpu 1.5x
    ("decode", "cublas", DEC128, 0.050, 0.010), ("decode", "triton", DEC128, 0.050, 0.100),  # in no target
    ("fused", "eager", RELU, 0.25, 0.22), ("fused", "cublaslt", RELU, 0.24, 0.20), ("fused", "triton", RELU, 0.24, 0.20),
    ("fused", "eager", SILU, 0.26, 0.24), ("fused", "triton", SILU, 0.24, 0.20),
]


def synthetic_row(suite, impl, problem, ms, gpu_ms, *, status="success", error=None, run_id="synthetic"):
    trial = Trial(problem, None, status, ms=ms if status == "success" else None,
                  gpu_ms=gpu_ms if status == "success" else None, timing="gpu", error=error)
    row = result_row(suite, impl, trial, command=CMD, run_id=run_id, copy_gbs=COPY_GBS, gpu_timer="cuda_graph")
    row["device"] = DEVICE
    return row


def write_results(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def results(tmp_path) -> Path:
    # An older run of 4096^3 first: the report must take the problem from the latest run only.
    rows = [synthetic_row("squares", "triton", SQ, 0.01, 0.01, run_id="older")]
    rows += [synthetic_row(*t) for t in TIMES]
    rows.append(synthetic_row("fused", "max_autotune", RELU, None, None, status="runtime_error",
                              error="BackendCompilerFailed: synthetic failure"))
    return write_results(tmp_path / "synthetic.jsonl", rows)


def _target_line(md: str, name: str, timer: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {name}") and f"| {timer} |" in line)


def test_report_tables_geomeans_and_plots(results, tmp_path):
    out, img = tmp_path / "docs" / "BENCHMARKS.md", tmp_path / "docs" / "img"
    result = runner.invoke(app, ["report", str(results), "-o", str(out), "--plots-dir", str(img)])
    assert result.exit_code == 0, result.output
    md = out.read_text()
    assert DEVICE in md and CMD in md and "copy bandwidth: 3000 GB/s" in md

    # plain GEMM: GPU time 0.8x and 1.125x -> geomean sqrt(0.9) = 0.949 < 0.97; wall time 1.0x both.
    assert _target_line(md, "plain GEMM vs cuBLAS", "gpu").endswith("| 2 | 0.949x | 4096x4096x4096 float16: 0.80x "
                                                                   "| ≥ 0.97x | **MISSED** |")
    assert "| 1.000x |" in _target_line(md, "plain GEMM vs cuBLAS", "wall")
    assert "**MET**" in _target_line(md, "plain GEMM vs cuBLAS", "wall")
    # 8192^3 bf16 in 1.25 ms of GPU time: 2·8192³ / 1.25e-3 = 880 TFLOP/s >= 750.
    assert "| 880 |" in _target_line(md, "Triton at 8192³ bf16", "gpu")
    assert "**MET**" in _target_line(md, "Triton at 8192³ bf16", "gpu")
    # fused fp16: 0.22/0.20 = 1.1x and 0.24/0.20 = 1.2x vs eager; vs cuBLASLt only relu has a rival: 1.0x.
    assert "| 2 | 1.149x |" in _target_line(md, "fused vs eager, geomean, float16", "gpu")
    assert "| 1 | 1.000x |" in _target_line(md, "fused vs best of cuBLASLt", "gpu")
    assert "not measured" in _target_line(md, "fused vs eager, geomean, bfloat16", "gpu")
    # decode M <= 64: 1.25x and 1.5x (M = 128 counts in neither target).
    assert "| 2 | 1.369x |" in _target_line(md, "decode (M ≤ 64) vs cuBLAS", "gpu")

    # One table per suite, with the implementations that ran in it and the decode GB/s columns.
    for suite in ("squares", "decode", "fused"):
        assert f"## {suite}\n\n![TFLOP/s per shape, {suite}](img/{suite}.png)" in md
        png = img / f"{suite}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fused = md.split("## fused")[1].split("##")[0]
    assert "eager fused | cuBLASLt epilogue | torch.compile max-autotune" in fused and "cuBLAS |" not in fused
    assert "| 4096x4096x4096 nt | float16 | bias + relu | 687 | 625 | 687 | runtime_error |" in fused
    decode = md.split("## decode")[1].split("##")[0]
    assert "Triton GB/s | cuBLAS GB/s | share of copy GB/s" in decode
    assert "Triton GB/s" not in md.split("## squares")[1].split("##")[0]
    assert "BackendCompilerFailed: synthetic failure" in md.split("## Failures")[1]


def test_geomeans_by_hand(results):
    rows = read_results(results)
    res = group(rows)
    assert len(res) == 7 and next(r for r in res if r.problem == SQ).time("triton", "gpu") == 0.25  # latest run
    targets = {(t.name, t.timer): t for t in evaluate_targets(res, COPY_GBS, interpreted=False)}
    plain = targets[("plain GEMM vs cuBLAS, geomean (squares + LLM, M > 128)", "gpu")]
    assert plain.value == pytest.approx(math.sqrt(0.20 / 0.25 * 1.40625 / 1.25)) and plain.verdict == "MISSED"
    decode = targets[("decode (M ≤ 64) vs cuBLAS, geomean", "gpu")]
    assert decode.value == pytest.approx(math.sqrt(1.25 * 1.5)) and decode.shapes == 2
    # Bandwidth: bytes (A, B, C) over the GPU time, as a share of the 3000 GB/s copy.
    share = [(m * 4096 + 4096 * 4096 + m * 4096) * 2 / (t * 1e-3) / 1e9 / COPY_GBS for m, t in ((1, 0.016), (16, 0.020))]
    bandwidth = targets[("decode (M ≤ 64) share of measured copy bandwidth, geomean", "gpu")]
    assert bandwidth.value == pytest.approx(math.sqrt(share[0] * share[1]))
    assert share == pytest.approx([0.699, 0.564], abs=1e-3) and bandwidth.verdict == "MISSED"  # 0.63 < 0.70


def test_interpreter_results_are_never_judged(results):
    rows = [dict(r, timing="interpreter") for r in read_results(results)]
    report = build_report(rows, "x.jsonl")
    assert {t.verdict for t in report.targets} == {"n/a (interpreter timings)"}
    assert "**Interpreter timings**" in report.markdown


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    ("timestamp,M,N,K\n1,2,3,4\n", "not JSON"),
    ('{"suite": "s", "M": 1}\n', "lacks impl"),
    ('[1, 2]\n', "not a JSON object"),
])
def test_bad_results_are_one_line_and_keep_the_old_report(tmp_path, content, message):
    path = tmp_path / "results.jsonl"
    if content is not None:
        path.write_text(content)
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("the previous report\n")
    result = runner.invoke(app, ["report", str(path), "-o", str(out), "--plots-dir", str(tmp_path / "img")])
    assert message in one_error_line(result, 2)
    assert out.read_text() == "the previous report\n" and not (tmp_path / "img").exists()


def test_gzipped_results_read_as_the_plain_file(results, tmp_path):
    packed = tmp_path / "results.jsonl.gz"
    packed.write_bytes(gzip.compress(results.read_bytes()))
    assert read_results(packed) == read_results(results)
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(results.read_bytes())[:-30])
    result = runner.invoke(app, ["report", str(broken), "-o", str(tmp_path / "B.md"), "--no-plots"])
    assert "cannot read results file" in one_error_line(result, 2)


def test_rows_cut_short_are_skipped_with_one_warning(results, tmp_path):
    lines = results.read_text().splitlines()
    torn = tmp_path / "torn.jsonl"  # a run killed mid-row, then another appended after it
    torn.write_text(lines[1][:40] + "\n" + "\n".join(lines) + "\n" + lines[2][:25])
    result = runner.invoke(app, ["report", str(torn), "-o", str(tmp_path / "B.md"), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert result.stderr.strip().splitlines() == [f"warning: {torn}: skipped 2 row(s) cut short (line 1, {len(lines) + 2})"]
    assert (tmp_path / "B.md").read_text() == build_report(read_results(results), str(torn)).markdown


def test_mixed_devices_refused(results, tmp_path):
    lines = results.read_text().splitlines()
    other = dict(json.loads(lines[1]), device="NVIDIA A100-SXM4-80GB")
    mixed = write_results(tmp_path / "mixed.jsonl", [json.loads(line) for line in lines] + [other])
    result = runner.invoke(app, ["report", str(mixed), "-o", str(tmp_path / "B.md"), "--no-plots"])
    assert "mix devices" in one_error_line(result, 2)


def test_unwritable_output_is_one_line(results, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = runner.invoke(app, ["report", str(results), "-o", str(blocker / "B.md"), "--no-plots"])
    assert "cannot write the report" in one_error_line(result, 2)


def test_shipped_suites_read():
    from autokernel.tuning.shapes import read_shapes

    suites = {name: read_shapes(ROOT / "configs" / "shapes" / f"{name}.csv")
              for name in ("squares", "llm", "decode", "fused")}
    assert {p.m for p in suites["squares"]} == {1024, 2048, 4096, 8192}
    assert {(p.m, p.n, p.k) for p in suites["llm"]} == {(4096, 11008, 4096), (4096, 4096, 11008), (4096, 14336, 4096)}
    assert {p.m for p in suites["decode"]} == {1, 16, 64, 128} and {p.layout for p in suites["decode"]} == {"nt"}
    assert all(p.bias and p.activation in ("relu", "gelu_tanh", "gelu", "silu") for p in suites["fused"])
    for problems in suites.values():
        assert {p.dtype for p in problems} == {"float16", "bfloat16"}


def test_race_trials_gives_the_successful_implementations_one_reading(monkeypatch):
    """evaluate.race_trials (the suite's --race): every implementation measured with a GPU
    time gets its side-by-side reading; a failed race propagates and changes nothing."""
    from autokernel.config import KernelConfig
    from autokernel.evaluate import race_trials

    problem = Problem(64, 64, 64, "float16", "relu", bias=True)
    config = KernelConfig(block_m=32, block_n=32, block_k=32, num_warps=4)

    def measured():
        return [Trial(problem, config, "success", gpu_ms=1.0, ms=1.5),
                Trial(problem, None, "success", kernel="torch", gpu_ms=2.0, ms=2.5),
                Trial(problem, None, "runtime_error", kernel="cublaslt", error="x"),
                Trial(problem, None, "success", kernel="torch_compile", gpu_ms=3.0, ms=3.5)]

    asked = []
    monkeypatch.setattr("autokernel.evaluate.timing_label", lambda: "gpu")
    monkeypatch.setattr("autokernel.evaluate.race_call",
                        lambda p, kernel="triton", cfg=None, **_: asked.append((kernel, cfg)) or kernel)
    monkeypatch.setattr("autokernel.evaluate.race", lambda fns: [10.0 * (i + 1) for i in range(len(fns))])
    trials = measured()
    assert race_trials(problem, trials) is True
    assert asked == [("triton", config), ("torch", None), ("torch_compile", None)]
    assert [t.gpu_ms for t in trials] == [10.0, 20.0, None, 30.0]

    def broken(fns):
        raise RuntimeError("capture failed")

    monkeypatch.setattr("autokernel.evaluate.race", broken)
    trials = measured()
    with pytest.raises(RuntimeError, match="capture failed"):
        race_trials(problem, trials)
    assert [t.gpu_ms for t in trials] == [1.0, 2.0, None, 3.0]


def test_decode_ceiling_is_copy_bandwidth_over_cublas(results, tmp_path):
    """The most a decode kernel can reach against cuBLAS: each problem's fewest bytes at the
    measured copy bandwidth, over cuBLAS's time (GPU), geomean; M = 128 is no decode problem."""
    from autokernel.report import decode_ceiling

    res = group(read_results(results))
    cublas_gbs = [(m * 4096 + 4096 * 4096 + m * 4096) * 2 / (t * 1e-3) / 1e9 for m, t in ((1, 0.020), (16, 0.030))]
    value, count = decode_ceiling(res, COPY_GBS, "gpu")
    assert count == 2 and value == pytest.approx(math.sqrt(COPY_GBS / cublas_gbs[0] * COPY_GBS / cublas_gbs[1]))
    assert decode_ceiling(res, None, "gpu") is None
    out = tmp_path / "B.md"
    assert runner.invoke(app, ["report", str(results), "-o", str(out), "--no-plots"]).exit_code == 0
    line = next(ln for ln in out.read_text().splitlines() if ln.startswith("Decode ceiling"))
    assert f"{value:.3f}x cuBLAS" in line and f"{1.2 / value:.1%} of copy bandwidth" in line


def test_report_prints_to_stdout_unless_given_a_file(results, tmp_path, monkeypatch):
    """Run anywhere, report writes nothing into the current directory's docs/: the markdown
    goes to stdout; with -o the charts go to img/ beside the file."""
    here = tmp_path / "elsewhere"
    here.mkdir()
    monkeypatch.chdir(here)
    result = runner.invoke(app, ["report", str(results)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Benchmarks") and "problems in" in result.stderr
    assert list(here.iterdir()) == []
    out = tmp_path / "site" / "B.md"
    result = runner.invoke(app, ["report", str(results), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file() and list((tmp_path / "site" / "img").glob("*.png"))
    assert "](img/" in out.read_text() and list(here.iterdir()) == []

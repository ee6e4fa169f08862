"""benchmarks/first_use.py on the CPU: tiny shapes under the interpreter, the whole path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_first_use_benchmark_runs_the_path_on_tiny_shapes(tmp_path):
    out = tmp_path / "first_use.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "first_use.py"), "--smoke", "--n", "2",
                           "--out", str(out)], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["best_ms"] <= min(row["pick_ms"], row["first_use_ms"]) and row["torch_ms"] > 0
        assert row["first_call_s"] > 0 and row["raced_configs"] >= 1
    assert "first use / best" in proc.stdout and "torch / pick" in proc.stdout


def test_first_use_benchmark_needs_a_gpu_without_smoke(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "first_use.py"), "--out", os.devnull],
                          capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 2 and "GPU" in proc.stderr


def test_first_use_benchmark_races_a_tuned_config_from_an_export(tmp_path):
    from autokernel import best
    from autokernel.records import KernelConfig

    shapes = tmp_path / "shapes.csv"
    shapes.write_text("M,N,K,dtype,activation,bias,layout\n5,32,48,float16,relu,true,nt\n7,16,16,float16,none,false,nn\n")
    tuned = KernelConfig(block_m=16, block_n=16, block_k=16, num_warps=1, num_stages=1, variant="grouped")
    export = best.BestFile(schema_version=best.SCHEMA_VERSION, device="cpu", timing="interpreter", entries=[
        best.BestEntry(M=5, N=32, K=48, dtype="float16", activation="relu", bias=True, layout="nt", config=tuned)])
    (tmp_path / "best.json").write_text(export.to_json())
    out = tmp_path / "first_use.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "first_use.py"), "--smoke", "--shapes", str(shapes),
                           "--tuned", str(tmp_path / "best.json"), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["m"], r["tuned"]) for r in rows] == [(5, tuned.short()), (7, None)]
    assert 0 < rows[0]["best_ms"] <= rows[0]["tuned_ms"] and rows[1]["tuned_ms"] is None
    assert "1 with a tuned config: pick / tuned" in proc.stdout

"""export-best's output pinned byte for byte on a small history built here: how the
history is read and ranked may change, the file it exports may not."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from typer.testing import CliRunner

from autokernel.cli import app
from autokernel.config import KernelConfig
from autokernel.export import export_best
from autokernel.history import History, make_row
from autokernel.records import Problem

runner = CliRunner()

GPU = "NVIDIA H100 80GB HBM3"
A = KernelConfig(block_m=64, block_n=64, block_k=32, num_warps=4)
B = KernelConfig(block_m=128, block_n=64, block_k=32, num_warps=4, variant="grouped")
C = KernelConfig(block_m=128, block_n=128, block_k=64, variant="tma", flatten=True)


def _history(path: Path) -> History:
    env = dict(device=GPU, timing="gpu", torch_version="2.5.0", triton_version="3.1.0")
    p, q, r = Problem(512, 512, 512), Problem(1024, 256, 4096, "bf16", "relu", True), Problem(64, 64, 64, layout="tn")
    rows = [
        # p: three configs, a torch baseline, a failure; A re-timed in two runs (the later run's median counts)
        make_row("tune", p, A, status="success", run_id="r1", kernel="triton", ms=0.050, gpu_ms=0.045, tflops=5.9, **env),
        make_row("tune", p, B, status="success", run_id="r1", kernel="triton", ms=0.060, gpu_ms=0.048, tflops=4.4, **env),
        make_row("tune", p, C, status="compile_error", run_id="r1", kernel="triton", error="out of resources", **env),
        make_row("tune", p, A, status="success", run_id="r1", kernel="triton", ms=0.040, gpu_ms=0.030, note="re-timed",
                 **env),
        make_row("tune", p, A, status="success", run_id="r2", kernel="triton", ms=0.055, gpu_ms=0.052, note="re-timed",
                 **env),
        make_row("tune", p, A, status="success", run_id="r2", kernel="triton", ms=0.051, gpu_ms=0.049, note="re-timed",
                 **env),
        make_row("tune", p, A, status="runtime_error", run_id="r2", kernel="triton", error="x", note="re-timed", **env),
        make_row("tune", p, None, status="success", run_id="r1", kernel="torch", ms=0.070, **env),
        make_row("tune", p, None, status="success", run_id="r2", kernel="torch", ms=0.065, **env),
        # q: a winner without gpu_ms, a training row that never counts, a config that is no KernelConfig
        make_row("bench", q, B, status="success", run_id="r3", kernel="triton", ms=0.30, tflops=7.1,
                 **{**env, "torch_version": "2.6.0"}),
        make_row("bench", q, A, status="success", run_id="r3", kernel="triton_autograd", ms=0.01, **env),
        {**make_row("bench", q, None, status="success", run_id="r3", kernel="triton", ms=0.02, **env),
         "config": '{"block_m": 3}'},
        make_row("bench", q, None, status="success", run_id="r3", kernel="torch", ms=0.33, **env),
        # r: only interpreter rows on this device (skipped, with a warning), and a replayed row elsewhere
        make_row("tune", r, A, status="success", run_id="r4", kernel="triton", ms=2.0, **{**env, "timing": "interpreter"}),
        make_row("tune", r, A, status="success", run_id="r4", kernel="triton", ms=0.2, **{**env, "timing": "replay"}),
        make_row("tune", r, B, status="success", run_id="r4", kernel="triton", ms=0.5, gpu_ms=0.4, **env),
        # another GPU: never mixed in
        make_row("tune", p, C, status="success", run_id="r5", kernel="triton", ms=0.001, **{**env, "device": "NVIDIA H200"}),
    ]
    store = History(path)
    store.append_many(rows)
    return store


EXPECTED = """\
{
  "schema_version": 1,
  "generated": "-",
  "device": "NVIDIA H100 80GB HBM3",
  "timing": "gpu",
  "torch_version": "2.5.0, 2.6.0",
  "triton_version": "3.1.0",
  "entries": [
    {
      "M": 64,
      "N": 64,
      "K": 64,
      "dtype": "float16",
      "activation": "none",
      "bias": false,
      "layout": "tn",
      "config": {
        "block_m": 128,
        "block_n": 64,
        "block_k": 32,
        "group_m": 8,
        "num_warps": 4,
        "num_stages": 3,
        "variant": "grouped",
        "split_k": 1,
        "warp_specialize": false,
        "epilogue_subtile": 1,
        "flatten": false,
        "stream_k": false,
        "swap_ab": false
      },
      "ms": 0.5,
      "gpu_ms": 0.4,
      "tflops": null,
      "torch_ms": null,
      "speedup_vs_cublas": null,
      "trials": 1
    },
    {
      "M": 512,
      "N": 512,
      "K": 512,
      "dtype": "float16",
      "activation": "none",
      "bias": false,
      "layout": "nn",
      "config": {
        "block_m": 128,
        "block_n": 64,
        "block_k": 32,
        "group_m": 8,
        "num_warps": 4,
        "num_stages": 3,
        "variant": "grouped",
        "split_k": 1,
        "warp_specialize": false,
        "epilogue_subtile": 1,
        "flatten": false,
        "stream_k": false,
        "swap_ab": false
      },
      "ms": 0.06,
      "gpu_ms": 0.048,
      "tflops": 4.4,
      "torch_ms": 0.065,
      "speedup_vs_cublas": 1.0833333333333335,
      "trials": 7
    },
    {
      "M": 1024,
      "N": 256,
      "K": 4096,
      "dtype": "bfloat16",
      "activation": "relu",
      "bias": true,
      "layout": "nn",
      "config": {
        "block_m": 128,
        "block_n": 64,
        "block_k": 32,
        "group_m": 8,
        "num_warps": 4,
        "num_stages": 3,
        "variant": "grouped",
        "split_k": 1,
        "warp_specialize": false,
        "epilogue_subtile": 1,
        "flatten": false,
        "stream_k": false,
        "swap_ab": false
      },
      "ms": 0.3,
      "gpu_ms": null,
      "tflops": 7.1,
      "torch_ms": 0.33,
      "speedup_vs_cublas": 1.1,
      "trials": 2
    }
  ]
}
"""
WARNINGS = [
    'skipped 2 successful row(s) of NVIDIA H100 80GB HBM3 timed as interpreter, replay: only gpu timings are exported for it',
    'skipped 1 successful row(s) whose config is not a valid KernelConfig',
]




def _masked(text: str) -> str:
    return re.sub(r'"generated": "[^"]*"', '"generated": "-"', text)


def test_export_best_is_pinned(tmp_path):
    store = _history(tmp_path / "h.csv")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = _masked(export_best(store.trials(), device="h100").to_json())
    assert text == EXPECTED
    assert [str(w.message) for w in caught] == WARNINGS


def test_export_best_cli_is_pinned(tmp_path):
    _history(tmp_path / "h.csv")
    result = runner.invoke(app, ["export-best", "--history", str(tmp_path / "h.csv"), "--device", "h100"])
    assert result.exit_code == 0, result.output
    assert _masked(result.stdout) == EXPECTED
    assert result.stderr.splitlines() == [f"warning: {w}" for w in WARNINGS]

"""The records layer: plain data (Problem, KernelConfig) that imports neither torch nor Triton."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autokernel.records import ACTIVATIONS, DTYPE_SIZES, Problem, normalize_activation, parse_dtype

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_records_loads_neither_torch_nor_triton():
    code = ("import sys, autokernel.records as r; p = r.Problem(3, 4, 5, 'bf16', 'GELU', True, 'nt'); "
            "c = r.KernelConfig.from_json('{\"block_m\": 64, \"split_k\": 2}'); "
            "t = r.Trial(p, c, 'success', ms=1.0, timing='gpu'); assert t.ok and t.rank_ms == 1.0; "
            "print(p.label(), p.bytes, p.flops, c.short()); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'triton', 'pandas'}))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    label, loaded = proc.stdout.splitlines()
    assert label == f"3x4x5 bfloat16 nt bias gelu {(3 * 5 + 5 * 4 + 3 * 4 + 4) * 2} {2 * 3 * 4 * 5} 64x128x64 g8 w8 s3 k2"
    assert loaded == "[]"


def test_names_parse_once_for_every_layer():
    assert parse_dtype("BF16") == "bfloat16" and parse_dtype("torch.float16") == "float16"
    assert set(DTYPE_SIZES) == {"float16", "bfloat16", "float32"}
    assert normalize_activation(None) == "none" and normalize_activation("Leaky-ReLU") == "leaky_relu"
    with pytest.raises(ValueError, match="activation must be one of"):
        normalize_activation("tanh")
    assert "gelu_tanh" in ACTIVATIONS
    import torch

    assert Problem(8, 8, 8, "fp32").torch_dtype is torch.float32
    assert Problem(8, 8, 8, "fp16").bytes == 3 * 64 * torch.float16.itemsize


def test_the_import_contracts_hold():
    pytest.importorskip("importlinter")
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "5 kept, 0 broken" in proc.stdout, proc.stdout[-2000:]
    assert "the layers, from the CLI down to the records KEPT" in proc.stdout

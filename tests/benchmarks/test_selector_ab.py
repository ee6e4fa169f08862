"""benchmarks/selector_ab.py on the CPU: which problems' picks two selector files make apart,
and the summary of their race (the race itself stubbed)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from autokernel import best, runtime

AB = Path(__file__).resolve().parents[2] / "benchmarks" / "selector_ab.py"


def test_only_the_problems_whose_pick_changes_are_raced(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(AB.parent))  # selector_ab imports select_sweep beside it
    spec = importlib.util.spec_from_file_location("selector_ab_under_test", AB)
    ab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab)
    # The model before the share of an SM: the shipped one's constants without it.
    data = json.loads((best.SHIPPED_DIR / "selector" / "nvidia-h100-80gb-hbm3.json").read_text())
    data["constants"] = {k: v[:6] for k, v in data["constants"].items()}
    data["errors"] = {}
    before = tmp_path / "before.json"
    before.write_text(json.dumps(data))
    shapes = tmp_path / "shapes.csv"
    # 2x5120x3328: the shipped model splits K where the one before did not; 4096^3: alike.
    shapes.write_text("M,N,K,dtype,activation,bias,layout\n2,5120,3328,float16,none,false,nt\n"
                      "4096,4096,4096,float16,none,false,nt\n")
    monkeypatch.setattr(runtime, "device_name", lambda device=None: "NVIDIA H200")
    monkeypatch.setattr(runtime, "shared_memory_limit", lambda: 232448)
    monkeypatch.setattr(ab.api, "tma_runs_for", lambda *a: True)
    monkeypatch.delenv(best.CONFIG_ENV, raising=False)
    monkeypatch.delenv(best.SELECTOR_ENV, raising=False)
    best.clear_cache()
    raced = []

    def fake_race(p, configs):
        raced.append((p.m, [c.short() for c in configs]))
        return [{"config": c.short(), "status": "success", "gpu_ms": t} for c, t in zip(configs, (0.012, 0.010))], 0.011

    monkeypatch.setattr(ab, "race_configs", fake_race)
    monkeypatch.setattr(ab.torch.cuda, "synchronize", lambda: None)
    out = tmp_path / "ab.jsonl"
    monkeypatch.setattr(sys, "argv", ["selector_ab.py", "--before", str(before), "--shapes", str(shapes), "--out", str(out)])
    try:
        assert ab.main() == 0
    finally:
        best.clear_cache()
    assert [m for m, _ in raced] == [2] and raced[0][1][1].endswith("k4")
    line = json.loads(out.read_text())
    assert line["m"] == 2 and line["shipped"]["gpu_ms"] == 0.010 and line["torch_ms"] == 0.011
    text = capsys.readouterr().out
    assert "1 problems whose pick changes (decode 1)" in text and "geomean 1.200" in text

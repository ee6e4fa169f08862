"""The 64x256 TMA tile at 8 warps (two warpgroups of 64x128 each) against the candidate at 4
warps, with the 128x128 and 128x256 tiles beside them; each config checked against a float32
reference and raced beside torch (``race_configs``, GPU time). docs/kernel-notes.md, "The 64x256
tile on two warpgroups":

    python3 docs/runs/kernels/wide64/probe.py docs/runs/kernels/wide64/shapes_seed86021.csv OUT.jsonl 330

(shapes: ``random_shapes.py --n 400 --seed 86021``, rows 65-4096, the first 60.)"""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "benchmarks"))
from select_sweep import race_configs  # noqa: E402

from autokernel import api  # noqa: E402
from autokernel.config import KernelConfig  # noqa: E402
from autokernel.tuning.shapes import read_shapes  # noqa: E402


def tma(bm, bn, bk, warps, stages):
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=warps, num_stages=stages,
                        variant="tma", flatten=True)


CONFIGS = [tma(64, 256, 64, 4, 4), tma(64, 256, 64, 8, 4), tma(64, 256, 64, 8, 3), tma(64, 128, 64, 8, 5),
           tma(128, 128, 64, 4, 5), tma(128, 256, 64, 8, 3)]


def main(shapes: str, out_path: str, budget: float) -> None:
    start = time.monotonic()
    with open(out_path, "w") as out:
        for p in read_shapes(shapes):
            if time.monotonic() - start > budget:
                print("time budget spent")
                break
            if not (65 <= p.m <= 4096) or not api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout):
                continue
            rows, torch_ms = race_configs(p, CONFIGS, seed=5000)
            out.write(json.dumps({**p.to_dict(), "rows": rows, "torch_ms": torch_ms}) + "\n")
            out.flush()
            times = " ".join(f"{r['gpu_ms'] * 1e3:.1f}" if r.get("gpu_ms") else r["status"] for r in rows)
            print(f"{p.m}x{p.n}x{p.k} {p.dtype}: {times} torch {torch_ms * 1e3:.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))

"""Narrow outputs (N below ``config.NARROW_N``): the default config and ``matmul``'s pick with
the narrow tiles (``_NARROW_TILES``) against both without them (``NARROW_N`` = 0: the rule
before), side by side with cuBLAS (GPU time, CUDA graphs, cycling over enough operand copies to
leave L2; bf16, nt, each output checked against a float32 reference). docs/kernel-notes.md,
"Rows past M and columns past N, masked".

    source benchmarks/device_env.sh
    python3 docs/runs/kernels/narrow_default_probe.py OUT.jsonl
"""
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from select_sweep import _call  # noqa: E402

from autokernel import best, config, matmul, select  # noqa: E402
from autokernel.timing import race  # noqa: E402

PROBLEMS = [(m, n, 4096) for m in (4096, 8192, 16384, 32768) for n in (1, 3, 8, 16, 24, 40, 56)]
PROBLEMS += [(16384, n, k) for n in (2, 12) for k in (2048, 8192)]


def configs(m, n, k, narrow):
    """(default, pick) with the narrow rule on or off."""
    config.NARROW_N = 64 if narrow else 0
    config._default_config.cache_clear()
    best.clear_cache()
    found = best.pick(m, n, k, torch.bfloat16, "none", False, "nt", device=torch.cuda.get_device_name())
    default = config.default_config(m, n, k, torch.bfloat16, tma=select.tma_aligned(m, n, k, torch.bfloat16, "nt"))
    return default, found.config


def main(out_path: str) -> None:
    out = open(out_path, "w")
    ratios = []
    for m, n, k in PROBLEMS:
        sets = max(2, min(8, math.ceil(300e6 / ((m * k + n * k) * 2))))
        ins = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), torch.randn(n, k, device="cuda", dtype=torch.bfloat16),
                torch.empty(m, n, device="cuda", dtype=torch.bfloat16)) for _ in range(sets)]
        ref = ins[0][0].float() @ ins[0][1].float().t()
        runs = dict(zip(("old default", "old pick"), configs(m, n, k, False)))
        runs.update(zip(("new default", "new pick"), configs(m, n, k, True)))
        fns, labels, row = [], [], dict(m=m, n=n, k=k)
        for label, cfg in runs.items():
            y = matmul(ins[0][0], ins[0][1].t(), config=cfg)
            torch.cuda.synchronize()
            err = float((y.float() - ref).norm() / ref.norm())
            row[label] = cfg.short()
            row[label + " ok"] = err < 2e-2
            fns.append(_call(ins, lambda a, w, c, cfg=cfg: matmul(a, w.t(), config=cfg, out=c)))
            labels.append(label)
        fns.append(_call(ins, lambda a, w, c: torch.mm(a, w.t(), out=c)))
        labels.append("cublas")
        ms = race(fns, rounds=10, segment_ms=1.0)
        row.update({f"{label} us": round(t * 1e3, 3) for label, t in zip(labels, ms)})
        print(json.dumps(row), file=out, flush=True)
        t = dict(zip(labels, ms))
        ratios.append((t["old default"] / t["new default"], t["old pick"] / t["new pick"],
                       t["cublas"] / t["old pick"], t["cublas"] / t["new pick"]))
        print(f"{m}x{n}x{k}: " + " ".join(f"{l}={x * 1e3:.1f}" for l, x in t.items())
              + f" | {runs['old pick'].short()} -> {runs['new pick'].short()}", flush=True)
    g = [math.exp(sum(math.log(r[i]) for r in ratios) / len(ratios)) for i in range(4)]
    print(f"{len(ratios)} problems: old / new default {g[0]:.3f}, old / new pick {g[1]:.3f}, "
          f"cuBLAS / pick {g[2]:.3f} -> {g[3]:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])

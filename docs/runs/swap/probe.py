"""Swap-AB probe: C^T = W @ X^T on the TMA kernel (the few rows of X on the MMA's narrow N side)
against the shipped pick and cuBLAS, GPU time side by side (select_sweep.race_checked).
    python3 docs/runs/swap/probe.py docs/runs/swap/probe_seed95883.csv OUT.jsonl 480"""
import json, sys, time
import torch
sys.path.insert(0, "benchmarks")
from select_sweep import input_sets, race_checked
from autokernel import api, matmul
from autokernel.config import KernelConfig, shared_memory_bytes
from autokernel.tuning.shapes import read_shapes

SWAP = [dict(block_m=bm, block_n=bn, block_k=bk, num_stages=s, flatten=fl, stream_k=sk, num_warps=w)
        for bm, bn, bk, s, fl, sk, w in [
            (128, 16, 128, 5, True, False, 4), (128, 32, 128, 5, True, False, 4), (128, 32, 64, 6, True, False, 4),
            (128, 64, 128, 4, True, False, 4), (128, 64, 64, 5, True, False, 4), (64, 32, 128, 6, True, False, 4),
            (64, 64, 128, 6, True, False, 4), (128, 128, 64, 4, True, False, 4), (128, 32, 128, 5, True, True, 4),
            (128, 64, 128, 4, True, True, 4), (64, 32, 128, 6, True, True, 4), (256, 32, 64, 4, False, False, 8)]]

shapes, out_path, budget = read_shapes(sys.argv[1]), sys.argv[2], float(sys.argv[3])
t0 = time.time()
limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
with open(out_path, "w") as out:
    for p in shapes:
        if time.time() - t0 > budget:
            break
        dev = torch.device("cuda")
        sets = input_sets(p, 1000)
        a0, b0, _, o0 = sets[0]
        pick = api.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, dev,
                                  tma=api.tma_runs(a0, b0, o0), layout=p.layout)
        mpad = -(-p.m // 8) * 8
        ct = torch.empty(p.n, mpad, dtype=p.torch_dtype, device=dev)[:, :p.m]
        runs = [({"config": "pick " + pick.short()}, lambda a, b, bias, out=None: matmul(a, b, config=pick, out=out))]
        for d in SWAP:
            c = KernelConfig(variant="tma", group_m=8, **d)
            if shared_memory_bytes(c, p.torch_dtype) > limit:
                continue
            runs.append(({"config": "swap " + c.short()},
                         lambda a, b, bias, out=None, c=c: matmul(b.t(), a.t(), config=c, out=ct).t()))
        rows = [r for r, _ in runs]
        ms = race_checked(p, runs, sets)
        for r in rows:
            out.write(json.dumps({**p.to_dict(), **r, "cublas_ms": ms}) + "\n")
        out.flush()
        good = [r for r in rows[1:] if r.get("gpu_ms")]
        bs = min(good, key=lambda r: r["gpu_ms"]) if good else None
        print(f"{p.m}x{p.n}x{p.k} {p.dtype[:2]}: cublas {ms*1e3:.1f}us pick {rows[0].get('gpu_ms', 0)*1e3:.1f} "
              f"({rows[0]['config']}) best swap {bs['gpu_ms']*1e3 if bs else 0:.1f} ({bs['config'] if bs else '-'})"
              f" bad {[r['config'] for r in rows if r['status'] != 'success']}", flush=True)

"""The kernels of the previous main (3f104b7, as .old/autokernel_old) against today's, side by
side: explicit configs of every kernel (pointer one-pass, split-K, stream-K, TMA with its
options), with bias + activation, storing Z, fp16/bf16/fp32; checked against float32 and
raced (GPU time). As run from commit 18abd1b, with .old/autokernel_old made by: git archive 3f104b7 autokernel | tar -x -C .old, the folder renamed and its imports rewritten to autokernel_old.
Usage: PYTHONPATH=.old:$PYTHONPATH python3 docs/runs/mid/ab_old_new_probe.py OUT.jsonl"""
import json, math, sys
import torch
import autokernel_old
from autokernel_old import api as api_old
from autokernel_old.config import KernelConfig as OldConfig
import autokernel
from autokernel import api as api_new
from autokernel.config import KernelConfig
from autokernel.timing import race

out = open(sys.argv[1], "w")
cases = [  # (m, n, k, dtype, act, bias, z, config fields)
    (4096, 4096, 4096, "float16", "none", False, False, dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, variant="tma", flatten=True)),
    (4096, 4096, 4096, "bfloat16", "gelu_tanh", True, False, dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=4, variant="tma", epilogue_subtile=2)),
    (2048, 2816, 1024, "float16", "silu", True, True, dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, variant="tma")),
    (2048, 2048, 2048, "bfloat16", "relu", True, False, dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=3, variant="tma", warp_specialize=True)),
    (1024, 4096, 4096, "float16", "none", False, False, dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4, variant="grouped")),
    (2048, 2048, 2048, "bfloat16", "gelu", True, True, dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4, variant="grouped")),
    (777, 1000, 1000, "float16", "leaky_relu", True, False, dict(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4, variant="grouped")),
    (16, 4096, 4096, "float16", "none", False, False, dict(block_m=16, block_n=64, block_k=128, num_warps=4, num_stages=4, variant="grouped")),
    (32, 11008, 4096, "bfloat16", "silu", True, False, dict(block_m=32, block_n=64, block_k=128, num_warps=4, num_stages=4, variant="grouped", split_k=4)),
    (2048, 2816, 1024, "float16", "none", False, False, dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4, variant="grouped", stream_k=True)),
    (1536, 1536, 1536, "float32", "relu", True, False, dict(block_m=128, block_n=128, block_k=32, num_warps=8, num_stages=3, variant="grouped")),
]
for (m, n, k, dt, act, has_bias, store_z, fields) in cases:
    dtype = getattr(torch, dt)
    torch.manual_seed(m + n + k)
    sets = max(2, min(16, math.ceil(150e6 / ((m * k + n * k + m * n) * dtype.itemsize))))
    ins = []
    for _ in range(sets):
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        w = torch.randn(n, k, device="cuda", dtype=dtype)
        bias = torch.randn(n, device="cuda", dtype=dtype) if has_bias else None
        ins.append((a, w.t(), bias, torch.empty(m, n, device="cuda", dtype=dtype), torch.empty(m, n, device="cuda", dtype=dtype) if store_z else None))
    a0, b0, bias0, c0, z0 = ins[0]
    ref = a0.float() @ b0.float() + (bias0.float() if has_bias else 0)
    f = {"none": lambda x: x, "relu": torch.relu, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
         "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.01),
         "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}[act]
    row = dict(m=m, n=n, k=k, dtype=dt, activation=act, bias=has_bias, store_z=store_z, config=fields)
    fns = []
    for name, api, Cfg in (("old", api_old, OldConfig), ("new", api_new, KernelConfig)):
        cfg = Cfg(**fields)
        api.launch(a0, b0, c0, bias0, act, 0.01, cfg, z=z0)
        torch.cuda.synchronize()
        row[f"{name}_err"] = float((c0.float() - f(ref)).norm() / f(ref).norm())
        if store_z:
            row[f"{name}_z_err"] = float((z0.float() - ref).norm() / ref.norm())
        it = [0]
        def fn(api=api, cfg=cfg, it=it):
            s = ins[it[0] % sets]; it[0] += 1
            api.launch(s[0], s[1], s[3], s[2], act, 0.01, cfg, z=s[4])
        fns.append(fn)
    it = [0]
    def torch_fn(it=it):
        s = ins[it[0] % sets]; it[0] += 1
        y = torch.addmm(s[2], s[0], s[1]) if has_bias else torch.mm(s[0], s[1])
        f(y)
    fns.append(torch_fn)
    ms = race(fns, rounds=20, segment_ms=1.0)
    row.update(old_ms=ms[0], new_ms=ms[1], torch_ms=ms[2])
    print(json.dumps(row), file=out, flush=True)
    print(f"{m}x{n}x{k} {dt} {act} bias={has_bias} z={store_z} {fields.get('variant')}: old {ms[0]*1e3:.1f}us new {ms[1]*1e3:.1f}us "
          f"new/old {ms[0]/ms[1]:.3f} err old {row['old_err']:.1e} new {row['new_err']:.1e}", flush=True)

"""Stream-K twins of every TMA candidate, raced against the pick and cuBLAS, on M >= 257
problems of a shapes file, including problems with fewer tiles than SMs (the tail is then
every tile: split-K on TMA in aligned chunks). GPU time, timing.race.
    python3 docs/runs/streamk/twins_probe.py SHAPES.csv OUT.jsonl [BUDGET_S [MIN_M]]   (MIN_M: 257)
The committed record (twins_h100.jsonl) drops each row's config JSON (its label names it)
and rounds the times to four digits.
"""
import json, sys, time
import torch
sys.path.insert(0, "benchmarks")
from select_sweep import as_record, race_checked, shapes_within
from autokernel import api, matmul, runtime
from autokernel.candidates import CANDIDATES
from autokernel.config import shared_memory_bytes
from autokernel.kernels.matmul_tma import sk_programs
from autokernel.timing import GRAPH_INPUT_SETS, make_input_sets

shapes, out_path = sys.argv[1], sys.argv[2]
budget = float(sys.argv[3]) if len(sys.argv) > 3 else 400
MIN_M = int(sys.argv[4]) if len(sys.argv) > 4 else 257
t0 = time.time()
P = runtime.sm_count()
limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
dev = torch.device("cuda")
dps = []
for c in CANDIDATES:
    if c.variant == "tma" and not c.warp_specialize and not c.stream_k:
        dps.append(c)
with open(out_path, "w") as f:
    for p in shapes_within(shapes, budget, t0):
        if p.m < MIN_M:
            continue
        tma = api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout)
        if not tma:
            continue
        pick = api.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, dev, tma=tma,
                                  layout=p.layout)
        configs = [("pick", pick)]
        info = {}
        for c in dps:
            if shared_memory_bytes(c, p.torch_dtype) > limit or c.block_m > 2 * p.m:
                continue
            tiles = -(-p.m // c.block_m) * -(-p.n // c.block_n)
            ks = -(-p.k // c.block_k)
            sk = sk_programs(tiles, P, ks)
            tail = tiles % P
            if sk <= tail:
                continue
            twin = c.model_copy(update={"stream_k": True})
            info[twin.short()] = {"tiles": tiles, "tail": tail, "chunks": sk // tail, "ksteps": ks}
            configs.append(("dp", c))
            configs.append(("sk", twin))
        if len(configs) == 1:
            continue
        seen, uniq = set(), []
        for role, c in configs:
            if c in seen:
                continue
            seen.add(c)
            uniq.append((role, c))

        def make(i, p=p):
            a, b, bias = p.make_inputs(dev, seed=3000 + i)
            return a, b, bias, torch.empty(p.m, p.n, dtype=p.torch_dtype, device=dev)

        sets = make_input_sets(make, p.bytes, GRAPH_INPUT_SETS)
        rows = [{**p.to_dict(), "role": role, "label": c.short(), "config": json.loads(c.to_json()),
                 **info.get(c.short(), {})} for role, c in uniq]
        torch_ms = race_checked(p, [(row, lambda a, b, bias, out=None, c=c: matmul(a, b, bias, p.activation, config=c,
                                                                                    out=out))
                                    for row, (_, c) in zip(rows, uniq)], sets)
        cub = torch_ms * 1e3
        for row in as_record(rows, torch_ms):
            f.write(json.dumps(row) + "\n")
        f.flush()
        best_sk = min((r["gpu_us"] for r in rows if r["role"] == "sk" and r["ok"]), default=float("nan"))
        pk = rows[0]["gpu_us"]
        print(f"{p.m}x{p.n}x{p.k} {p.dtype} {p.activation}: pick {pk:.1f} best-sk {best_sk:.1f} cublas {cub:.1f} "
              f"({pk / best_sk:.3f}x)", flush=True)
print("done", time.time() - t0)

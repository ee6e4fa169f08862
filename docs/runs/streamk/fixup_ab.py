"""The stream-K twins of the TMA candidates, this checkout against an older copy of the package
(`autokernel_before`, made as docs/launch.md says), side by side with their data-parallel tile
and cuBLAS, on the problems of a shapes file with M >= MIN_M whose twin cuts its tail. GPU
time, timing.race; each output checked against a float32 reference.
    PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/streamk/fixup_ab.py SHAPES.csv OUT.jsonl [BUDGET_S [MIN_M]]
"""
import json, sys, time
import torch
sys.path.insert(0, "benchmarks")
from select_sweep import as_record, input_sets, race_checked, shapes_within
import autokernel_before as akb
from autokernel import api, matmul, runtime
from autokernel.candidates import CANDIDATES
from autokernel.config import shared_memory_bytes
from autokernel.kernels.matmul_tma import sk_programs

shapes, out_path = sys.argv[1], sys.argv[2]
budget = float(sys.argv[3]) if len(sys.argv) > 3 else 400
MIN_M = int(sys.argv[4]) if len(sys.argv) > 4 else 65
t0 = time.time()
P = runtime.sm_count()
limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
dev = torch.device("cuda")
dps = [c for c in CANDIDATES if c.variant == "tma" and not c.warp_specialize and not c.stream_k]
with open(out_path, "w") as f:
    for p in shapes_within(shapes, budget, t0):
        if p.m < MIN_M or not api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout):
            continue
        pick = api.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, dev, tma=True,
                                  layout=p.layout)
        runs = []  # (row, module)
        for c in dps:
            if shared_memory_bytes(c, p.torch_dtype) > limit or c.block_m > 2 * p.m:
                continue
            tiles = -(-p.m // c.block_m) * -(-p.n // c.block_n)
            sk = sk_programs(tiles, P, -(-p.k // c.block_k))
            if sk <= tiles % P:
                continue
            twin = c.model_copy(update={"stream_k": True})
            info = {"tiles": tiles, "tail": tiles % P, "chunks": sk // (tiles % P), "ksteps": -(-p.k // c.block_k),
                    "picked": twin == pick}
            runs.append(({"role": "dp", "label": c.short()}, c, matmul))
            for role, mod in (("sk", matmul), ("sk_before", akb.matmul)):
                runs.append(({"role": role, "label": twin.short(), **info}, twin, mod))
        if not runs:
            continue

        sets = input_sets(p, 3000)
        rows = [{**p.to_dict(), **extra} for extra, _, _ in runs]
        calls = [(row, lambda a, b, bias, out=None, fn=fn, cc=(c if fn is matmul else akb.KernelConfig(**c.model_dump())):
                  fn(a, b, bias, p.activation, config=cc, out=out)) for row, (_, c, fn) in zip(rows, runs)]
        torch_ms = race_checked(p, calls, sets)
        for row in as_record(rows, torch_ms):
            f.write(json.dumps(row) + "\n")
        f.flush()
        pairs = [(r["gpu_us"], s["gpu_us"]) for r, s in zip(rows, rows[1:]) if r["role"] == "sk" and s["role"] == "sk_before"]
        print(f"{p.m}x{p.n}x{p.k} {p.dtype} {p.activation}: twins after/before "
              + " ".join(f"{a:.1f}/{b:.1f}" for a, b in pairs) + f"  cublas {torch_ms*1e3:.1f}"
              + ("" if all(r["ok"] for r in rows) else "  CHECK FAILED"), flush=True)
print("done", time.time() - t0)

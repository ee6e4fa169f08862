"""The TMA kernel with its last row and column of tiles ending at M and N (this checkout)
against the code before (`autokernel_before`, made as docs/launch.md says): every TMA
candidate on the problems of a shapes file whose M or N is not a multiple of the tile,
each output compared bit for bit with the code before's and checked against a float32
reference, then both raced side by side with cuBLAS (GPU time, timing.race).
    PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/shifted_edge_ab.py SHAPES.csv OUT.jsonl [BUDGET_S] [streamk]

With "streamk", only the stream-K configs whose tail is cut (``tail_cut``) on problems whose
last row or column of tiles is partial: the tail's chunks and fix-up.
"""
import json, sys, time
import torch
sys.path.insert(0, "benchmarks")
from select_sweep import as_record, input_sets, race_checked, shapes_within
import autokernel_before as akb
from autokernel import api, matmul
from autokernel.candidates import CANDIDATES
from autokernel.config import shared_memory_bytes
from autokernel.kernels.matmul_tma import tail_cut

shapes, out_path = sys.argv[1], sys.argv[2]
budget = float(sys.argv[3]) if len(sys.argv) > 3 else 120
streamk_only = len(sys.argv) > 4 and sys.argv[4] == "streamk"
t0 = time.time()
limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
tma_configs = [c for c in CANDIDATES if c.variant == "tma" and not c.warp_specialize]
same = differ = 0
with open(out_path, "w") as f:
    for p in shapes_within(shapes, budget, t0):
        if p.m < 129 or not api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout):
            continue
        configs = [c for c in tma_configs if shared_memory_bytes(c, p.torch_dtype) <= limit
                   and (p.m % c.block_m or p.n % c.block_n) and c.block_m <= p.m and c.block_n <= p.n]
        if streamk_only:
            programs = torch.cuda.get_device_properties(0).multi_processor_count

            def cut(c):
                tiles = -(-p.m // c.block_m) * -(-p.n // c.block_n)
                return tail_cut(tiles, programs, -(-p.k // c.block_k))[0] != tiles % programs

            configs = [c for c in configs if c.stream_k and cut(c)]
        if not configs:
            continue
        sets = input_sets(p, 11000)
        a, b, bias, _ = sets[0]
        rows, calls = [], []
        for c in configs:
            new = matmul(a, b, bias, p.activation, config=c)
            old = akb.matmul(a, b, bias, p.activation, config=akb.KernelConfig(**c.model_dump()))
            torch.cuda.synchronize()
            equal = bool(torch.equal(new, old))
            same, differ = same + equal, differ + (not equal)
            for who, fn, cc in (("after", matmul, c), ("before", akb.matmul, akb.KernelConfig(**c.model_dump()))):
                row = {**p.to_dict(), "label": c.short(), "code": who, "bitwise_equal": equal}
                rows.append(row)
                calls.append((row, lambda a, b, bias, out=None, fn=fn, cc=cc: fn(a, b, bias, p.activation, config=cc, out=out)))
        torch_ms = race_checked(p, calls, sets)
        for r in as_record(rows, torch_ms):
            f.write(json.dumps(r) + "\n")
        f.flush()
        ratios = [round(o["gpu_us"] / n["gpu_us"], 3) for n, o in zip(rows[::2], rows[1::2]) if n.get("gpu_us") and o.get("gpu_us")]
        print(f"{p.m}x{p.n}x{p.k} {p.dtype} {p.layout} {p.activation}: before/after {ratios}", flush=True)
print(f"bitwise equal {same}, different {differ}; {time.time() - t0:.0f} s")

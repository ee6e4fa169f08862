"""The pointer split-K candidates, this checkout against an older copy of the package
(`autokernel_before`, made as docs/launch.md says), side by side with cuBLAS, on the problems
of a shapes file where the selector considers them (``select.why_not``). GPU time,
timing.race; each output checked against a float32 reference.
    PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/splitk_reduce_ab.py SHAPES.csv OUT.jsonl [BUDGET_S]
"""
import json, sys, time
import torch
sys.path.insert(0, "benchmarks")
from select_sweep import as_record, race_checked, shapes_within
import autokernel_before as akb
from autokernel import api, matmul, runtime, select
from autokernel.candidates import CANDIDATES
from autokernel.timing import GRAPH_INPUT_SETS, make_input_sets

shapes, out_path = sys.argv[1], sys.argv[2]
budget = float(sys.argv[3]) if len(sys.argv) > 3 else 300
t0 = time.time()
P = runtime.sm_count()
dev = torch.device("cuda")
splits = [c for c in CANDIDATES if c.split_k > 1]
with open(out_path, "w") as f:
    for p in shapes_within(shapes, budget, t0):
        tma = api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout)
        configs = [c for c in splits if select.why_not(c, p.m, p.n, p.k, tma, P) is None]
        if not configs:
            continue
        pick = api.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, dev, tma=tma,
                                  layout=p.layout)

        def make(i, p=p):
            a, b, bias = p.make_inputs(dev, seed=4000 + i)
            return a, b, bias, torch.empty(p.m, p.n, dtype=p.torch_dtype, device=dev)

        sets = make_input_sets(make, p.bytes, GRAPH_INPUT_SETS)
        rows, calls = [], []
        for c in configs:
            for role, fn, cc in (("after", matmul, c), ("before", akb.matmul, akb.KernelConfig(**c.model_dump()))):
                rows.append({**p.to_dict(), "role": role, "label": c.short(), "picked": c == pick})
                calls.append((rows[-1], lambda a, b, bias, out=None, fn=fn, cc=cc: fn(a, b, bias, p.activation, config=cc, out=out)))
        torch_ms = race_checked(p, calls, sets)
        for row in as_record(rows, torch_ms):
            f.write(json.dumps(row) + "\n")
        f.flush()
        print(f"{p.m}x{p.n}x{p.k} {p.dtype} {p.activation}: after/before "
              + " ".join(f"{rows[i]['label'].split()[-1]}{'*' if rows[i]['picked'] else ''} {rows[i]['gpu_us']:.1f}/{rows[i+1]['gpu_us']:.1f}"
                         for i in range(0, len(rows), 2)) + f"  cublas {torch_ms*1e3:.1f}"
              + ("" if all(r["ok"] for r in rows) else "  CHECK FAILED"), flush=True)
print("done", time.time() - t0)

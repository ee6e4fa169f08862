"""The pointer split-K candidates, this checkout against an older copy of the package
(`autokernel_before`, made as docs/launch.md says), side by side with cuBLAS, on the problems
of a shapes file where the selector considers them (``select.why_not``). GPU time,
timing.race; each output checked against a float32 reference.
    PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/splitk_reduce_ab.py SHAPES.csv OUT.jsonl [BUDGET_S]
"""
import json, sys, time
import torch
sys.path.insert(0, "benchmarks")
from select_sweep import _call
import autokernel_before as akb
from autokernel import api, matmul, runtime, select
from autokernel.candidates import CANDIDATES
from autokernel.evaluate import reference, torch_function
from autokernel.timing import GRAPH_INPUT_SETS, make_input_sets, race
from autokernel.tuning.shapes import read_shapes

shapes, out_path = sys.argv[1], sys.argv[2]
budget = float(sys.argv[3]) if len(sys.argv) > 3 else 300
t0 = time.time()
P = runtime.sm_count()
dev = torch.device("cuda")
splits = [c for c in CANDIDATES if c.split_k > 1]
with open(out_path, "w") as f:
    for p in read_shapes(shapes):
        if time.time() - t0 > budget:
            print("budget spent", flush=True)
            break
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
        a0, b0, bias0, _ = sets[0]
        ref = reference(a0, b0, bias0, p.activation)
        fns, rows = [], []
        for c in configs:
            for role, fn, cc in (("after", matmul, c), ("before", akb.matmul, akb.KernelConfig(**c.model_dump()))):
                row = {**p.to_dict(), "role": role, "label": c.short(), "picked": c == pick}
                o = fn(a0, b0, bias0, p.activation, config=cc)
                torch.cuda.synchronize()
                row["rel_error"] = round(float((o.float() - ref).norm() / ref.norm().clamp_min(1e-30)), 7)
                row["ok"] = row["rel_error"] < 2e-2
                rows.append(row)
                fns.append(_call(sets, lambda a, b, bias, out, cc=cc, fn=fn: fn(a, b, bias, p.activation, config=cc, out=out)))
        if p.activation == "none" and not p.bias:
            fns.append(_call(sets, lambda a, b, bias, out: torch.mm(a, b, out=out)))
        else:
            eager = torch_function(p)
            fns.append(_call(sets, lambda a, b, bias, out: eager(a, b, bias)))
        ms = race(fns, rounds=10, segment_ms=1.0)
        for row, t in zip(rows, ms):
            row["gpu_us"] = round(t * 1e3, 4)
            row["cublas_us"] = round(ms[-1] * 1e3, 4)
            f.write(json.dumps(row) + "\n")
        f.flush()
        print(f"{p.m}x{p.n}x{p.k} {p.dtype} {p.activation}: after/before "
              + " ".join(f"{rows[i]['label'].split()[-1]}{'*' if rows[i]['picked'] else ''} {rows[i]['gpu_us']:.1f}/{rows[i+1]['gpu_us']:.1f}"
                         for i in range(0, len(rows), 2)) + f"  cublas {ms[-1]*1e3:.1f}"
              + ("" if all(r["ok"] for r in rows) else "  CHECK FAILED"), flush=True)
print("done", time.time() - t0)

"""Split-K with TMA loads in its first pass, raced against every selector candidate (the
pointer split-K ones among them) and torch on problems with few output tiles and a long K.
Usage (GPU): python3 docs/runs/kernels/splitk_tma_probe.py SHAPES.csv OUT.jsonl [BUDGET_S]
One JSON line per (problem, config); kind "candidate", "tma_splitk" or "torch"; GPU time
per call by timing.race (CUDA graphs, interleaved)."""
import json, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks"))
import torch
import triton
from autokernel import api, matmul, runtime
from autokernel.candidates import CANDIDATES
from autokernel.config import shared_memory_bytes
from autokernel.evaluate import reference, torch_function
from autokernel.kernels import matmul_tma, splitk
from autokernel.records import KernelConfig
from autokernel.select import why_not
from autokernel.timing import GRAPH_INPUT_SETS, make_input_sets, race
from autokernel.tuning.shapes import read_shapes
from select_sweep import _call

TILES = [(64, 128, 64, 4, 4), (64, 256, 64, 4, 4), (128, 128, 64, 8, 4), (128, 256, 64, 8, 3), (64, 64, 128, 4, 4),
         (128, 64, 64, 4, 4)]


def tma_splitk_configs(m, n, k, sms):
    out = []
    for bm, bn, bk, w, s in TILES:
        tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
        for split in (2, 4, 8, 16):
            if tiles * split <= 4 * sms and triton.cdiv(k, bk) // split >= 4:
                out.append(KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s,
                                        variant="tma", split_k=split))
    return out


def main():
    shapes, out_path = sys.argv[1], sys.argv[2]
    budget = float(sys.argv[3]) if len(sys.argv) > 3 else 480
    start = time.monotonic()
    dev = torch.device("cuda")
    sms = runtime.sm_count()
    limit = runtime.shared_memory_limit()
    with open(out_path, "w") as f:
        for i, p in enumerate(read_shapes(shapes)):
            if time.monotonic() - start > budget:
                print("budget spent at", i, flush=True)
                break
            tma = api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout)
            cands = [c for c in CANDIDATES if why_not(c, p.m, p.n, p.k, tma, sms) is None
                     and shared_memory_bytes(c, p.torch_dtype) <= limit]

            def make(j):
                a, b, bias = p.make_inputs(dev, seed=1000 + j)
                return a, b, bias, torch.empty(p.m, p.n, dtype=p.torch_dtype, device=dev)

            sets = make_input_sets(make, p.bytes, GRAPH_INPUT_SETS)
            a0, b0, bias0, out0 = sets[0]
            ref = reference(a0, b0, bias0, p.activation)
            ops = matmul_tma.tma_operands(a0, b0, out0)
            rows, fns = [], []

            def add(kind, config, fn):
                row = {**p.to_dict(), "index": i, "kind": kind, "label": config.short() if config else "torch",
                       "config": json.loads(config.to_json()) if config else None}
                try:
                    fn(a0, b0, bias0, out0)
                    torch.cuda.synchronize()
                    err = float((out0.float() - ref).norm() / ref.norm().clamp_min(1e-30))
                    row["rel_error"] = err
                    row["status"] = "success" if err < 2e-2 else "incorrect"
                except Exception as exc:
                    row["status"], row["error"] = type(exc).__name__, str(exc).splitlines()[0][:200]
                rows.append(row)
                if row["status"] == "success":
                    fns.append((row, _call(sets, fn)))

            for c in cands:
                add("candidate", c, lambda a, b, bias, out, c=c: matmul(a, b, bias, p.activation, config=c, out=out))
            if ops is not None:
                for c in tma_splitk_configs(p.m, p.n, p.k, sms):
                    plan = splitk.plan_matmul_splitk(a0, b0, out0, bias0, p.activation, 0.01, c, False,
                                                     tma_operands=ops)
                    add("tma_splitk", c, lambda a, b, bias, out, plan=plan: plan(a, b, out, bias if bias is not None else out, out))
            eager = torch_function(p)
            add("torch", None, lambda a, b, bias, out: eager(a, b, bias))
            ms = race([fn for _, fn in fns], rounds=10, segment_ms=1.0)
            for (row, _), t in zip(fns, ms):
                row["gpu_ms"] = t
            for row in rows:
                f.write(json.dumps(row) + "\n")
            f.flush()
            ok = [r for r in rows if r.get("gpu_ms")]
            t_torch = next(r["gpu_ms"] for r in ok if r["kind"] == "torch")
            best_c = min((r for r in ok if r["kind"] == "candidate"), key=lambda r: r["gpu_ms"])
            tsk = [r for r in ok if r["kind"] == "tma_splitk"]
            best_t = min(tsk, key=lambda r: r["gpu_ms"]) if tsk else None
            bad = [r["label"] for r in rows if r["status"] != "success"]
            print(f"{i:3d} {p.label():38s} torch/cand {t_torch / best_c['gpu_ms']:.3f} ({best_c['label']}) "
                  + (f"torch/tma_sk {t_torch / best_t['gpu_ms']:.3f} ({best_t['label']})" if best_t else "no tma")
                  + (f" FAILED {bad}" if bad else ""), flush=True)


if __name__ == "__main__":
    main()

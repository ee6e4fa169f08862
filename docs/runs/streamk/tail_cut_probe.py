"""The TMA kernel's stream-K tail where equal chunks would leave SMs idle, cut in heads and a tail
per tile (``matmul_tma.sk_heads``; with --heads Q only where tiles are cut in Q heads) or, with
--ranges, in ranges of steps, tile after tile (the kernel of docs/runs/streamk/ranges.patch,
applied to 6672334), side by side with the same tile without the tail (data-parallel) and
cuBLAS, on the problems of a shapes file where the cut applies to a TMA candidate. GPU time,
timing.race; each output checked against a float32 reference. One CSV line per pair.
    python3 docs/runs/streamk/tail_cut_probe.py [--heads Q | --ranges] SHAPES.csv OUT.csv [BUDGET_S [MIN_M]]
"""
import sys, time
import torch
sys.path.insert(0, "benchmarks")
from select_sweep import as_record, input_sets, race_checked, shapes_within
from autokernel import api, matmul, runtime
from autokernel.candidates import CANDIDATES
from autokernel.config import shared_memory_bytes

args = sys.argv[1:]
only = int(args.pop(args.index("--heads") + 1)) if "--heads" in args else 0
if only:
    args.remove("--heads")
if "--ranges" in args:
    args.remove("--ranges")
    from autokernel.kernels.matmul_tma import sk_steps  # ranges.patch

    def cut(tiles, programs, k_tiles):
        return 0, sk_steps(tiles, programs, k_tiles)
else:
    from autokernel.kernels.matmul_tma import sk_heads as cut
shapes, out_path = args[0], args[1]
budget = float(args[2]) if len(args) > 2 else 400
MIN_M = int(args[3]) if len(args) > 3 else 65
t0 = time.time()
P = runtime.sm_count()
limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
twins = [c for c in CANDIDATES if c.variant == "tma" and c.stream_k and c.block_m >= 64 and c.block_n >= 128]
n_done = 0
with open(out_path, "w") as f:
    f.write("m,n,k,dtype,activation,config,tail_tiles,heads,cut_steps,tile_steps,dp_us,cut_us,cublas_us,both_checked\n")
    for p in shapes_within(shapes, budget, t0):
        if p.m < MIN_M or not api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout):
            continue
        runs = []
        for twin in twins:
            if shared_memory_bytes(twin, p.torch_dtype) > limit or twin.block_m > 2 * p.m:
                continue
            tiles = -(-p.m // twin.block_m) * -(-p.n // twin.block_n)
            ks = -(-p.k // twin.block_k)
            heads, steps = cut(tiles, P, ks)
            if not steps or (only and heads != only):
                continue
            info = {"tiles": tiles, "tail": tiles % P, "ksteps": ks, "steps": steps, "heads": heads}
            runs.append(({"role": "dp", "label": twin.short(), **info}, twin.model_copy(update={"stream_k": False})))
            runs.append(({"role": "cut", "label": twin.short(), **info}, twin))
        if not runs:
            continue

        sets = input_sets(p, 3000)
        rows = [{**p.to_dict(), **extra} for extra, _ in runs]
        calls = [(row, lambda a, b, bias, out=None, c=c: matmul(a, b, bias, p.activation, config=c, out=out))
                 for row, (_, c) in zip(rows, runs)]
        torch_ms = race_checked(p, calls, sets)
        as_record(rows, torch_ms)
        for d, r in zip(rows[::2], rows[1::2]):
            f.write(f"{p.m},{p.n},{p.k},{p.dtype},{p.activation},{d['label']},{d['tail']},{d['heads']},{d['steps']},{d['ksteps']},"
                    f"{d['gpu_us']:.2f},{r['gpu_us']:.2f},{d['cublas_us']:.2f},{d['ok'] and r['ok']}\n")
        f.flush()
        n_done += 1
        pairs = [(d["label"], d["gpu_us"], r["gpu_us"], d["tail"], d["steps"], d["ksteps"]) for d, r in zip(rows[::2], rows[1::2])]
        print(f"{p.m}x{p.n}x{p.k} {p.dtype} {p.activation}: cublas {torch_ms*1e3:.1f}  "
              + "  ".join(f"[{l} tail {t} {s}/{k}] dp {a:.1f} cut {b:.1f} ({a/b:.2f}x)" for l, a, b, t, s, k in pairs)
              + ("" if all(r["ok"] for r in rows) else "  CHECK FAILED"), flush=True)
print("done", n_done, "problems", round(time.time() - t0), "s")

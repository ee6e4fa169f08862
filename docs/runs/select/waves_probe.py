"""How the TMA tiles' time grows with the waves of tiles, against the selector's prediction:
for a few (M, K), N chosen so that each tile makes 0.5 to 8 waves on the GPU's SMs, the
tile timed side by side with cuBLAS (GPU time, timing.race; each output checked against a
float32 reference), with the model's prediction beside it.
    python3 docs/runs/select/waves_probe.py OUT.jsonl
"""
import json, sys
import torch
sys.path.insert(0, "benchmarks")
from select_sweep import as_record, input_sets, race_checked
from autokernel import matmul, runtime, select
from autokernel.best import selector_model
from autokernel.candidates import CANDIDATES
from autokernel.records import Problem

P = runtime.sm_count()
model = selector_model(runtime.device_name())
labels = ["128x128x64 g8 w8 s4 tma", "128x256x64 g8 w8 s3 tma fl", "64x256x64 g8 w4 s4 tma fl"]
configs = [next(c for c in CANDIDATES if c.short() == label) for label in labels]
with open(sys.argv[1], "w") as f:
    for m, k in [(388, 6144), (388, 1536), (640, 4096), (4096, 2048)]:
        for c in configs:
            gm = -(-m // c.block_m)
            for waves in (0.5, 0.9, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0):
                gn = max(1, round(waves * P / gm))
                n = gn * c.block_n
                p = Problem(m, n, k, "bfloat16", "none", False, "nt")
                found = model.constants_for(c, True)
                feats = select.features(c, m, n, k, torch.bfloat16, True, P)
                row = {**p.to_dict(), "label": c.short(), "tiles": gm * gn, "waves": gm * gn / P,
                       "predicted_us": round(found[0].predict_us(*feats, b_rows=False), 3)}
                call = (row, lambda a, b, bias, out=None, c=c: matmul(a, b, bias, "none", config=c, out=out))
                torch_ms = race_checked(p, [call], input_sets(p, 7000))
                for r in as_record([row], torch_ms):
                    f.write(json.dumps(r) + "\n")
                f.flush()
                print(f"{m}x{n}x{k} {c.short():28s} waves {row['waves']:.2f} pred {row['predicted_us']:8.1f} "
                      f"meas {row['gpu_us']:8.1f} ratio {row['gpu_us'] / row['predicted_us']:.3f}", flush=True)

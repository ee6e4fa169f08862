"""Does a last row of tiles that is mostly past M cost more than a full one? The same tiles
timed on M = 384, 388, 448, 500 and 512 rows (N and K fixed; 388 to 512 make the same
number of 128-row tiles), side by side with cuBLAS (GPU time, timing.race; each output
checked against a float32 reference).
    python3 docs/runs/select/partial_rows_probe.py OUT.jsonl
"""
import json, sys
sys.path.insert(0, "benchmarks")
from select_sweep import as_record, input_sets, race_checked
from autokernel import matmul
from autokernel.candidates import CANDIDATES
from autokernel.records import Problem

labels = ["128x128x64 g8 w8 s4 tma", "128x128x64 g8 w8 s4 tma fl", "128x256x64 g8 w8 s3 tma fl", "64x256x64 g8 w4 s4 tma fl"]
configs = [next(c for c in CANDIDATES if c.short() == label) for label in labels]
with open(sys.argv[1], "w") as f:
    for n, k in [(4224, 6144), (8448, 6144), (4224, 1536)]:
        for m in (384, 388, 448, 500, 512):
            p = Problem(m, n, k, "bfloat16", "none", False, "nt")
            rows = [{**p.to_dict(), "label": c.short()} for c in configs]
            calls = [(row, lambda a, b, bias, out=None, c=c: matmul(a, b, bias, "none", config=c, out=out))
                     for row, c in zip(rows, configs)]
            torch_ms = race_checked(p, calls, input_sets(p, 9000))
            for r in as_record(rows, torch_ms):
                f.write(json.dumps(r) + "\n")
            f.flush()
            print(f"{m}x{n}x{k} cuBLAS {torch_ms * 1e3:7.1f} " + " ".join(f"{r['label']}: {r['gpu_us']:.1f}" for r in rows), flush=True)

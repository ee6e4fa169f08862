"""DRAM bandwidth reached by the 16x64x128 four-stage pointer tile on problems of at most 16
rows whose weights are 20 MB or more, by programs (tiles x split-K slices; bucket = the upper
bound), median TB/s and count, over every fresh draw and the broad suite (CPU, from the sweeps).
    python3 docs/runs/select/decode_bandwidth.py      (output: decode_bandwidth.txt)"""
import sys, json, collections, math, glob
sys.path.insert(0,"benchmarks")
import fit_selector as fs
from autokernel.config import KernelConfig
files = sorted(glob.glob("benchmarks/results/check_random_h100_*.jsonl")) + ["benchmarks/results/check_broad_h100_9.jsonl.gz"]
pts = collections.defaultdict(list)
for f in files:
    for r in fs.read_rows([f]):
        if not r.get("config") or not r.get("gpu_ms") or r["m"] > 16: continue
        c = KernelConfig.from_dict(r["config"])
        if (c.block_m, c.block_n, c.block_k) != (16, 64, 128) or c.num_stages != 4: continue
        item = 2 if r["dtype"] != "float32" else 4
        nbytes = r["n"] * r["k"] * item
        if nbytes < 20e6: continue
        units = -(-r["n"] // 64) * c.split_k
        bw = nbytes / (r["gpu_ms"] * 1e-3) / 1e12
        pts[c.split_k].append((units, bw, r["n"], r["k"]))
import statistics
for sk in sorted(pts):
    v = sorted(pts[sk])
    buckets = collections.defaultdict(list)
    for u, bw, n, k in v:
        b = 33 if u < 33 else 66 if u < 66 else 99 if u < 99 else 132 if u < 132 else 198 if u < 198 else 264 if u < 264 else 528 if u < 528 else 9999
        buckets[b].append(bw)
    print("split", sk, {b: (len(x), round(statistics.median(x), 2)) for b, x in sorted(buckets.items())})

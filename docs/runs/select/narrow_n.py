"""Problems of more than 256 rows with a narrow output (N <= 1152) against the others, over
selector sweeps (benchmarks/select_sweep.py rows): cuBLAS over the pick and over the best
candidate (geomean, GPU time), the narrow ones by how full their last wave of 128x128 tiles
is on 132 SMs and by cuBLAS's time, and every problem of more than 256 rows by that fill.
    python3 docs/runs/select/narrow_n.py benchmarks/results/check_*h200*.jsonl* docs/runs/select/check_seed91444_h200.jsonl.gz"""
import gzip, json, math, sys


def rows(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        yield from (json.loads(line) for line in f if line.strip())


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


problems = {}
for path in sys.argv[1:]:
    for r in rows(path):
        if r.get("status") != "success":
            continue
        d = problems.setdefault((path, r["m"], r["n"], r["k"], r["dtype"], r["activation"], r["bias"], r["layout"]), {})
        if r["label"] == "cublas":
            d["cublas"] = r["gpu_ms"]
            continue
        for role in r["roles"]:
            d[role] = r["gpu_ms"]
        d["best"] = min(d.get("best", math.inf), r["gpu_ms"])
done = [(k, d) for k, d in problems.items() if "cublas" in d and "pick" in d]


def line(name, group):
    print(f"{name}: {len(group)} problems, cuBLAS / pick {geomean([d['cublas'] / d['pick'] for _, d in group]):.3f}, "
          f"cuBLAS / best {geomean([d['cublas'] / d['best'] for _, d in group]):.3f}")


narrow = [(k, d) for k, d in done if k[1] > 256 and k[2] <= 1152]
line("M > 256, N <= 1152", narrow)
line("M > 256, N > 1152", [(k, d) for k, d in done if k[1] > 256 and k[2] > 1152])


def fill(k):  # the last wave's share of 128x128 tiles on 132 SMs
    waves = math.ceil(k[1] / 128) * math.ceil(k[2] / 128) / 132
    return waves / math.ceil(waves)


line("  narrow, last wave of 128x128 tiles >= 90 % full", [(k, d) for k, d in narrow if fill(k) >= 0.9])
line("  narrow, last wave < 75 % full", [(k, d) for k, d in narrow if fill(k) < 0.75])
line("  narrow, cuBLAS <= 20 us", [(k, d) for k, d in narrow if d["cublas"] <= 0.020])
line("  narrow, cuBLAS > 50 us", [(k, d) for k, d in narrow if d["cublas"] > 0.050])

wide = [(k, d) for k, d in done if k[1] > 256]
line("M > 256, last wave >= 90 % full", [(k, d) for k, d in wide if fill(k) >= 0.9])
line("M > 256, last wave 75-90 % full", [(k, d) for k, d in wide if 0.75 <= fill(k) < 0.9])
line("M > 256, last wave < 75 % full", [(k, d) for k, d in wide if fill(k) < 0.75])

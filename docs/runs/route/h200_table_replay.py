"""The ``auto`` backend on the H200 and the H100 with cuBLAS's time predicted by a table of the
GPU's own, by the other GPU's table carried by the selector models' ratio, and by both
(``route.decide``: their geometric mean), replayed on the CPU. Each recorded check of a GPU
is held out in turn; its own table is built from every other sweep of that GPU, the other
GPU's from all of that GPU's sweeps. Run from the repository root:

    python3 docs/runs/route/h200_table_replay.py
"""
import glob
import sys

sys.path.insert(0, "benchmarks")
import fit_cublas as fc  # noqa: E402


def sweeps(gpu):
    return sorted(p for p in glob.glob(f"benchmarks/results/*_{gpu}*.jsonl*") if "multi_gpu" not in p)


def held_out(gpu):
    if gpu == "h200":
        return [p for p in sweeps(gpu) if "/check_" in p]
    # the H100's checks drawn after its table's recipe was settled, and its broad suite
    return [p for p in sweeps(gpu) if "/check_random" in p and int(p.rsplit("_", 1)[1].split(".")[0]) >= 14] + \
        [p for p in sweeps(gpu) if "check_broad_h100_11" in p]


for gpu, other in (("h200", "h100"), ("h100", "h200")):
    theirs = fc.table_from(sweeps(other))
    for margin in (0.05, 0.10, 0.15):
        results = {"own": [], "carried": [], "both": []}
        for held in held_out(gpu):
            # a held-out broad suite leaves every broad sweep of the GPU out of its own table
            own = fc.table_from([p for p in sweeps(gpu) if p != held and not ("broad" in held and "broad" in p)])
            for name, tables in (("own", (own,)), ("carried", (theirs,)), ("both", (own, theirs))):
                results[name].append(fc.routed(tables, [held], margin, own.device))
        for name, rs in results.items():
            print(f"## {gpu.upper()}, {name}, margin {margin:.0%}, {len(rs)} checks held out in turn")
            print("\n".join(fc.describe([o for r in rs for o in r[0]], [e for r in rs for e in r[1]], margin)[:4]))
            print()

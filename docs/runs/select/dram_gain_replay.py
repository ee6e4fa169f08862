"""Replay (CPU) of the H200's recorded sweeps with the H100's model carried there, with and
without the DRAM gain in proportion to the SMs a grid's reads in flight fill
(``select.Model.dram_gain``, ``select.REACH_BYTES``). docs/selector.md, "A faster DRAM
reaches a grid through the SMs it holds":

    python3 docs/runs/select/dram_gain_replay.py reach benchmarks/results/check_random_h200_*.jsonl \\
        benchmarks/results/check_broad_h200_1.jsonl.gz
    python3 docs/runs/select/dram_gain_replay.py picks FILES...    per file: pick / best with each
    python3 docs/runs/select/dram_gain_replay.py errors FILES...   prediction errors, configs whose
                                                                   prediction the gain changes

``reach``: the unsplit and split 16x64x128 pointer tile's DRAM bandwidth (weights' bytes / time)
by the programs of its grid, on the H100's fresh draws and on the H200's sweeps.
"""
import collections
import glob
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
import fit_selector as fs  # noqa: E402
from autokernel import best, select  # noqa: E402
from autokernel.config import KernelConfig  # noqa: E402
from autokernel.records import Problem, torch_dtype  # noqa: E402
from autokernel.report import problem_class  # noqa: E402

RULE = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)
WITH = best.sibling_model("NVIDIA H200")
WITHOUT = select.Model(WITH.device, WITH.programs, dict(WITH.constants), dict(WITH.errors))


def reach(files):
    for name, paths in (("H100", sorted(glob.glob(str(ROOT / "benchmarks/results/check_random_h100_*.jsonl")))),
                        ("H200", files)):
        by = collections.defaultdict(lambda: collections.defaultdict(list))
        for r in fs.read_rows(paths):
            if not r.get("config") or not r.get("gpu_ms") or r["m"] > 16 or r["n"] * r["k"] * 2 < 8e6:
                continue
            c = KernelConfig.from_dict(r["config"])
            if (c.block_m, c.block_n, c.block_k, c.variant) != (16, 64, 128, "grouped"):
                continue
            programs = -(-r["n"] // 64) * c.split_k
            by[c.split_k][min(programs // 33, 5)].append(r["n"] * r["k"] * 2 / (r["gpu_ms"] * 1e-3) / 1e12)
        print(f"{name}: TB/s of the 16x64x128 tile by programs (problems)")
        for split in sorted(by):
            print(f"  split {split:2d}: " + "  ".join(
                f"{b * 33}-{b * 33 + 32 if b < 5 else '':>3}: {sum(v) / len(v):.2f} ({len(v)})"
                for b, v in sorted(by[split].items())))


def picks(files):
    for label, paths in [(Path(f).name, [f]) for f in files] + [("all", files)]:
        by = collections.defaultdict(list)
        for r in fs.read_rows(paths):
            by[fs.shape_key(r)].append(r)
        print(label)
        for name, model in (("without", WITHOUT), ("with", WITH)):
            res = [x for x in (fs.judge(model, key, by[key], RULE) for key in sorted(by)) if x]
            per = collections.defaultdict(list)
            for x in res:
                m, n, k = x[0][:3]
                per[problem_class(Problem(m=m, n=n, k=k, dtype="float16"))].append(x[1])
            ratios = [x[1] for x in res]
            print(f"  {name:8s} pick / best {fs.geomean(ratios):.4f} ("
                  + ", ".join(f"{c} {fs.geomean(v):.4f}" for c, v in sorted(per.items()))
                  + f"), >= 0.90 on {sum(v >= 0.9 for v in ratios)} of {len(ratios)}, "
                  f"> 2 % slower than the default {sum(x[2] < 0.98 for x in res)}, torch / pick {fs.geomean(x[3] for x in res):.4f}")


def errors(files):
    acc = collections.defaultdict(list)
    for r in fs.read_rows(files):
        if not r.get("config") or not r.get("gpu_ms"):
            continue
        c, dtype = KernelConfig.from_dict(r["config"]), torch_dtype(r["dtype"])
        tma = select.tma_aligned(r["m"], r["n"], r["k"], dtype, r["layout"])
        kw = dict(tma=tma, layout=r["layout"], activation=r.get("activation", "none"))
        before = select.predict_us(WITHOUT, c, r["m"], r["n"], r["k"], dtype, **kw)
        after = select.predict_us(WITH, c, r["m"], r["n"], r["k"], dtype, **kw)
        if before is None:
            continue
        us = r["gpu_ms"] * 1e3
        acc["changed" if abs(after / before - 1) > 1e-9 else "unchanged"].append(
            (math.log(before / us), math.log(after / us)))
    for key, v in acc.items():
        n = len(v)
        rms = [math.sqrt(sum(x[i] ** 2 for x in v) / n) for i in (0, 1)]
        mean = [sum(x[i] for x in v) / n for i in (0, 1)]
        print(f"{key}: {n} timed configs, log(predicted / measured) RMS {rms[0]:.4f} -> {rms[1]:.4f}, "
              f"mean {mean[0]:+.4f} -> {mean[1]:+.4f}")


if __name__ == "__main__":
    {"reach": reach, "picks": picks, "errors": errors}[sys.argv[1]](sys.argv[2:])

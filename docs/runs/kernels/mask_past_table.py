"""The tables of docs/kernel-notes.md, "Rows past M and columns past N, masked", from the records
of ``mask_past_probe.py`` (CPU):

    python3 docs/runs/kernels/mask_past_table.py rows docs/runs/kernels/mask_rows_h200.jsonl
    python3 docs/runs/kernels/mask_past_table.py cols docs/runs/kernels/mask_cols_h200.jsonl

Per config and by how many times the tile's rows (columns) exceed M (N): the wrapped time over
the masked one (above 1: masked is faster), geomean and range. Then, per rule "mask where the
tile is at least T times the dimension", cuBLAS's time over the best config's (geomean over
the problems) and over every config's.
"""
import collections
import json
import math
import sys


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def main(side: str, path: str) -> None:
    rows = [json.loads(line) for line in open(path)]
    assert all(r["status"] == "ok" for r in rows), "a config failed its check"
    times, cublas = {}, {}
    for r in rows:
        problem = (r["m"], r["n"], r["k"])
        if r["label"] == "cublas":
            cublas[problem] = r["gpu_us"]
        else:
            name, mode = r["label"].rsplit(" ", 1)
            times[problem, name, mode] = r["gpu_us"]

    def times_over(problem, name):
        bm, bn = (int(x) for x in name.split("x")[:2])
        return (bm / problem[0]) if side == "rows" else (bn / problem[1])

    buckets = ((16, ">= 16"), (8, "8-16"), (4, "4-8"), (2, "2-4"), (0, "< 2"))
    table = collections.defaultdict(list)
    for (problem, name, mode), us in times.items():
        if mode == "masked":
            over = times_over(problem, name)
            label = next(label for floor, label in buckets if over >= floor)
            table[name, label].append(times[problem, name, "wrapped"] / us)
    print(f"{side}: wrapped / masked by tile / {'M' if side == 'rows' else 'N'}")
    for name in sorted({name for name, _ in table}):
        cells = [(label, table.get((name, label))) for _, label in buckets]
        print(f"  {name:14s} " + "  ".join(f"{label}: {geomean(v):.3f} [{min(v):.3f}, {max(v):.3f}] ({len(v)})"
                                           for label, v in cells if v))
    print("cuBLAS / best config and / every config (geomean), by the rule")
    for floor in (math.inf, 16, 8, 4, 2, 1.0001):
        best, every = [], []
        for problem, torch_us in sorted(cublas.items()):
            chosen = {name: us for (p, name, mode), us in times.items() if p == problem
                      and mode == ("masked" if times_over(p, name) >= floor else "wrapped")}
            best.append(torch_us / min(chosen.values()))
            every += [torch_us / us for us in chosen.values()]
        rule = "never masked" if floor == math.inf else f"masked where the tile is >= {floor:g}x"
        one = [b for b, p in zip(best, sorted(cublas)) if p[0] == 1 or p[1] == 1]
        print(f"  {rule:32s} best {geomean(best):.4f}  every {geomean(every):.4f}  "
              f"(size 1: best {geomean(one):.4f})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""Summaries of probe.py's records.

  python3 summary.py orders RECORDS.jsonl[.gz] ...   the merged order ("half") and "floor" against
      the order before, by whether the last group merges (its rows at most half a group), whether
      one group is left, and waves; the picks; all pairs
  python3 summary.py groups RECORDS.jsonl[.gz] ...   GROUP_M 4 and 16 against 8, per tile
(figures: time before / time after, above 1 faster)."""
import collections
import gzip
import json
import math
import sys


def read(paths):
    return [json.loads(l) for f in paths for l in (gzip.open(f, "rt") if f.endswith(".gz") else open(f))]


def gm(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def orders(paths):
    rows = read(paths)
    by = collections.defaultdict(lambda: collections.defaultdict(list))
    picks = collections.defaultdict(list)
    failed = 0
    for r in rows:
        runs = collections.defaultdict(dict)
        for x in r["runs"]:
            runs[json.dumps(x["config"], sort_keys=True)][x["variant"]] = x
            failed += not x["timed"] or x["err"] > 2e-2
        for cj, v in runs.items():
            c = json.loads(cj)
            tile_rows = -(-r["m"] // c["block_m"])
            rem, g = tile_rows % c["group_m"], c["group_m"]
            tiles = tile_rows * -(-r["n"] // c["block_n"])
            hb = v["before"]["gpu_us"] / v["half"]["gpu_us"]
            fb = v["before"]["gpu_us"] / v["floor"]["gpu_us"]
            key = ("merged" if 2 * rem <= g else "unchanged", "one group" if tile_rows < 2 * g else "groups",
                   "waves" if tiles > 132 else "one wave")
            for k in (key, (key[0],), ("all",)):
                by[k]["half"].append(hb); by[k]["floor"].append(fb)
            if "pick" in v["before"]["roles"]:
                picks[key[0]].append((hb, fb))
    print(f"{len(rows)} problems, {failed} runs failed their check")
    for key in sorted(by):
        h, f = by[key]["half"], by[key]["floor"]
        print(f"{' / '.join(key):32s} {len(h):4d}  half {gm(h):.4f} [{min(h):.3f}, {max(h):.3f}]  floor {gm(f):.4f} [{min(f):.3f}, {max(f):.3f}]")
    for key, v in sorted(picks.items()):
        h = [x[0] for x in v]
        print(f"picks, {key:9s} {len(v):4d}  half {gm(h):.4f} [{min(h):.3f}, {max(h):.3f}]  floor {gm([x[1] for x in v]):.4f}")


def groups(paths):
    rows = read(paths)
    agg = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        runs = collections.defaultdict(dict)
        for x in r["runs"]:
            c = dict(x["config"]); c.pop("group_m")
            runs[json.dumps(c, sort_keys=True)][x["group"]] = x
        for cj, v in runs.items():
            c = json.loads(cj)
            name = f'{c["block_m"]}x{c["block_n"]} {c["variant"]}{" fl" if c.get("flatten") else ""}{" sk" if c.get("stream_k") else ""}'
            for g in (4, 16):
                agg[name][g].append(v[8]["gpu_us"] / v[g]["gpu_us"])
    print(f"{len(rows)} problems")
    for name, a in agg.items():
        print(f"{name:28s} n={len(a[4]):3d}  " + "  ".join(
            f"GROUP_M {g} / 8: {gm(a[g]):.4f} [{min(a[g]):.3f}, {max(a[g]):.3f}]" for g in (4, 16)))


if __name__ == "__main__":
    {"orders": orders, "groups": groups}[sys.argv[1]](sys.argv[2:])

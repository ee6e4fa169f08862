"""Is each shipped tuned entry still worth shipping? On the GPU machine:

    python3 benchmarks/race_entries.py --out OUT.jsonl [--write-kept KEPT.json]

An entry of ``autokernel/configs/<this GPU>.json`` is launched for exactly its problem, and
is a candidate the selector scores for problems within 4x of it. Tuned with older kernels
and fewer candidates, it may now run slower than what the selector picks there without it.
Per entry: its config, the selector's pick with the entry (and its other-dtype twin) left
out of the file and the default, each checked once against a float32 reference, raced side
by side with torch (cuBLAS, or eager addmm + the activation; ``timing.race``: GPU time).
Its verdict, by the pick-without's time over the entry's (``gain``): **faster** (above
1 + ``--margin``), **slower** (below 1 - ``--margin``: the entry costs its own problem time)
or **tied**. The slower ones are raced again against the pick with every slower entry left
out. One JSON line per race, then a summary; ``--write-kept`` writes the file without the
slower entries (its other fields as they were). Dropping the tied ones too was tried: it
replayed slower on every recorded sweep, an entry serving its neighbours as a candidate
(docs/selector.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from autokernel import api, best, matmul, runtime
from autokernel.config import KernelConfig, default_config
from autokernel.records import Problem

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from select_sweep import input_sets, race_checked  # noqa: E402


def pick_without(p: Problem, data: dict, left_out, shipped: str):
    """``matmul``'s pick for ``p`` with the entries of indices ``left_out`` left out of the
    shipped file ``data``."""
    kept = dict(data, entries=[e for i, e in enumerate(data["entries"]) if i not in left_out])
    original = best.SHIPPED_DIR
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, shipped).write_text(json.dumps(kept))
        (Path(tmp) / "selector").symlink_to(original / "selector")
        best.SHIPPED_DIR = Path(tmp)
        best.clear_cache()
        try:
            return api.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias,
                                      torch.device("cuda"), tma=api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout),
                                      layout=p.layout)
        finally:
            best.SHIPPED_DIR = original
            best.clear_cache()


def race_entry(p: Problem, entry, without, seed: int) -> dict:
    """The entry's config, the pick without it and the default on problem ``p``, each checked
    once against a float32 reference and raced side by side with torch (``race_checked``):
    a row of the output."""
    configs = {"entry": entry, "without": without, "default": default_config(p.m, p.n, p.k, p.torch_dtype)}
    runs = {name: ({}, lambda a, b, bias, out=None, c=c: matmul(a, b, bias, p.activation, config=c, out=out))
            for name, c in configs.items()}
    t_torch = race_checked(p, list(runs.values()), input_sets(p, seed))
    rows = {name: row for name, (row, _) in runs.items()}
    us = {name: row.get("gpu_ms", math.nan) * 1e3 for name, row in rows.items()}
    return {**p.to_dict(), "entry": entry.short(), "without": without.short(), "default": configs["default"].short(),
            "entry_us": us["entry"], "without_us": us["without"], "default_us": us["default"],
            "torch_us": t_torch * 1e3, "gain": us["without"] / us["entry"],
            "rel_errors": {name: row.get("rel_error") for name, row in rows.items()},
            "ok": all(row["status"] == "success" for row in rows.values()), "without_config": without}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--margin", type=float, default=0.02, help="the gain over the pick without it an entry must keep")
    ap.add_argument("--write-kept", metavar="PATH", help="write the shipped file without the slower entries here")
    ap.add_argument("--time-budget", type=float, default=float("inf"),
                    help="seconds after which no more entries are raced (those left are kept as they are)")
    args = ap.parse_args(argv)
    start = time.monotonic()
    if best.CONFIG_ENV in os.environ:
        sys.exit(f"unset ${best.CONFIG_ENV}: this races the shipped file's entries")
    shipped = f"{best.device_key(runtime.device_name())}.json"
    data = json.loads((best.SHIPPED_DIR / shipped).read_text())
    entries = data["entries"]
    problems = [Problem(e["M"], e["N"], e["K"], e["dtype"], e["activation"], e["bias"], e["layout"]) for e in entries]

    def twins(i: int) -> set[int]:
        """Entry i and those of its problem in another dtype: each a candidate for the
        other's problem, so judged together."""
        return {j for j, q in enumerate(problems) if (q.m, q.n, q.k, q.activation, q.bias, q.layout) ==
                (problems[i].m, problems[i].n, problems[i].k, problems[i].activation, problems[i].bias,
                 problems[i].layout)}

    rows: dict[int, dict] = {}
    failed = 0
    with open(args.out, "w") as f:
        # Pass 1: each entry against the pick without it (and its twins). Pass 2: the slower
        # entries again, against the pick with every slower entry left out, where that differs.
        slower: set[int] = set()
        for round_ in (1, 2):
            todo = range(len(entries)) if round_ == 1 else sorted(slower)
            for i in todo:
                if time.monotonic() - start > args.time_budget:
                    print(f"time budget spent: {len(rows)} of {len(entries)} entries raced", flush=True)
                    break
                p = problems[i]
                entry = KernelConfig.from_dict(entries[i]["config"])
                without = pick_without(p, data, twins(i) | (slower if round_ == 2 else set()), shipped)
                if round_ == 2 and without == rows[i]["without_config"]:
                    continue
                row = race_entry(p, entry, without, 3000 + i)
                row["verdict"] = ("tied" if without == entry else "faster" if row["gain"] > 1 + args.margin
                                  else "slower" if row["gain"] < 1 - args.margin else "tied")
                row["round"] = round_
                failed += not row["ok"]
                rows[i] = row
                f.write(json.dumps({k: v for k, v in row.items() if k != "without_config"}) + "\n")
                f.flush()
                print(f"{p.m}x{p.n}x{p.k} {p.dtype} {p.activation} {p.layout}: entry {row['entry']} "
                      f"{row['entry_us']:.1f} µs, without it {row['without']} {row['without_us']:.1f} "
                      f"({row['gain']:.3f}x), torch {row['torch_us']:.1f}: {row['verdict']}"
                      f"{'' if row['ok'] else ' WRONG'}{' (again)' if round_ == 2 else ''}", flush=True)
            slower = {i for i, r in rows.items() if r["verdict"] == "slower"}
    gains = [r["gain"] for r in rows.values()]
    geo = math.exp(sum(map(math.log, gains)) / len(gains)) if gains else float("nan")
    verdicts = [r["verdict"] for r in rows.values()]
    print(f"{len(gains)} entries, against the pick without them (margin {args.margin:.0%}): "
          f"{verdicts.count('faster')} faster, {verdicts.count('tied')} tied, {verdicts.count('slower')} slower; "
          f"pick-without / entry geomean {geo:.3f}; {failed} failed the check")
    if args.write_kept:
        kept = dict(data, entries=[e for i, e in enumerate(entries) if i not in slower])
        Path(args.write_kept).write_text(json.dumps(kept, indent=2) + "\n")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""Replay (CPU): matmul's pick with the skinny default on the TMA kernel against the pick with
the pointer kernel's default (``default_config(..., tma=False)`` everywhere, the rule before),
on recorded sweeps (taken together); each pick's GPU time read from the sweep (``fit_selector.judge``), with the
shipped model of the sweep's GPU (on the H200 the H100's, carried).

    python3 docs/runs/select/skinny_default_replay.py SWEEP.jsonl[.gz] ...
"""
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import fit_selector as fs  # noqa: E402
from autokernel import best, config, select  # noqa: E402

rule = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)
rules = {"pointer default": lambda m, n, k, dtype, *, gpu=None, tma=False: config.default_config(m, n, k, dtype,
                                                                                                  gpu=gpu),
         "TMA default": config.default_config}
by = collections.defaultdict(list)
for r in fs.read_rows(sys.argv[1:]):
    by[fs.shape_key(r)].append(r)
model = best.selector_model(next(iter(by))[-1])
print(f"{len(by)} problems of {', '.join(sys.argv[1:])}")
for name, default_config in rules.items():
    best.default_config = default_config
    got = [fs.judge(model, key, rows, rule) for key, rows in sorted(by.items())]
    v = [g for g in got if g is not None]
    print(f"  {name}: pick/best {fs.geomean(x[1] for x in v):.4f}, >= 0.90 on {sum(x[1] >= 0.9 for x in v)} of "
          f"{len(v)}, > 2 % slower than its default on {sum(x[2] < 0.98 for x in v)}, cuBLAS/pick "
          f"{fs.geomean(x[3] for x in v):.4f}, cuBLAS/default {fs.geomean(x[4] for x in v):.4f}"
          + (f" ({len(got) - len(v)} left out: pick or default not timed)" if len(got) > len(v) else ""))

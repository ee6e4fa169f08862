"""Build the cuBLAS table ``autokernel.route`` predicts cuBLAS's time from, out of the selector
sweeps' cuBLAS rows (``benchmarks/select_sweep.py``: torch timed side by side with the
configs, GPU time), and replay the ``auto`` backend's choice on held-out sweeps, on the CPU:

    python3 benchmarks/fit_cublas.py SWEEP... --out autokernel/configs/cublas/GPU.json
    python3 benchmarks/fit_cublas.py SWEEP... --holdout HELD... [--margin 0.1] [--also TABLE...]

The replay picks for each held-out problem as ``autokernel.matmul`` does (the shipped
selector model, the configs the sweep measured: ``fit_selector.pick_for``), routes it with a
table built from the other files (and the tables of other GPUs given with ``--also``, as
the shipped tables of one architecture speak together), and reads both sides' times from the sweep: torch over
the Triton pick, over what ``auto`` runs, and over the faster of the two (the ceiling), and
the problems where ``auto``'s choice ran more than 2 % slower than the Triton pick.
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fit_selector as fs  # noqa: E402  (the replay's pick, as the selector's checks make it)

from autokernel import best, gpus, route, select  # noqa: E402
from autokernel.config import KernelConfig  # noqa: E402
from autokernel.records import torch_dtype  # noqa: E402


def table_from(paths: list[str]) -> route.CublasModel:
    """One point per problem measured with cuBLAS (the last file's where several measured it)."""
    rows = [r for r in fs.read_rows(paths) if r.get("config") is None and r.get("gpu_ms")]
    if not rows:
        raise SystemExit("no cuBLAS rows in the sweeps")
    devices = {r["device"] for r in rows}
    if len(devices) != 1:
        raise SystemExit(f"sweeps of several GPUs: {sorted(devices)}")
    device = devices.pop()
    spec = gpus.detect_gpu(device)
    if spec is None:
        raise SystemExit(f"{device} is not in the datasheet table (autokernel/gpus.py)")
    points = {}
    for r in rows:
        epilogue = r.get("activation", "none") != "none"  # as route.decide: a bias is cuBLAS's own epilogue
        p = route.point(r["m"], r["n"], r["k"], epilogue)
        roof = route.roofline_us(r["m"], r["n"], r["k"], torch_dtype(r["dtype"]).itemsize, spec)
        points.setdefault(p, []).append(math.log(r["gpu_ms"] * 1000 / roof))
    # one point per place: float16 and bfloat16, and the layouts, measured alike, averaged
    merged = tuple(sorted((*p, sum(v) / len(v)) for p, v in points.items()))
    return route.CublasModel(device, merged, f"benchmarks/fit_cublas.py over {len(paths)} sweep files")


def routed(tables: tuple[route.CublasModel, ...], paths: list[str], margin: float, device: str | None = None):
    """The ``auto`` backend's choice replayed on ``paths`` (sweeps of ``device``, default the
    first table's GPU) with cuBLAS's time predicted from ``tables`` as ``route.decide`` does
    (a table of another GPU carried by the selector models' ratio): per problem (key, the
    pick's ms, cuBLAS's ms, routed to cuBLAS), and the log errors of cuBLAS's predicted time."""
    device = device or tables[0].device
    model = best.selector_model(device)
    rule = {"margin": select.DEFAULT_MARGIN, "z": select.UNCERTAINTY_Z}
    by = collections.defaultdict(list)
    for r in fs.read_rows(paths):
        by[fs.shape_key(r)].append(r)
    out, errors = [], []
    for key, rows in by.items():
        pick, default, cublas_ms, choice = fs.pick_for(model, rows, rule)
        if pick is None or default is None:  # a sweep that did not time the pick or the default
            continue
        m, n, k, dt, layout, act, bias, _ = key
        found = best.Pick(choice.config, choice.source, choice.reason, KernelConfig.from_dict(default["config"]), False,
                          choice)
        where = route.decide(m, n, k, torch_dtype(dt), act, bool(bias), device, found, layout, margin, tables)
        if where.cublas_us is not None:
            errors.append(math.log(where.cublas_us / (cublas_ms * 1000)))
        out.append((key, pick["gpu_ms"], cublas_ms, where.library == "cublas"))
    return out, errors


def describe(out, errors, margin: float) -> list[str]:
    """``routed``'s results as the replay prints them."""
    g = fs.geomean
    lines = [f"{len(out)} problems; cuBLAS predicted with RMS log error "
             f"{math.sqrt(sum(e * e for e in errors) / len(errors)):.3f}",
             f"torch / Triton pick {g(c / p for _, p, c, _ in out):.4f}; torch / auto "
             f"{g(c / (c if to else p) for _, p, c, to in out):.4f} (margin {margin:.0%}, "
             f"{sum(to for *_, to in out)} routed to cuBLAS); torch / the faster of the two "
             f"{g(c / min(p, c) for _, p, c, _ in out):.4f}"]
    worse = sorted(((p / c, key) for key, p, c, to in out if to and c > p * 1.02), reverse=True)
    lines.append(f"routed to cuBLAS and more than 2 % slower than the Triton pick: {len(worse)}")
    for ratio, key in worse[:10]:
        lines.append(f"  {key[0]}x{key[1]}x{key[2]} {key[3]} {key[4]} {key[5]}{' bias' if key[6] else ''}: "
                     f"cuBLAS / Triton time {1 / ratio:.3f}")
    return lines


def replay(tables: tuple[route.CublasModel, ...], paths: list[str], margin: float, device: str | None = None) -> None:
    """Print the replay of ``routed``."""
    print("\n".join(describe(*routed(tables, paths, margin, device), margin)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweeps", nargs="+")
    ap.add_argument("--out", help="write the table here")
    ap.add_argument("--holdout", nargs="+", default=[], help="sweep files to replay the choice on (left out of the table)")
    ap.add_argument("--margin", type=float, default=route.MARGIN)
    ap.add_argument("--table", nargs="+", help="replay with these tables (files) instead of one built from the sweeps")
    ap.add_argument("--also", nargs="+", default=[],
                    help="tables (files) of other GPUs that speak beside the built one in the replay, as the "
                    "shipped tables of the architecture do in autokernel.route")
    args = ap.parse_args(argv)
    held = set(args.holdout)

    def read(path):
        try:
            return route.CublasModel.from_json(Path(path).read_text(), path)
        except (OSError, ValueError) as exc:
            raise SystemExit(f"error: {exc}") from None

    if args.table:
        device = fs.read_rows(args.holdout[:1])[0]["device"] if args.holdout else None
        replay(tuple(map(read, args.table)), args.holdout, args.margin, device)
        return 0
    table = table_from([p for p in args.sweeps if p not in held])
    print(f"{len(table.points)} points of {table.device}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(table.to_json())
    if args.holdout:
        replay((table, *map(read, args.also)), args.holdout, args.margin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

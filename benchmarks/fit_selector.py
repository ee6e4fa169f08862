"""Fit the selector's model from sweep files and check it by cross-validation, on the CPU.

    python3 benchmarks/fit_selector.py benchmarks/results/select_sweep_h100.jsonl \
        --out autokernel/configs/selector/nvidia-h100-80gb-hbm3.json --folds 10

The sweep (``benchmarks/select_sweep.py``, on the GPU) timed every candidate on each shape.
Cross-validation: the shapes are split into FOLDS groups; each group's shapes are picked for
by a model fitted without them, and the pick's measured time is compared with the best
measured candidate, the default config and cuBLAS of the same shape, timed side by side.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import sys
from dataclasses import dataclass, replace

from autokernel import best, gpus, select
from autokernel.config import KernelConfig
from autokernel.records import torch_dtype
from autokernel.userfiles import read_text


def shape_key(row: dict) -> tuple:
    return (row["m"], row["n"], row["k"], row["dtype"], row["layout"], row.get("activation", "none"),
            row.get("bias", False), row["device"])


def read_rows(paths: list[str]) -> list[dict]:
    """The rows of every sweep file; where several files measured one problem, the last
    file's rows alone (a newer measurement supersedes an older one)."""
    by_file = []
    for path in paths:
        by_file.append([json.loads(line) for line in read_text(path).splitlines() if line.strip()])
    owner = {shape_key(row): i for i, rows in enumerate(by_file) for row in rows}
    return [row for i, rows in enumerate(by_file) for row in rows if owner[shape_key(row)] == i]


def pick_for(model: select.Model, rows: list[dict], rule: dict) -> tuple[dict, dict, float, select.Choice]:
    """(picked row, default row, cuBLAS ms, choice) for one shape's rows: the pick, as
    matmul makes it (the candidates, the shipped tuned entries nearby, the default), among
    the configs the sweep measured. ``rule``: the margin and z of ``select.choose``."""
    r0 = rows[0]
    dtype = torch_dtype(r0["dtype"])
    tma = select.tma_aligned(r0["m"], r0["n"], r0["k"], dtype, r0["layout"])
    exact = {KernelConfig.from_dict(r["config"]): r for r in rows if r["config"] is not None and r.get("gpu_ms")}
    same_kernel = {ran_as(c, tma): r for c, r in exact.items()}

    def measured(config: KernelConfig) -> dict | None:
        # A config the sweep did not time as such may have run as one it did: "auto" is
        # the TMA kernel where that runs, and the pointer kernel ignores the TMA options.
        return exact.get(config) or same_kernel.get(ran_as(config, tma))

    found = best.pick(r0["m"], r0["n"], r0["k"], dtype, r0.get("activation", "none"), r0.get("bias", False),
                      r0["layout"], device=r0["device"], **rule, fits=lambda c: measured(c) is not None, rank=True,
                      model=model)
    choice, default = found.choice, found.default
    cublas = next(r["gpu_ms"] for r in rows if r["config"] is None)
    return measured(choice.config), measured(default), cublas, choice


def ran_as(config: KernelConfig, tma: bool) -> KernelConfig:
    """The config as the kernel that ran it sees it (``tma``: whether the TMA kernel could
    take the operands): two configs with the same ``ran_as`` launched the same kernel. The
    TMA kernel's stream-K tail is its own kernel: a sweep that did not time it has no
    reading of it, and the replay leaves it out."""
    if config.split_k > 1 or (config.stream_k and config.variant != "tma"):  # the pointer kernels
        return config.model_copy(update={"variant": "grouped"})
    if config.stream_k and not tma:  # the TMA kernel's stream-K tail falls back to the pointer stream-K
        return config.model_copy(update={"variant": "grouped"})
    return config.on_variant("tma" if config.variant != "grouped" and tma else "grouped")


def judge(model: select.Model, key: tuple, rows: list[dict], rule: dict) -> tuple | None:
    """(key, pick/best, default/pick, cuBLAS/pick, cuBLAS/default, cuBLAS/best, pick's label) of one shape;
    None where the sweep timed no config that runs as the pick or the default does (a sweep
    made before that config was a candidate or the default)."""
    pick, default, cublas, choice = pick_for(model, rows, rule)
    if pick is None or default is None:
        return None
    best = min(r["gpu_ms"] for r in rows if r["config"] is not None and r.get("gpu_ms"))
    return (key, best / pick["gpu_ms"], default["gpu_ms"] / pick["gpu_ms"], cublas / pick["gpu_ms"],
            cublas / default["gpu_ms"], cublas / best, choice.config.short())


def summarize(results: list[tuple | None], title: str) -> None:
    left_out = sum(r is None for r in results)
    results = [r for r in results if r is not None]
    ratios = sorted(r[1] for r in results)
    print(title + (f" ({left_out} left out: the sweep did not time their pick or default)" if left_out else ""))
    print(f"pick / best measured: geomean {geomean(ratios):.3f}, median {ratios[len(ratios) // 2]:.3f}, "
          f"worst {ratios[0]:.3f}, >= 0.90 on {sum(r >= 0.9 for r in ratios)} of {len(ratios)}")
    vs_default = [r[2] for r in results]
    print(f"pick / default: geomean {geomean(vs_default):.3f}, worst {min(vs_default):.3f}, "
          f"more than 2 % slower on {sum(v < 0.98 for v in vs_default)}")
    print(f"cuBLAS / pick {geomean(r[3] for r in results):.3f}, cuBLAS / default {geomean(r[4] for r in results):.3f}, "
          f"cuBLAS / best measured {geomean(r[5] for r in results):.3f} (geomeans, GPU time)")
    print("worst 10 (M N K dtype layout: pick/best, pick/default, cuBLAS/pick, pick):")
    for key, r_best, r_def, r_cub, _, _, label in sorted(results, key=lambda r: r[1])[:10]:
        print(f"  {key[0]}x{key[1]}x{key[2]} {key[3]} {key[4]}: {r_best:.3f} {r_def:.3f} {r_cub:.3f} {label}")


@dataclass
class FitOptions:
    """``fitted``'s options as the command line gives them, for scripts that fit without it."""

    programs: int = 132
    no_errors: bool = False
    fill_from: str | None = None
    dram_scale: float | None = None
    l2_reread: float = select.LEGACY_L2_REREAD
    dram_tail: float = select.LEGACY_DRAM_TAIL


def fitted(device: str, rows: list[dict], args) -> select.Model:
    """The model fitted on ``rows``, with each config's error on them (unless --no-errors:
    then the pick keeps the default within --margin instead). ``args``: the command line's,
    or a FitOptions."""
    shares = dict(l2_reread=args.l2_reread, dram_tail=args.dram_tail)
    model = select.Model(device, args.programs, select.fit(rows, args.programs, dram_scale=dram_scale(device, args),
                                                          **shares), **shares)
    if not args.no_errors:
        model = select.Model(device, args.programs, model.constants, select.fit_errors(model, rows), **shares)
    return filled(model, args.fill_from, rows) if args.fill_from else model


ROW_MAJOR_MIN = 20
"""The fewest problems with B row-major (layouts nn, tn) a config's rows need for its own
layout factor r; with fewer, ``filled`` takes it from the other model."""


def filled(model: select.Model, path: str, rows: list[dict]) -> select.Model:
    """``model``, fitted on ``rows``, with what they do not measure taken from the selector
    file ``path``, carried to ``model``'s GPU (``best.carry``): the configs it has no constants
    for (with their errors), and the layout factor r (B row-major against B transposed) of
    each config timed on fewer than ROW_MAJOR_MIN problems with B row-major. The configs
    taken whole keep the constants the file fitted under its own ``l2_reread`` and ``dram_tail``."""
    base = select.Model.from_json(read_text(path), path)
    base = best.carry(base, model.device) or base
    row_major = row_major_counts(rows)
    constants = {key: replace(c, r=base.constants[key].r)
                 if key in base.constants and row_major[key] < ROW_MAJOR_MIN else c
                 for key, c in model.constants.items()}
    constants.update({key: c for key, c in base.constants.items() if key not in constants})
    errors = {**{key: e for key, e in base.errors.items() if key not in model.constants}, **model.errors}
    return select.Model(model.device, model.programs, constants, errors, l2_reread=model.l2_reread,
                        dram_tail=model.dram_tail)


def row_major_counts(rows: list[dict]) -> collections.Counter:
    """Per config (``select.config_id``), how many of ``rows`` timed it with B row-major."""
    return collections.Counter(select.config_id(KernelConfig.from_dict(row["config"])) for row in rows
                               if row.get("config") is not None and select.b_row_major(row.get("layout", "nt")))


COPY_GPU = "NVIDIA H100 80GB HBM3"
"""The GPU whose copy bandwidth ``select.COPY_BANDWIDTH`` is."""


def dram_scale(device: str, args) -> float:
    """``select.fit``'s ``dram_scale`` for sweeps of ``device``: --dram-scale, else the
    datasheets' DRAM bandwidth of ``device`` over COPY_GPU's (1 where the table does not know it)."""
    if args.dram_scale:
        return args.dram_scale
    spec, ref = gpus.detect_gpu(device), gpus.detect_gpu(COPY_GPU)
    return spec.bandwidth_gbs / ref.bandwidth_gbs if spec is not None else 1.0


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweeps", nargs="+")
    ap.add_argument("--out", help="write the fitted model here")
    ap.add_argument("--folds", type=int, default=10, help="cross-validation folds (0: none)")
    ap.add_argument("--margin", type=float, default=select.DEFAULT_MARGIN,
                    help="with --no-errors: keep the default unless a config is predicted this much faster")
    ap.add_argument("--z", type=float, default=select.UNCERTAINTY_Z,
                    help="keep the default unless a config's predicted gain exceeds z times the predictions' error")
    ap.add_argument("--no-errors", action="store_true", help="fit no per-config errors (the margin rule)")
    ap.add_argument("--programs", type=int, default=132, help="SMs of the swept GPU")
    ap.add_argument("--fill-from", metavar="MODEL",
                    help="take what the sweeps do not measure from this selector file (carried to the swept GPU): "
                         "the configs they lack, and the layout factor of configs timed on few nn/tn problems")
    ap.add_argument("--dram-scale", type=float, default=None,
                    help="the swept GPU's DRAM bandwidth over the H100's (default: the datasheets')")
    ap.add_argument("--l2-reread", type=float, default=select.LEGACY_L2_REREAD, metavar="SHARE",
                    help="what each read of an operand after its first costs the L2 term, as a share of the first "
                         "(select.Model.l2_reread; stored in the file)")
    ap.add_argument("--dram-tail", type=float, default=select.LEGACY_DRAM_TAIL, metavar="SHARE",
                    help="how much a persistent TMA grid's last round slows its DRAM term, times the round's idle "
                         "share (select.Model.dram_tail; stored in the file)")
    ap.add_argument("--holdout", nargs="+", default=[], metavar="SWEEP",
                    help="sweep files left out of the fit: picked for by the model fitted on the others")
    ap.add_argument("--add-to", metavar="MODEL",
                    help="with --out: keep MODEL's constants and errors and add only the configs it lacks (new "
                         "candidates join a shipped model without moving the picks it makes elsewhere)")
    args = ap.parse_args(argv)
    if not 0.0 <= args.l2_reread <= 1.0:
        print(f"error: --l2-reread {args.l2_reread}: a share between 0 and 1", file=sys.stderr)
        return 2
    if not 0.0 <= args.dram_tail <= select.MAX_DRAM_TAIL:
        print(f"error: --dram-tail {args.dram_tail}: between 0 and {select.MAX_DRAM_TAIL:g}", file=sys.stderr)
        return 2
    base = None
    if args.out and args.add_to:
        base = select.Model.from_json(read_text(args.add_to), args.add_to)
        for flag, theirs, ours in (("--l2-reread", base.l2_reread, args.l2_reread),
                                   ("--dram-tail", base.dram_tail, args.dram_tail)):
            if theirs != ours:
                print(f"error: {args.add_to} was fitted with {flag} {theirs}; fit with the same", file=sys.stderr)
                return 2
    rows = read_rows(args.sweeps)
    rule = dict(margin=args.margin, z=args.z)
    rule_name = f"margin {args.margin}" if args.no_errors else f"uncertainty z {args.z}"
    devices = sorted({r["device"] for r in rows})
    if len(devices) != 1:
        print(f"error: the sweeps hold several devices ({', '.join(devices)}); fit one at a time", file=sys.stderr)
        return 2
    by_shape = collections.defaultdict(list)
    for row in rows:
        by_shape[shape_key(row)].append(row)
    if args.folds:
        shapes = sorted(by_shape)
        random.Random(0).shuffle(shapes)
        results = []
        for fold in range(args.folds):
            held = shapes[fold::args.folds]
            held_set = set(held)
            model = fitted(devices[0], [r for r in rows if shape_key(r) not in held_set], args)
            results += [judge(model, key, by_shape[key], rule) for key in held]
        summarize(results, f"{len(results)} shapes, {args.folds}-fold cross-validation, {rule_name}")
    if args.holdout:
        held_rows = read_rows(args.holdout)
        held_by_shape = collections.defaultdict(list)
        for row in held_rows:
            held_by_shape[shape_key(row)].append(row)
        model = fitted(devices[0], rows, args)
        results = [judge(model, key, held_by_shape[key], rule) for key in sorted(held_by_shape)]
        summarize(results, f"{len(results)} held-out shapes ({', '.join(args.holdout)}), {rule_name}")
    if args.out:
        model = fitted(devices[0], rows, args)
        if base is not None:
            added = {key: c for key, c in model.constants.items() if key not in base.constants}
            model = select.Model(base.device, base.programs, {**base.constants, **added},
                                 {**base.errors, **{key: model.errors[key] for key in added if key in model.errors}},
                                 l2_reread=base.l2_reread, dram_tail=base.dram_tail)
            print(f"added {len(added)} configs to {args.add_to}'s {len(base.constants)}")
        with open(args.out, "w") as f:
            f.write(model.to_json())
        print(f"wrote {args.out}: {len(model.constants)} configs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

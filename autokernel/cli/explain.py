"""`autokernel explain`: which config autokernel.matmul picks for a problem, and why."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from autokernel.cli._common import (JsonOpt, console, fail, path_option, print_json, print_table,
                                    require_kernel_device, user_errors)
from autokernel.records import ConfigError, Problem
from autokernel.tuning.shapes import read_shapes

# torch and Triton load only in commands that run kernels: torch and the modules that import
# it (runtime, best) are imported inside the function that uses them.


def explain(
    m: Annotated[int | None, typer.Option("--m", help="M (rows of A and C).")] = None,
    n: Annotated[int | None, typer.Option("--n", help="N (columns of B and C).")] = None,
    k: Annotated[int | None, typer.Option("--k", help="K (the reduction dimension).")] = None,
    dtype: Annotated[str, typer.Option("--dtype", "-d", help="float16/fp16 or bfloat16/bf16.")] = "float16",
    layout: Annotated[str, typer.Option(help="nn, nt (nn.Linear's weight), tn or tt.")] = "nt",
    activation: Annotated[str, typer.Option("--activation", "-a", help="The fused activation.")] = "none",
    bias: Annotated[bool, typer.Option("--bias", help="With a bias.")] = False,
    device: Annotated[str | None, typer.Option(
        help="The GPU to explain for, by name (e.g. 'NVIDIA H100 80GB HBM3'); default: this machine's. "
             "Works without that GPU: the model is data.")] = None,
    top: Annotated[int, typer.Option(help="How many ranked configs to show.")] = 12,
    backward: Annotated[bool, typer.Option(
        "--backward", help="The three GEMMs of a training step of the linear layer X[M,K] W[N,K] as "
                           "autokernel.linear runs them: the forward (nt, with the activation and bias), "
                           "dX = dZ W (nn) and dW = dZ^T X (tn).")] = False,
    shapes: Annotated[Path | None, typer.Option(
        "--shapes", parser=path_option,
        help="A JSON or CSV shapes file (as `autokernel shapes --model` writes): one line per problem, "
             "or with --backward per linear layer, of what runs it, instead of --m, --n and --k.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Show the configs the selector ranked for a problem, their predicted times, and why the
    winner won: a tuned entry for exactly the problem, else the selector's choice among its
    candidates, nearby tuned entries and the default. Predictions come from the model fitted
    for the GPU (autokernel/configs/selector/), or for a GPU of the same architecture, carried
    over by the datasheets' ratios; nothing is launched or timed. With --shapes, a table of
    every problem of a file (with --backward, every linear layer: where each GEMM runs under
    AUTOKERNEL_BACKEND=auto, and what runs the layer)."""
    import torch

    from autokernel import best, runtime

    if top < 1:
        fail(f"--top must be >= 1, got {top}")
    if device is not None and not device.strip():
        fail("--device is empty: name a GPU (e.g. h100), or leave --device out for this machine's")
    if backward and layout != "nt":
        fail("--backward explains nn.Linear's layout (nt): leave --layout out")
    if shapes is not None:
        if (m, n, k) != (None, None, None):
            fail("give --shapes or --m, --n and --k, not both")
        with user_errors():
            problems = read_shapes(shapes)
        if not problems:
            fail(f"shapes file {shapes} holds no problems")
    else:
        missing = [f"--{d}" for d, v in (("m", m), ("n", n), ("k", k)) if v is None]
        if missing:
            fail(f"missing {', '.join(missing)}: give --m, --n and --k, or --shapes FILE")
        with user_errors():
            problems = [Problem(m, n, k, dtype, activation, bias, layout)]
    for problem in problems:
        if problem.torch_dtype == torch.float32:
            fail(f"{problem.label()}: the selector ranks float16 and bfloat16 problems; float32 takes the "
                 "default config")
        if backward and problem.layout != "nt":
            fail(f"{problem.label()}: --backward explains nn.Linear's layout (nt)")
    if device is None:
        require_kernel_device()
    name = device or runtime.device_name()
    if device is not None:  # a part of a shipped model's name ("h100") names that GPU
        shipped = sorted((best.SHIPPED_DIR / "selector").glob("*.json"))
        matches = [p.stem for p in shipped if best.device_key(device) in p.stem]
        if best.device_key(device) not in [p.stem for p in shipped] and len(matches) == 1:
            name = matches[0]
    if shapes is not None:
        _explain_file(problems, name, backward, json_out)
        return
    problem = problems[0]
    gemms = _training_gemms(problem) if backward else [("", problem, False)]
    found = [(what, gemm, _explained(gemm, name, store_z, top)) for what, gemm, store_z in gemms]
    if json_out:
        results = [{"gemm": what or None, **out} for what, _, out in found]
        print_json(results if backward else results[0])
        return
    for what, gemm, out in found:
        _render(what, gemm, name, out)
    if backward and all(out["route"]["cublas_us"] is not None for *_, out in found):
        _render_layer_route([out["route"] for *_, out in found])


def _explain_file(problems: list[Problem], name: str, backward: bool, json_out: bool) -> None:
    """One row per problem of a shapes file: the pick and its predicted time, cuBLAS's, and
    where ``auto`` runs it; with ``backward`` one row per linear layer, its three GEMMs."""
    from autokernel import route
    from autokernel.config import KernelConfig

    rows = []
    for problem in problems:
        gemms = _training_gemms(problem) if backward else [("", problem, False)]
        outs = [_explained(gemm, name, store_z, 1) for _, gemm, store_z in gemms]
        rows.append((problem, outs))
    if json_out:
        print_json([{"problem": problem.to_dict(), "device": name,
                     "gemms": [{"config": out["config"], "source": out["source"], "grid": out["grid"],
                                "route": out["route"]} for out in outs],
                     **({"layer": _layer_runs([out["route"] for out in outs])[0]} if backward else {})}
                    for problem, outs in rows])
        return
    now = "under auto" if route.backend() == "auto" else f"with {route.ENV}=auto"

    def cell(out: dict) -> str:
        r = out["route"]
        us = r["cublas_us"] if r["library"] == "cublas" else r["triton_us"]
        where = "cuBLAS" if r["library"] == "cublas" else "Triton"
        return where if us is None else f"{where} {us:.1f}"

    table = Table(title=f"{'linear layers' if backward else 'problems'} on {escape(name)}: "
                        f"predicted GPU time per call (µs), {now}")
    table.add_column("problem")
    if backward:
        for what in ("forward", "dX", "dW"):
            table.add_column(what, justify="right")
        table.add_column("the layer runs on")
    else:
        table.add_column("pick")
        table.add_column("from")
        table.add_column("SM rounds", justify="right")
        table.add_column("Triton µs", justify="right")
        table.add_column("cuBLAS µs", justify="right")
        table.add_column(f"runs {now}")
    counts: dict[str, int] = {}
    for problem, outs in rows:
        if backward:
            runs = _layer_runs([out["route"] for out in outs])[0]
            counts[runs] = counts.get(runs, 0) + 1
            table.add_row(escape(problem.label()), *(cell(out) for out in outs), runs)
        else:
            out = outs[0]
            r = out["route"]
            where = "cuBLAS" if r["library"] == "cublas" else "Triton"
            counts[where] = counts.get(where, 0) + 1
            grid = out["grid"]
            rounds = ("stream-K" if grid is None else
                      f"{grid['rounds']:.2f}" + (f" ({grid['last_round_full']:.0%})" if grid["rounds"] > 1 else ""))
            table.add_row(escape(problem.label()), escape(KernelConfig.from_dict(out["config"]).short()),
                          escape(out["source"]), rounds, "-" if r["triton_us"] is None else f"{r['triton_us']:.1f}",
                          "-" if r["cublas_us"] is None else f"{r['cublas_us']:.1f}", where)
    print_table(table)
    console.print(escape(f"{len(rows)} {'layers' if backward else 'problems'}: "
                         + ", ".join(f"{count} on {what}" for what, count in sorted(counts.items(),
                                                                                  key=lambda kv: -kv[1]))),
                  soft_wrap=True)


def _layer_runs(routes: list[dict]) -> tuple[str, list[bool]]:
    """What runs a linear layer under ``auto`` given its three GEMMs' routes (forward, dX,
    dW), as ``autograd.whole_layer_on_torch`` decides it from the same predictions: "torch's
    linear" where at least one routes to cuBLAS and cuBLAS is predicted faster on the others
    (by less than the margin: the ``tied`` ones), "autokernel, split" where the GEMMs are
    split between the libraries, else "autokernel, Triton"; and which GEMMs tied."""
    libraries = [r["library"] for r in routes]
    tied = [r["library"] == "triton" and r["cublas_us"] is not None and r["triton_us"] is not None
            and r["cublas_us"] < r["triton_us"] for r in routes]
    if "cublas" in libraries and all(lib == "cublas" or tie for lib, tie in zip(libraries, tied)):
        return "torch's linear", tied
    return ("autokernel, split" if "cublas" in libraries else "autokernel, Triton"), tied


def _training_gemms(problem: Problem) -> list[tuple[str, Problem, bool]]:
    """(what, problem, whether it stores Z) of each GEMM of one training step of the linear
    layer ``problem`` describes (X [M, K], W [N, K]), as autokernel.linear launches them: the
    forward with the epilogue (storing the pre-activation Z where backward needs it), dX =
    dZ W ([M, N] @ [N, K], both row-major) and dW = dZ^T X ([N, M], a transposed view, @ [M, K])."""
    from autokernel.autograd import stores_preactivation
    from autokernel.evaluate import LEAKY_SLOPE

    m, n, k, dt = problem.m, problem.n, problem.k, problem.dtype
    return [
        ("forward Y = act(X W^T + b)", problem, stores_preactivation(problem.activation, LEAKY_SLOPE)),
        ("dX = dZ W", Problem(m, k, n, dt, layout="nn"), False),
        ("dW = dZ^T X", Problem(n, k, m, dt, layout="tn"), False),
    ]


def _explained(problem: Problem, name: str, store_z: bool, top: int) -> dict:
    """What explain prints for one GEMM on the GPU ``name``: the pick, where it came from,
    why, how a stream-K tail is cut (or None) and the top ``top`` of the ranking."""
    from autokernel import best, knobs, plans, route, select
    from autokernel.kernels.matmul_tma import TMA_DTYPES, describe_tail

    m, n, k, layout = problem.m, problem.n, problem.k, problem.layout
    pads = plans.padding_for(m, n, k, problem.torch_dtype, layout)
    unaligned = plans.rows_unaligned_for(m, n, k, problem.torch_dtype, layout)
    # Where the copies leave no operand unaligned they take TMA descriptors (the GPUs with a
    # fitted model have the TMA kernel); an operand left as it was keeps the pointer kernels.
    copies_tma = any(pads) and not any(odd and not pad for odd, pad in zip(unaligned, pads))
    try:
        found = best.pick(m, n, k, problem.torch_dtype, problem.activation, problem.bias, layout, device=name,
                          store_z=store_z, rank=True, tma=True if copies_tma else None, copied=pads)
    except ConfigError as exc:
        fail(str(exc))
    if found.choice is None:
        fail(f"no selector model for {name}: autokernel.matmul takes a tuned entry for exactly the problem, "
             "else the default config there")
    winner = found.config
    model = best.selector_model(name)
    tma = select.tma_aligned(m, n, k, problem.torch_dtype, layout)
    tail = None
    if winner.stream_k and select.kernel_kind(winner, tma) == "tma":
        rows, cols = knobs.tile_grid(winner.swap_ab, winner.block_m, winner.block_n, m, n)
        tail = describe_tail(rows * cols, model.programs, -(-k // winner.block_k))
    grid = None if tail else _grid(winner, m, n, problem.torch_dtype, tma or copies_tma, model.programs)
    ranked = found.choice.ranked
    close = None if found.exact else select.close_calls(ranked, winner)  # a tuned entry for exactly this wins
    where = route.decide(m, n, k, problem.torch_dtype, problem.activation, problem.bias, name, found, layout)
    excess = select.epilogue_excess_us(problem.activation, m, n, model.programs)
    c_rows = None
    if route.odd_output(n, problem.torch_dtype.itemsize, layout) and problem.torch_dtype in TMA_DTYPES:
        # C's rows take no descriptor while A's and B's may: the TMA kernel stores C through pointers
        c_rows = "pointers" if tma else "pointer kernels"
    return {"problem": problem.to_dict(), "device": name, "config": winner.model_dump(), "source": found.source,
            "reason": found.reason, "stream_k_tail": tail, "grid": grid, "model_carried": model.based_on,
            "close_calls": None if close is None else {"configs": close[0], "within": close[1]},
            "c_rows_unaligned": c_rows,
            "padded": [name for name, pad in zip("AB", pads) if pad],
            "sector_split": [name for name, split, pad in
                             zip("AB", select.split_rows(m, n, k, problem.torch_dtype.itemsize, layout), pads)
                             if split and not pad],
            "epilogue_excess_us": None if excess is None else {"tma": excess[0], "pointer": excess[1]},
            "route": {"backend": route.backend(), "library": where.library, "triton_us": where.triton_us,
                      "cublas_us": where.cublas_us, "reason": where.reason,
                      "cublas_by_table": [{"table": device, "us": us} for device, us in where.by_table]},
            "ranked": [{"config": s.config.model_dump(), "label": s.config.short(), "source": s.source,
                        "predicted_us": s.predicted_us, "scored_as": s.scored_as.short() if s.scored_as else None,
                        "error": s.error}
                       for s in ranked[:top]]}


IDLE_FILL = 0.75
"""A last round of tiles filled less than this, on more than IDLE_MIN_M rows, is where explain
says the idle SMs cost: over the H200's sweeps, problems of more than 256 rows reach 0.862x
cuBLAS with the best candidate where the last round of 128x128 tiles is under 75 % full,
0.999x where it is 90 % full or more (docs/selector.md, "Narrow outputs under one wave").
Memory-bound decode tiles are no such case."""
IDLE_MIN_M = 256


def _grid(config, m: int, n: int, dtype, tma: bool, programs: int) -> dict:
    """How ``config``'s output tiles (with split-K, a program per tile and K slice: ``units``)
    fill the SMs: the tiles, how many programs an SM runs at once (one on the TMA kernel's
    persistent grid; as many as fit on the pointer kernels'), the rounds of programs that
    makes and how full the last is. Where a round leaves SMs idle the power-of-two tiles
    trail cuBLAS most (``IDLE_FILL``). A config with ``swap_ab`` tiles C^T: N by block_m, M by
    block_n."""
    from autokernel import knobs, select
    from autokernel.kernels.fit import programs_per_sm

    rows, cols = knobs.tile_grid(config.swap_ab and select.kernel_kind(config, tma) == "tma", config.block_m,
                                 config.block_n, m, n)
    tiles = rows * cols
    units = tiles * config.split_k
    per_sm = 1 if select.kernel_kind(config, tma) == "tma" else programs_per_sm(config, dtype, tma=tma)
    slots = programs * per_sm
    rounds = -(-units // slots)
    full = (units - slots * (rounds - 1)) / slots
    return {"tiles": tiles, "units": units, "programs": programs, "per_sm": per_sm, "rounds": units / slots,
            "last_round_full": full, "idle_costs": full < IDLE_FILL and m > IDLE_MIN_M}


def _grid_line(config, grid: dict) -> str:
    """``_grid`` in words."""
    shape = (f"C^T, {config.block_m} of N by {config.block_n} of M" if config.swap_ab
             else f"{config.block_m}x{config.block_n}")
    tiles = f"{grid['tiles']} tiles of {shape}" + (
        f", K cut in {config.split_k} slices: {grid['units']} programs," if config.split_k > 1 else "")
    at_once = "one program per SM" if grid["per_sm"] == 1 else f"up to {grid['per_sm']} programs per SM"
    full = grid["last_round_full"]
    if grid["rounds"] <= 1:
        where = f"{full:.0%} of one round"
    else:
        where = f"{grid['rounds']:.2f} rounds, the last {full:.0%} full"
    idle = ("; SMs idle in the last round are where the power-of-two tiles trail cuBLAS most, whose tiles of "
            "other sizes fill the rounds (docs/kernel-notes.md, \"Mid-size GEMMs\")" if grid["idle_costs"] else "")
    return f"grid: {tiles} on {grid['programs']} SMs, {at_once}: {where}{idle}"


def _render(what: str, problem: Problem, name: str, out: dict) -> None:
    """One GEMM's ranking as a table, then the pick and why."""
    from autokernel import autotune, route
    from autokernel.config import KernelConfig

    winner = KernelConfig.from_dict(out["config"])
    title = f"{escape(problem.label())} on {escape(name)}: predicted GPU time per call"
    table = Table(title=f"{escape(what)}: {title}" if what else title)
    table.add_column("", no_wrap=True)
    table.add_column("config")
    table.add_column("from")
    table.add_column("predicted µs", justify="right")
    table.add_column("±", justify="right")
    table.add_column("scored as")
    for s in out["ranked"]:
        table.add_row("→" if s["config"] == out["config"] else "", escape(s["label"]), escape(s["source"]),
                      "-" if s["predicted_us"] is None else f"{s['predicted_us']:.1f}",
                      "" if s["error"] is None or s["predicted_us"] is None else f"{math.exp(s['error']) - 1:.0%}",
                      "" if s["scored_as"] in (None, s["label"]) else escape(s["scored_as"]))
    print_table(table)
    console.print(escape(f"picks {winner.short()} [{out['source']}]: {out['reason']}"), soft_wrap=True)
    close = out["close_calls"]
    if close and close["configs"] and out["ranked"] and out["ranked"][0]["config"] != out["config"]:
        # The model kept the pick against a faster prediction it cannot trust: a race settles it.
        console.print(escape(f"{close['configs']} other config{'s' if close['configs'] > 1 else ''} predicted within "
                             f"the model's error of the pick (±{close['within']:.0%}): with {autotune.ENV}=1 the "
                             f"first call races the best {autotune.MAX_CANDIDATES} and keeps the fastest"),
                      soft_wrap=True)
    excess = out["epilogue_excess_us"]
    if excess:
        console.print(escape(f"the {problem.activation} epilogue costs {excess['tma']:.1f} µs more here on the TMA "
                             f"kernel's 4-warp tiles of 128x128 and more ({excess['pointer']:.1f} on the pointer "
                             "kernels'): one warp per SM sub-partition cannot hide its math; the predictions "
                             "include it"), soft_wrap=True)
    if out["stream_k_tail"]:
        console.print(escape(f"stream-K tail: {out['stream_k_tail']}"), soft_wrap=True)
    if out.get("grid"):
        console.print(escape(_grid_line(winner, out["grid"])), soft_wrap=True)
    if out.get("padded"):
        which = " and ".join(out["padded"])
        console.print(escape(f"{which}'s rows are no multiple of 16 bytes: each call copies "
                             f"{'them' if len(out['padded']) > 1 else 'it'} first into rows that are, and the "
                             "pick runs on the copies (autokernel.plans.Padding)"), soft_wrap=True)
    if out.get("sector_split"):
        from autokernel.select import SPLIT_ROW_BANDWIDTH

        which = " and ".join(out["sector_split"])
        console.print(escape(f"the rows of {which} are an odd multiple of 16 bytes: every other row starts mid-way "
                             "through a 32-byte sector, and a tile's K loop loads such rows no faster than "
                             f"{SPLIT_ROW_BANDWIDTH['tma'] / 1e9:.0f} GB/s per SM on the TMA kernel "
                             f"({SPLIT_ROW_BANDWIDTH['pointer'] / 1e9:.0f} on the pointer kernels); the "
                             "predictions include it"), soft_wrap=True)
    if out.get("c_rows_unaligned"):
        from autokernel.kernels.matmul_tma import POINTER_C_K_PER_ROW, POINTER_C_MIN_K

        how = ("the TMA kernel moves A and B by descriptors and stores C through pointers"
               if out["c_rows_unaligned"] == "pointers" else
               f"with K under min({POINTER_C_MIN_K}, {POINTER_C_K_PER_ROW} M) the pointer kernels run it")
        console.print(escape(f"C's rows ({problem.n} elements) are no multiple of 16 bytes and take no TMA "
                             f"descriptor: {how}"), soft_wrap=True)
    where = out["route"]
    if where["cublas_us"] is not None:
        runs = "on cuBLAS" if where["library"] == "cublas" else "on Triton"
        now = "runs" if where["backend"] == "auto" else f"would run (with {route.ENV}=auto)"
        tables = where.get("cublas_by_table") or []
        mean = "" if len(tables) < 2 else " (the geometric mean of " + ", ".join(
            f"{t['us']:.1f} by {t['table']}'s table" + ("" if t["table"] == name else ", carried")
            for t in tables) + ")"
        console.print(escape(f"cuBLAS (torch) is predicted {where['cublas_us']:.1f} µs{mean}: this GEMM {now} {runs}; "
                             f"{where['reason']}"), soft_wrap=True)
    elif where["library"] == "triton" and where["triton_us"] is not None:
        now = "runs" if where["backend"] == "auto" else f"would run (with {route.ENV}=auto)"
        console.print(escape(f"this GEMM {now} on Triton: {where['reason']}"), soft_wrap=True)
    if out["model_carried"]:
        console.print(escape(f"no model was fitted for this GPU: the selector's model was {out['model_carried']} "
                             "(the datasheets' ratios)"), soft_wrap=True)


def _render_layer_route(routes: list[dict]) -> None:
    """Under ``auto``, what runs the whole layer: torch's own linear and autograd where at
    least one of its three GEMMs routes to cuBLAS and cuBLAS is predicted no slower on the
    others (``autograd.whole_layer_on_torch``), else autokernel's autograd with each GEMM
    where it routes."""
    from autokernel import route

    now = "runs" if routes[0]["backend"] == "auto" else f"would run (with {route.ENV}=auto)"
    libraries = [r["library"] for r in routes]
    runs, tied = _layer_runs(routes)
    if all(lib == "cublas" for lib in libraries):
        how = "torch's own linear and autograd: its three GEMMs all route to cuBLAS"
    elif runs == "torch's linear":
        left = " and ".join(what for what, tie in zip(("the forward", "dX", "dW"), tied) if tie)
        how = (f"torch's own linear and autograd: cuBLAS is predicted faster on {left} too, by less than "
               f"{route.MARGIN:.0%}, and the layer's Python and launches are then torch's alone")
    else:
        places = ", ".join(f"{what} on {'cuBLAS' if lib == 'cublas' else 'Triton'}"
                           for what, lib in zip(("forward", "dX", "dW"), libraries))
        how = f"autokernel's autograd ({places})"
    console.print(escape(f"the layer in training {now} on {how}"), soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command(name="explain")(explain)

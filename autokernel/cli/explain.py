"""`autokernel explain`: which config autokernel.matmul picks for a problem, and why."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from autokernel.cli._common import JsonOpt, console, fail, print_json, print_table, require_kernel_device, user_errors
from autokernel.records import ConfigError, Problem

# torch and Triton load only in commands that run kernels: torch and the modules that import
# it (runtime, best) are imported inside the function that uses them.


def explain(
    m: Annotated[int, typer.Option("--m", help="M (rows of A and C).")],
    n: Annotated[int, typer.Option("--n", help="N (columns of B and C).")],
    k: Annotated[int, typer.Option("--k", help="K (the reduction dimension).")],
    dtype: Annotated[str, typer.Option("--dtype", "-d", help="float16/fp16 or bfloat16/bf16.")] = "float16",
    layout: Annotated[str, typer.Option(help="nn, nt (nn.Linear's weight), tn or tt.")] = "nt",
    activation: Annotated[str, typer.Option("--activation", "-a", help="The fused activation.")] = "none",
    bias: Annotated[bool, typer.Option("--bias", help="With a bias.")] = False,
    device: Annotated[str | None, typer.Option(
        help="The GPU to explain for, by name (e.g. 'NVIDIA H100 80GB HBM3'); default: this machine's. "
             "Works without that GPU: the model is data.")] = None,
    top: Annotated[int, typer.Option(help="How many ranked configs to show.")] = 12,
    json_out: JsonOpt = False,
) -> None:
    """Show the configs the selector ranked for a problem, their predicted times, and why the
    winner won: a tuned entry for exactly the problem, else the selector's choice among its
    candidates, nearby tuned entries and the default. Predictions come from the model fitted
    for the GPU (autokernel/configs/selector/); nothing is launched or timed."""
    import torch

    from autokernel import best, runtime, select
    from autokernel.kernels.matmul_tma import describe_tail

    if top < 1:
        fail(f"--top must be >= 1, got {top}")
    if device is not None and not device.strip():
        fail("--device is empty: name a GPU (e.g. h100), or leave --device out for this machine's")
    with user_errors():
        problem = Problem(m, n, k, dtype, activation, bias, layout)
    if problem.torch_dtype == torch.float32:
        fail("the selector ranks float16 and bfloat16 problems; float32 takes the default config")
    if device is None:
        require_kernel_device()
    name = device or runtime.device_name()
    if device is not None:  # a part of a shipped model's name ("h100") names that GPU
        shipped = sorted((best.SHIPPED_DIR / "selector").glob("*.json"))
        matches = [p.stem for p in shipped if best.device_key(device) in p.stem]
        if best.device_key(device) not in [p.stem for p in shipped] and len(matches) == 1:
            name = matches[0]
    try:
        found = best.pick(m, n, k, problem.torch_dtype, problem.activation, bias, layout, device=name, rank=True)
    except ConfigError as exc:
        fail(str(exc))
    if found.choice is None:
        fail(f"no selector model for {name}: autokernel.matmul takes a tuned entry for exactly the problem, "
             "else the default config there")
    winner, source, reason, choice = found.config, found.source, found.reason, found.choice
    ranked = choice.ranked[:top]
    tail = None
    if winner.stream_k and select.kernel_kind(winner, select.tma_aligned(m, n, k, problem.torch_dtype, layout)) == "tma":
        tail = describe_tail(-(-m // winner.block_m) * -(-n // winner.block_n), best.selector_model(name).programs,
                             -(-k // winner.block_k))
    if json_out:
        print_json({"problem": problem.to_dict(), "device": name, "config": winner.model_dump(), "source": source,
                    "reason": reason, "stream_k_tail": tail,
                    "ranked": [{"config": s.config.model_dump(), "label": s.config.short(),
                                                  "source": s.source, "predicted_us": s.predicted_us,
                                                  "scored_as": s.scored_as.short() if s.scored_as else None}
                                                 for s in ranked]})
        return
    table = Table(title=f"{escape(problem.label())} on {escape(name)}: predicted GPU time per call")
    table.add_column("", no_wrap=True)
    table.add_column("config")
    table.add_column("from")
    table.add_column("predicted µs", justify="right")
    table.add_column("scored as")
    for s in ranked:
        table.add_row("→" if s.config == winner else "", escape(s.config.short()), escape(s.source),
                      "-" if s.predicted_us is None else f"{s.predicted_us:.1f}",
                      "" if s.scored_as in (None, s.config) else escape(s.scored_as.short()))
    print_table(table)
    console.print(escape(f"picks {winner.short()} [{source}]: {reason}"), soft_wrap=True)
    if tail:
        console.print(escape(f"stream-K tail: {tail}"), soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command(name="explain")(explain)

"""What the llm strategy tells the model, and the JSON shape it asks for back.

The prompt states everything the model cannot guess: the device and its limits, the
problem, each parameter's allowed values and meaning and the rules between them (both
from autokernel/knobs.py), the rules ``SearchSpace.why_invalid`` adds for the device and
the problem (with this problem's numbers filled in), the best trials so far and recent
failures with their reasons.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, Sequence

from pydantic import BaseModel, ConfigDict, create_model

from autokernel import knobs, runtime
from autokernel.config import KernelConfig
from autokernel.records import Trial
from autokernel.tuning.space import _MAX_ACC_REGS, PARAMS, SearchSpace, _next_pow2, config_key, thinnest_tile

TOP_TRIALS = 10
RECENT_FAILURES = 8
TRIED_LISTED = 100  # beyond this many other tried configs, the list costs more tokens than dedup saves
ALLOWED_LISTED = 400  # a replayed sweep's configs: ~220 on the H100
_ERROR_CHARS = 160

SYSTEM_PROMPT = (
    "You are an expert in GPU performance tuning of Triton GEMM kernels. You choose launch "
    "configurations (tile sizes, grouping, warps, pipeline stages) for one matrix "
    "multiplication from its measured history, to find the fastest configuration in as few "
    "trials as possible. Reply with JSON only."
)


@dataclass(frozen=True)
class Device:
    """What the prompt says about where the kernels run."""

    name: str
    sms: int | None
    smem_bytes: int | None
    tma: bool
    interpreter: bool

    @classmethod
    def current(cls, space: SearchSpace) -> "Device":
        """The device ``space`` is for: this machine's, or a replayed GPU sweep's on a CPU."""
        interpreter = not space.gpu
        here = interpreter == runtime.INTERPRETER
        name = runtime.device_name() if here else "not known here (the trials are replayed from a recorded GPU sweep)"
        return cls(name, runtime.sm_count() if here else None, space.smem_limit, space.tma, interpreter)


class _Proposal(BaseModel):
    model_config = ConfigDict(extra="forbid")


def reply_model(space: SearchSpace) -> type[BaseModel]:
    """The reply as a pydantic model whose JSON schema (every field required, no extra
    keys, each parameter an enum of its allowed values) meets OpenAI's strict structured
    outputs; servers with guided decoding (vLLM, llama.cpp) then produce only values of
    the space."""
    fields = {name: (Literal[tuple(space.choices[name])], ...) for name in PARAMS}
    proposal = create_model("KernelConfigProposal", __base__=_Proposal, rationale=(str, ...), **fields)
    return create_model("KernelConfigs", __base__=_Proposal, configs=(list[proposal], ...))


def response_format(space: SearchSpace) -> dict:
    """The ``response_format`` of a json_schema request for ``space``."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "kernel_configs", "strict": True, "schema": reply_model(space).model_json_schema()},
    }


def _values(config: KernelConfig) -> str:
    return json.dumps({name: getattr(config, name) for name in PARAMS}, separators=(",", ":"))


def _device_lines(device: Device) -> list[str]:
    if device.interpreter:
        return [f"- {device.name}: kernels run under Triton's CPU interpreter; times measure Python "
                "work per program, not a GPU, and there is no shared-memory or register limit."]
    lines = [f"- GPU: {device.name}"]
    if device.sms is not None:
        lines.append(f"- streaming multiprocessors (SMs): {device.sms}; the grouped kernel runs one program "
                     "per tile of C, ceil(M/block_m) * ceil(N/block_n) of them, in waves over the SMs")
    if device.smem_bytes is not None:
        lines.append(f"- shared memory per program: {device.smem_bytes} bytes ({device.smem_bytes // 1024} KiB)")
    lines.append(f"- TMA (Hopper tensor descriptors): {'available' if device.tma else 'not available'}")
    return lines


def _problem_lines(space: SearchSpace) -> list[str]:
    p = space.problem
    intensity = p.flops / p.bytes if p.bytes else 0.0
    expr = f"A[M, K] @ B[K, N]{' + bias[N]' if p.bias else ''}"
    return [
        f"- C[M, N] = {expr if p.activation == 'none' else f'{p.activation}({expr})'} with M={p.m}, N={p.n}, K={p.k}",
        f"- dtype {p.dtype} ({p.torch_dtype.itemsize} bytes per element), fp32 accumulation",
        f"- layout {p.layout!r} (A {'transposed' if p.layout[0] == 't' else 'row-major'}, "
        f"B {'transposed' if p.layout[1] == 't' else 'row-major'})",
        f"- {p.flops:.4g} FLOPs, at least {p.bytes:.4g} bytes moved, {intensity:.1f} FLOPs per byte",
    ]


def _kernel_lines() -> list[str]:
    """The kernels a config selects among (knobs.KERNELS)."""
    return [f"- {name}: {what}" for name, what in knobs.KERNELS.items()]


def _knob_lines(space: SearchSpace) -> list[str]:
    """Each knob of the space (knobs.py) with the values it may take here and what it means."""
    return [f"- {name}: {', '.join(json.dumps(v) for v in values)}: {knobs.KNOB[name].describe()}"
            for name, values in space.choices.items()]


def _rule_lines(space: SearchSpace) -> list[str]:
    """The knobs' rules (knobs.RULES, KernelConfig's and the space's) that a config of
    ``space``'s values can break."""
    def can_leave_default(name: str) -> bool:
        return any(v != knobs.KNOB[name].default for v in space.choices[name])

    return [f"- {rule.statement}" for rule in knobs.RULES
            if rule.statement and (not rule.when or any(can_leave_default(name) for name in rule.when))]


def _constraint_lines(space: SearchSpace) -> list[str]:
    """The rules of ``SearchSpace.why_invalid`` in words: the knobs' own, then those of
    the device and the problem, with this problem's numbers."""
    p = space.problem
    elem = p.torch_dtype.itemsize
    lines = _rule_lines(space)
    if "tma" in space.choices["variant"]:
        lines.append("- variant \"tma\" needs a Hopper GPU and float16/bfloat16"
                     + ("" if space.tma or runtime.INTERPRETER else " (this device cannot run it)"))
    if space.smem_limit is not None:
        lines.append(
            f"- shared memory: num_stages * (block_m*block_k + block_k*block_n) * {elem} bytes, plus "
            f"block_m*block_n*{elem} / epilogue_subtile bytes unless variant is \"grouped\", "
            f"must be <= {space.smem_limit}")
    if space.gpu:
        lines.append(f"- block_m * block_n / (32 * num_warps * ({knobs.WS_CONSUMER_GROUPS} if warp_specialize else 1)) "
                     f"<= {_MAX_ACC_REGS} (fp32 accumulator registers per thread; beyond it the kernel spills)")
        for dim, size in (("block_m", p.m), ("block_n", p.n)):
            lines.append(f"- {dim} >= {thinnest_tile(size)} ({thinnest_tile(size, 'tma')} with variant \"tma\") "
                         f"(thinner tiles only pay where the problem is that thin)")
    for dim, size, letter in (("block_m", p.m, "M"), ("block_n", p.n, "N"), ("block_k", p.k, "K")):
        cap = max(min(space.choices[dim]), _next_pow2(max(size, 1)))
        if cap < max(space.choices[dim]):
            lines.append(f"- {dim} <= {cap} (a larger tile than {letter}={size} rounded up only computes padding)")
    lines.append("- group_m no larger than the smallest allowed group_m >= ceil(M / block_m) "
                 "(larger groups behave the same)")
    return lines


def _error(o: Trial) -> str:
    text = o.error if isinstance(o.error, str) and o.error else "no message"  # NaN in a read history
    return " ".join(text.split())[:_ERROR_CHARS]


def _trial_line(o: Trial, flops: int) -> str:
    tflops = flops / (o.rank_ms * 1e9) if o.rank_ms else 0.0
    return f"- {_values(o.config)} -> {o.rank_ms:.4g} ms ({tflops:.3g} TFLOPS)"


def user_prompt(space: SearchSpace, history: Sequence[Trial], n: int, device: Device) -> str:
    """The request for ``n`` new configs, given everything measured so far."""
    p = space.problem
    best = sorted((o for o in history if o.timed), key=lambda o: o.rank_ms)[:TOP_TRIALS]
    failed = [o for o in history if not o.timed][-RECENT_FAILURES:]
    shown = {_values(o.config) for o in best + failed}
    others = list(dict.fromkeys(v for v in (_values(o.config) for o in history) if v not in shown))

    parts = ["Device:", *_device_lines(device), "", "Problem:", *_problem_lines(space), "",
             "Kernels (a config runs stream-K where stream_k, else split-K where split_k > 1, else its variant's):",
             *_kernel_lines(), "", "Parameters, their allowed values and what they mean:", *_knob_lines(space)]
    parts += ["", "Every config must also satisfy:", *_constraint_lines(space), ""]
    ok_count = sum(o.timed for o in history)
    parts.append(f"History: {len(history)} trials, {ok_count} succeeded.")
    if best:
        parts += [f"Fastest trials (of {ok_count}), best first:", *(_trial_line(o, p.flops) for o in best)]
    else:
        parts.append("No successful trial yet.")
    if failed:
        parts.append("Recent failures and why:")
        parts += [f"- {_values(o.config)} -> {o.status}: {_error(o)}" for o in failed]
    if others:
        parts.append("Other configs already tried (do not repeat):")
        parts += [f"- {v}" for v in others[-TRIED_LISTED:]]
    if space.allowed is not None:
        tried = {config_key(o.config) for o in history}
        left = [dict(zip(PARAMS, key)) for key in sorted(space.allowed - tried, key=str)]
        parts.append(f"Only these {len(left)} untried configs can be measured (a recorded sweep); choose among them:")
        parts += [f"- {json.dumps(v, separators=(',', ':'))}" for v in left[:ALLOWED_LISTED]]
    parts += [
        "",
        f"Propose {n} new configs, all different, none already tried, that you expect to beat "
        "the fastest so far (or, with no history, to be fast), balancing exploration and "
        "exploitation. For each give a one-line rationale.",
        'Reply with JSON only, of the form {"configs": [{"rationale": "one line", '
        + ", ".join(f'"{name}": ...' for name in PARAMS) + "}]}.",
    ]
    return "\n".join(parts)


def repair_prompt(reasons: Sequence[str], wanted: int) -> str:
    """The follow-up that sends rejected configs back once, with why."""
    listed = "\n".join(f"- {r}" for r in reasons)
    return (f"These parts of your reply were rejected:\n{listed}\n\n"
            f"Reply with {wanted} replacement configs that satisfy every rule above, differ from "
            "each other, from your accepted configs and from every config already tried, in the same "
            "JSON form, each with a one-line rationale.")

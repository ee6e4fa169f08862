"""GPU smoke test of tuning.worker: 12 configs of one problem (one needs more shared memory
than the GPU has, three take the TMA kernel) through WorkerEvaluator's two phases, twice
(a cold Triton cache, then the same workers again), with each trial's ms (events, L2
flushed) and gpu_ms (CUDA-graph replay) and each phase's wall time; then re-times the
winner and runner-up when the winner is suspiciously far ahead.

With --bad, two injected candidates run first in the timing worker: one makes an illegal
memory access (the CUDA context is poisoned: the worker must be replaced) and one spins
in a kernel for ever (the worker must be killed at --timeout). Every good candidate must
still succeed.

Run on the device: source scripts/device_env.sh; python3 scripts/worker_smoke.py [--bad] [--shape M N K]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
import triton
import triton.language as tl

from autokernel import runtime
from autokernel.config import KernelConfig
from autokernel.evaluate import Trial, evaluate
from autokernel.records import Problem
from autokernel.tuning.evaluator import suspicious_pair
from autokernel.tuning.worker import WorkerEvaluator

CONFIGS = [
    dict(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="grouped"),
    dict(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma"),
    dict(block_m=256, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="grouped"),
    dict(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=4, variant="grouped"),
    dict(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="grouped"),
    dict(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="tma"),
    dict(block_m=64, block_n=128, block_k=128, group_m=8, num_warps=4, num_stages=4, variant="grouped"),
    dict(block_m=128, block_n=128, block_k=128, group_m=8, num_warps=8, num_stages=3, variant="grouped"),
    dict(block_m=64, block_n=64, block_k=128, group_m=8, num_warps=4, num_stages=4, variant="grouped"),
    dict(block_m=128, block_n=256, block_k=64, group_m=16, num_warps=8, num_stages=4, variant="tma"),
    dict(block_m=128, block_n=128, block_k=32, group_m=1, num_warps=4, num_stages=5, variant="grouped"),
    # ~640 KiB of shared memory: out_of_resources, from the compile phase.
    dict(block_m=256, block_n=256, block_k=128, group_m=8, num_warps=8, num_stages=5, variant="grouped"),
]
# Injected with --bad (group_m marks them; the timing worker's task below acts on it).
ILLEGAL_ACCESS = KernelConfig(block_m=64, block_n=64, block_k=64, group_m=63, num_warps=4, num_stages=3)
SPIN = KernelConfig(block_m=64, block_n=64, block_k=64, group_m=62, num_warps=4, num_stages=3)


@triton.jit
def _store_far(ptr, offset):
    tl.store(ptr + offset, 1.0)


@triton.jit
def _spin(ptr, n):
    acc = tl.load(ptr)
    for _ in range(n):
        acc = acc * 1.0000001 + 1.0
    tl.store(ptr, acc)


def smoke_evaluate(problem: Problem, config: KernelConfig) -> Trial:
    """The timing worker's task: the bad candidates misbehave on the GPU, the rest are evaluated."""
    if config in (ILLEGAL_ACCESS, SPIN):
        x = torch.zeros(16, device="cuda")
        if config == ILLEGAL_ACCESS:
            _store_far[(1,)](x, 1 << 40)
        else:
            _spin[(1,)](x, 1 << 62)
        torch.cuda.synchronize()
    return evaluate(problem, config, graph_time=True)


def show(trial: Trial, clock: list[float]) -> None:
    now = time.perf_counter()
    wall, clock[0] = now - clock[0], now
    ms = f"{trial.ms:.4f}" if trial.ms is not None else "-"
    gpu = f"{trial.gpu_ms:.4f}" if trial.gpu_ms is not None else "-"
    tf = f"{trial.tflops:.0f}" if trial.tflops is not None else "-"
    print(f"  +{wall:6.2f}s  {trial.config.short():32s} {trial.status:16s} ms {ms:>8s}  gpu_ms {gpu:>8s}  "
          f"TFLOP/s {tf:>4s}  {trial.note or ''} {trial.error or ''}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", type=int, nargs=3, default=(4096, 4096, 4096), metavar=("M", "N", "K"))
    parser.add_argument("--bad", action="store_true", help="also an illegal memory access and a kernel that spins")
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args()
    # A fresh on-disk cache, so the first pass really compiles (the workers inherit it).
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")

    problem = Problem(*args.shape, "float16", "relu", bias=True)
    configs = ([ILLEGAL_ACCESS, SPIN] if args.bad else []) + [KernelConfig(**c) for c in CONFIGS]
    print(f"{runtime.device_name()} torch {torch.__version__}; {problem.label()}; "
          f"{len(configs)} configs; {os.cpu_count()} CPUs", flush=True)
    evaluator = WorkerEvaluator(evaluate_fn=smoke_evaluate if args.bad else None, timeout_s=args.timeout)
    with evaluator:
        for label in ("cold Triton cache, fresh workers", "the same workers again"):
            print(label, flush=True)
            clock = [time.perf_counter()]
            start = clock[0]
            trials = evaluator.evaluate(problem, configs, on_trial=lambda t: show(t, clock))
            phases = ", ".join(f"{k} phase {v:.1f} s" for k, v in evaluator.phase_s.items())
            ok = sum(t.ok for t in trials)
            print(f"  {phases}; total {time.perf_counter() - start:.1f} s; {ok}/{len(trials)} succeeded", flush=True)
        pair = suspicious_pair(trials)
        if pair is None:
            print("no suspicious winner: nothing re-timed")
        else:
            print("re-timing the winner and the runner-up:", flush=True)
            clock = [time.perf_counter()]
            evaluator.retime(problem, [t.config for t in pair], on_trial=lambda t: show(t, clock))


if __name__ == "__main__":
    main()

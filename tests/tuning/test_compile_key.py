"""The compile pool's key against what the kernels' launches specialize on: two candidates
with one ``compile_key`` must launch kernels that Triton compiles to one binary, else the
pool shares one compile between them and a timing worker compiles the other while it
measures."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict

import torch

from autokernel import plans
from autokernel.kernels.launch import KernelLaunch
from autokernel.records import KernelConfig, Problem
from autokernel.tuning.worker import compile_key


def _launches(plan) -> list[KernelLaunch]:
    if isinstance(plan, KernelLaunch):
        return [plan]
    return [part for name in type(plan).__slots__ if isinstance(part := getattr(plan, name), KernelLaunch)]


def _int_spec(x: int) -> tuple:
    """What Triton keys an integer argument's binary on: divisible by 16, equal to 1, 64-bit."""
    return (x % 16 == 0, x == 1, abs(x) >= 2 ** 31)


def specialization(problem: Problem, config: KernelConfig) -> tuple:
    """Each launched kernel's name, its integer arguments' specialization and its
    constexprs and options, for ``problem``'s operands as tuning makes them."""
    a, b, bias = problem.make_inputs("cpu", seed=0)
    out = torch.empty(problem.m, problem.n, dtype=a.dtype)
    plan = plans._plan_kernel(a, b, out, bias, problem.activation, 0.01, config, None)
    return tuple(
        (launch.fn.__name__,
         tuple(_int_spec(x) for x in launch.scalars if isinstance(x, int) and not isinstance(x, bool)),
         tuple(sorted(launch.kwargs.items())))
        for launch in _launches(plan))


def test_one_key_means_one_binary():
    """Problems of many shapes under pointer, TMA, split-K and stream-K configs: wherever two
    share a key, their launches specialize alike. Shapes are drawn so that keys collide
    (M, N, K with equal residues mod 16) while tile counts and K steps per slice differ."""
    rng = random.Random(7)
    configs = [
        KernelConfig(block_m=bm, block_n=bn, block_k=bk, num_warps=1, num_stages=2, variant="grouped",
                     split_k=sk, stream_k=stream)
        for bm, bn, bk in ((16, 16, 16), (32, 16, 32))
        for sk, stream in ((1, False), (2, False), (4, False), (1, True))
    ] + [KernelConfig(block_m=32, block_n=32, block_k=32, num_warps=1, num_stages=2, variant="tma")]
    sizes = [16 * rng.randrange(1, 40) + r for r in (0, 0, 0, 5) for _ in range(3)]
    groups: dict[tuple, set] = defaultdict(set)
    members: dict[tuple, int] = defaultdict(int)
    for (m, n, k), config in itertools.product(itertools.product(sizes[:6], sizes[:6], sizes), configs):
        problem = Problem(m, n, k, "float16")
        key = compile_key(problem, config)
        groups[key].add(specialization(problem, config))
        members[key] += 1
    mixed = {key: specs for key, specs in groups.items() if len(specs) > 1}
    assert not mixed, f"{len(mixed)} keys cover launches that compile apart, e.g. {next(iter(mixed.items()))}"
    shared = {key[0].split_k > 1 or key[0].stream_k for key, count in members.items() if count > 1}
    assert shared == {True, False}  # split-K / stream-K keys and plain ones both served several problems

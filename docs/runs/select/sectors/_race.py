"""What the probes of this folder share: each case checked against a float32 reference on the
first operand set, then all raced side by side (``timing.race``, GPU time), cycling over the sets."""
import torch

from autokernel.timing import race


def race_checked(cases: dict, sets: list, ref: torch.Tensor, out: int, rounds: int, segment_ms: float,
                 unchecked: tuple = ()) -> tuple[dict, dict]:
    """(largest error over the reference's largest value, µs per call) by case name; ``out``:
    the index in a set of the tensor the cases write; ``unchecked``: cases that write none."""
    err = {}
    for name, f in cases.items():
        if name in unchecked:
            continue
        f(sets[0])
        torch.cuda.synchronize()
        err[name] = round(float((sets[0][out].float() - ref).abs().max() / ref.abs().max()), 5)
    fns = []
    for f in cases.values():
        it = [0]

        def cycling(f=f, it=it):
            it[0] += 1
            return f(sets[it[0] % len(sets)])
        fns.append(cycling)
    ms = race(fns, rounds=rounds, segment_ms=segment_ms)
    return err, {name: round(t * 1e3, 2) for name, t in zip(cases, ms)}


def nt_sets(m: int, n: int, k: int, dtype: torch.dtype, device: str = "cuda") -> list:
    """Three operand sets (A, nn.Linear's weight as B = W^T, C) of an nt problem, from seeds 0-2."""
    sets = []
    for seed in range(3):
        g = torch.Generator(device=device).manual_seed(seed)
        a = torch.randn(m, k, device=device, dtype=dtype, generator=g)
        w = torch.randn(n, k, device=device, dtype=dtype, generator=g)
        sets.append((a, w.t(), torch.empty(m, n, device=device, dtype=dtype)))
    return sets

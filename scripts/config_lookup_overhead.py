"""Host time per call that the tuned-config lookup adds to autokernel.matmul / linear.

Times, in this process, api.resolve_config alone (config=None, arguments built as matmul
builds them) and whole calls at 256^3 fp16, where a call is host-bound: matmul,
matmul + bias + gelu, linear. With AUTOKERNEL_CONFIG=<file> the lookup finds a tuned
entry; without it, the default. Run it once per variant and package, alternating:
    python3 scripts/config_lookup_overhead.py [--write-best FILE]
--write-best FILE writes a best-config file for this GPU whose 256^3 entries hold the
default config (same kernel: only the host path differs) and exits.
On the CPU (interpreter) only resolve_config is timed."""
import inspect
import sys
import time
import timeit

import torch

import autokernel as ak
from autokernel import runtime
from autokernel.api import resolve_config

S = 256
if "--write-best" in sys.argv:
    from autokernel.best import SCHEMA_VERSION, BestFile

    cfg = ak.default_config(S, S, S, torch.float16).model_dump()
    entries = [{"M": S, "N": S, "K": S, "dtype": "float16", "activation": act, "bias": bias, "config": cfg}
               for act, bias in (("none", False), ("gelu", True))]
    path = sys.argv[sys.argv.index("--write-best") + 1]
    with open(path, "w") as f:
        f.write(BestFile(schema_version=SCHEMA_VERSION, device=runtime.device_name(), entries=entries).to_json())
    sys.exit(0)

dev = runtime.kernel_device()
a = torch.randn(S, S, device=dev, dtype=torch.float16)
w = torch.randn(S, S, device=dev, dtype=torch.float16)
bias = torch.randn(S, device=dev, dtype=torch.float16)
new = len(inspect.signature(resolve_config).parameters) > 5
stmt = ("resolve_config(None, S, S, S, a.dtype, 'none', None is not None, a.device)" if new
        else "resolve_config(None, S, S, S, a.dtype)")
n = 200_000
ns = min(timeit.repeat(stmt, globals=globals(), number=n, repeat=15)) / n * 1e9
print(f"{ak.__file__} on {runtime.device_name()}")
print(f"  resolve_config  {ns:8.0f} ns/call  ({stmt}; best of 15 x {n})")
if runtime.INTERPRETER:
    sys.exit(0)


def per_call_us(fn, n=3000, repeat=7):
    for _ in range(50):
        fn()
    best = float("inf")
    for _ in range(repeat):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


for name, fn in [("matmul", lambda: ak.matmul(a, w.t())),
                 ("matmul bias gelu", lambda: ak.matmul(a, w.t(), bias, "gelu")),
                 ("linear bias gelu", lambda: ak.linear(a, w, bias, "gelu"))]:
    print(f"  {name:16s} {per_call_us(fn):8.2f} us/call (best of 7 x 3000)")

"""Spellings of the exact gelu's normal CDF, raced on fixed tiles (timing.race, GPU time, bf16, nt, bias):
each spelling is this checkout's package copied under another name with `_normal_cdf`'s body replaced,
beside this checkout's own ("now"), gelu_tanh and the plain GEMM on the same config. Prints the µs each
adds to the plain GEMM. Usage: python3 docs/runs/kernels/gelu_spellings.py [--all]"""
import importlib
import pathlib
import re
import shutil
import sys
import tempfile

import torch

import autokernel as ak
from autokernel.records import KernelConfig
from autokernel.timing import race

NR9 = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
       -0.82215223, 0.17087277)  # Numerical Recipes' erfc fit, t = 1 / (1 + a / 2)
FIT6 = (-1.538625717165519, 0.9786274597598343, 0.5684596190201272, -0.2960231205963449, 0.9738338093234622,
        -0.9643893260853748, 0.2781180470309098)  # the degree-6 minimax fit, t = 1 / (1 + 0.38 a)
LOG2E = 1.4426950408889634
MUFU = {"rcp": "    if _HW_MATH:\n        t = _rcp_approx({x})\n    else:\n        t = 1.0 / ({x})\n",
        "ex2": "    if _HW_MATH:\n        e = _ex2_approx(y)\n    else:\n        e = tl.math.exp2(y)\n"}


def poly(coefs, name, estrin):
    """The polynomial in t: Horner, or Estrin's pairs in t^2 (degree 6 only)."""
    c = [repr(float(x)) for x in coefs]
    if estrin:
        return (f"    t2 = t * t\n    {name} = tl.fma(t2, {c[6]}, tl.fma(t, {c[5]}, {c[4]}))\n"
                f"    {name} = tl.fma(t2, {name}, tl.fma(t, {c[3]}, {c[2]}))\n"
                f"    {name} = tl.fma(t2, {name}, tl.fma(t, {c[1]}, {c[0]}))\n")
    s = f"    {name} = tl.fma(t, {c[-1]}, {c[-2]})\n"
    return s + "".join(f"    {name} = tl.fma(t, {name}, {x})\n" for x in reversed(c[:-2]))


def plain_form(T, P, square="a * a", estrin=False):
    """erfc(a) = t exp(P(t) - a^2) in natural units, the 1/2 applied last."""
    return ("    a = tl.abs(z) * 0.7071067811865476\n" + MUFU["rcp"].format(x=f"1.0 + {T!r} * a") + poly(P, "p", estrin)
            + f"    y = (p - {square}) * 1.4426950408889634\n" + MUFU["ex2"] + "    half_erfc = 0.5 * (t * e)\n")


def folded_form(T, P, estrin=False):
    """The same in base 2 with log2(e) and the 1/2 folded into the coefficients: fewer instructions."""
    Q = [c * LOG2E for c in P]
    Q[0] -= 1.0
    return (f"    d = tl.fma(tl.abs(z), {T * 0.7071067811865476!r}, 1.0)\n" + MUFU["rcp"].format(x="d") + poly(Q, "q", estrin)
            + f"    y = tl.fma(z * z, {-0.5 * LOG2E!r}, q)\n" + MUFU["ex2"] + "    half_erfc = t * e\n")


SPELLINGS = {"nr9": plain_form(0.5, NR9), "fit6 a*a": plain_form(0.38, FIT6), "fit6 estrin folded": folded_form(0.38, FIT6, True)}
if "--all" in sys.argv:
    SPELLINGS |= {"fit6 folded": folded_form(0.38, FIT6), "nr9 folded": folded_form(0.5, NR9),
                  "fit6 estrin": plain_form(0.38, FIT6, estrin=True)}


def load(name: str, body: str):
    """This checkout's package as autokernel_<name>, its _normal_cdf's body replaced."""
    mod = "autokernel_" + re.sub(r"\W", "_", name)
    root = pathlib.Path(tempfile.mkdtemp())
    shutil.copytree(pathlib.Path(ak.__file__).parent, root / mod, ignore=shutil.ignore_patterns("__pycache__"))
    for f in (root / mod).rglob("*.py"):
        f.write_text(re.sub(r"\bautokernel\b", mod, f.read_text()))
    ep = root / mod / "kernels" / "epilogue.py"
    src = ep.read_text()
    head = src.index('NaN stays NaN."""\n', src.index("def _normal_cdf")) + len('NaN stays NaN."""\n')
    ep.write_text(src[:head] + body + src[src.index("    return tl.where(z < 0.0, half_erfc", head):])
    sys.path.insert(0, str(root))
    return importlib.import_module(mod)


MODS = {"now": ak} | {name: load(name, body) for name, body in SPELLINGS.items()}
TILES = [dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, flatten=True),
         dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4, flatten=True),
         dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=5, flatten=True),
         dict(block_m=64, block_n=256, block_k=64, num_warps=4, num_stages=4, flatten=True),
         dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3, variant="grouped"),
         dict(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4, variant="grouped")]
dt = torch.bfloat16
for m, n, k in [(4096, 4096, 4096), (8192, 4096, 1024), (4096, 3072, 768), (2048, 3072, 768), (512, 4096, 1024)]:
    x = torch.randn(m, k, device="cuda", dtype=dt)
    w = torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5
    bias = torch.randn(n, device="cuda", dtype=dt)
    fns, names = [], []
    for ti, tile in enumerate(TILES):
        cfg = KernelConfig(group_m=8, **{"variant": "tma", **tile})
        o = torch.empty(m, n, device="cuda", dtype=dt)
        for act in (None, "gelu_tanh"):
            fns.append(lambda cfg=cfg, o=o, act=act: ak.matmul(x, w.t(), bias, act, config=cfg, out=o))
            names.append((ti, act or "plain"))
        for name, mod in MODS.items():
            c = mod.KernelConfig(**cfg.model_dump())
            fns.append(lambda mod=mod, c=c, o=o: mod.matmul(x, w.t(), bias, "gelu", config=c, out=o))
            names.append((ti, name))
    for f in fns:
        f()
    us = dict(zip(names, (t * 1e3 for t in race(fns, rounds=16, segment_ms=2.0))))
    for ti, tile in enumerate(TILES):
        p = us[ti, "plain"]
        print(f"{m}x{n}x{k} {tile.get('variant', 'tma')} {tile['block_m']}x{tile['block_n']} w{tile['num_warps']}: "
              f"plain {p:.1f} us; over plain: gelu_tanh +{us[ti, 'gelu_tanh'] - p:.1f}, "
              + ", ".join(f"{name} +{us[ti, name] - p:.1f}" for name in MODS), flush=True)

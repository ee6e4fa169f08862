"""The three GEMMs of a linear layer's training step (forward nt, dX nn, dW tn) at LLM sizes:
matmul's own pick against torch.mm on the same views, GPU time side by side (timing.race).
    python3 docs/runs/select/train_gemms.py OUT.jsonl
"""
import json, sys
import torch
sys.path.insert(0, "benchmarks")
from select_sweep import _call
from autokernel import api, matmul
from autokernel.records import Problem
from autokernel.timing import GRAPH_INPUT_SETS, make_input_sets, race

layers = {"llama3-8b": [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)],
          "qwen2.5-7b": [(4608, 3584), (3584, 3584), (37888, 3584), (3584, 18944)]}
dev = torch.device("cuda")
res = []
with open(sys.argv[1], "w") as f:
    for model, lins in layers.items():
        for tokens in (4096, 8192):
            for n, k in lins:
                for kind, prob in (("fwd", Problem(tokens, n, k, "bfloat16", layout="nt")),
                                   ("dx", Problem(tokens, k, n, "bfloat16", layout="nn")),
                                   ("dw", Problem(n, k, tokens, "bfloat16", layout="tn"))):
                    def make(i, p=prob):
                        a, b, _ = p.make_inputs(dev, seed=5000 + i)
                        return a, b, None, torch.empty(p.m, p.n, dtype=p.torch_dtype, device=dev)
                    sets = make_input_sets(make, prob.bytes, GRAPH_INPUT_SETS)
                    a0, b0, _, o0 = sets[0]
                    cfg = api.resolve_config(None, prob.m, prob.n, prob.k, prob.torch_dtype, "none", False, dev,
                                             tma=api.tma_runs(a0, b0, o0), layout=prob.layout)
                    ref = a0.float() @ b0.float()
                    err = float((matmul(a0, b0).float() - ref).norm() / ref.norm())
                    t_ours, t_torch = race([_call(sets, lambda a, b, bias, out: matmul(a, b, out=out)),
                                            _call(sets, lambda a, b, bias, out: torch.mm(a, b, out=out))],
                                           rounds=10, segment_ms=2.0)
                    row = {"model": model, "tokens": tokens, "gemm": kind, **prob.to_dict(), "config": cfg.short(),
                           "ours_us": t_ours * 1e3, "torch_us": t_torch * 1e3, "rel_error": err}
                    f.write(json.dumps(row) + "\n"); f.flush()
                    res.append(t_torch / t_ours)
                    print(f"{model} {tokens} {kind} {prob.m}x{prob.n}x{prob.k} {prob.layout} {cfg.short()}: "
                          f"ours {t_ours*1e3:.1f} torch {t_torch*1e3:.1f} -> {t_torch/t_ours:.3f}x err {err:.1e}",
                          flush=True)
import math
print("geomean torch/ours", math.exp(sum(map(math.log, res)) / len(res)))

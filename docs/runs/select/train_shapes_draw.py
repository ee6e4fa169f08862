"""Training-step GEMMs of real models' linear layers, drawn: for a layer of K inputs and N
outputs at M tokens, the forward (M x N x K, nt: X by the weight's transposed view), dX
(M x K x N, nn: dY by the weight) and dW (N x K x M, tn: dY's transposed view by X).

    python3 docs/runs/select/train_shapes_draw.py --n 130 --seed S > shapes.csv

The models of docs/runs/select/train_shapes_4096.csv (Qwen2.5 7B and 14B, Llama-3 70B) are
left out, so that file stays a held-out check of a fit on these."""
import argparse
import random

# (model, [(K in, N out), ...]) per linear: fused QKV / gate-up where the model is often
# run so, and separate projections.
MODELS = {
    "gpt2": [(768, 2304), (768, 768), (768, 3072), (3072, 768)],
    "gpt2-large": [(1280, 3840), (1280, 1280), (1280, 5120), (5120, 1280)],
    "bert-large": [(1024, 1024), (1024, 3072), (1024, 4096), (4096, 1024)],
    "llama-3.2-1b": [(2048, 3072), (2048, 2048), (2048, 512), (2048, 8192), (2048, 16384), (8192, 2048)],
    "llama-3.2-3b": [(3072, 5120), (3072, 3072), (3072, 1024), (3072, 8192), (8192, 3072)],
    "llama-3-8b": [(4096, 6144), (4096, 4096), (4096, 1024), (4096, 14336), (4096, 28672), (14336, 4096)],
    "phi-3-mini": [(3072, 9216), (3072, 3072), (3072, 16384), (8192, 3072)],
    "gemma-2-9b": [(3584, 4096), (3584, 2048), (4096, 3584), (3584, 14336), (14336, 3584)],
}
TOKENS = [1024, 2048, 3072, 6144, 8192, 16384]

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--n", type=int, default=130)
p.add_argument("--seed", type=int, required=True)
a = p.parse_args()
rng = random.Random(a.seed)
problems = set()
pool = [(k, n, m) for layers in MODELS.values() for k, n in layers for m in TOKENS]
print("M,N,K,dtype,activation,bias,layout")
while len(problems) < a.n:
    k, n, m = rng.choice(pool)
    if 2 * m * n * k > 2.5e12:  # a few seconds of sweep each: left to the large-square sweeps
        continue
    which = rng.choice([(m, n, k, "nt"), (m, k, n, "nn"), (n, k, m, "tn")])
    if which in problems:
        continue
    problems.add(which)
    mm, nn, kk, layout = which
    print(f"{mm},{nn},{kk},{rng.choice(['float16', 'bfloat16'])},none,false,{layout}")

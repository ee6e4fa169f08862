"""Write configs/shapes/broad.csv: the linear layers of public models at many token counts,
plus non-power-of-two cubes, in float16 and bfloat16.

    python3 benchmarks/broad_suite.py > configs/shapes/broad.csv

Each model's (N, K) pairs are its nn.Linear weights [out_features, in_features] as its
published configuration gives them (hidden size, MLP width, attention and key/value heads);
each pair runs at M tokens in TOKENS, in the nn.Linear layout (nt). The vocabulary
projection is left out: one per model, and at 128k columns it is a class of its own.
"""

from __future__ import annotations

import sys

TOKENS = (1, 16, 64, 128, 512, 1024, 2048, 4096, 8192)
CUBES = (1536, 2560, 3072, 3584, 5120, 6144)


def llama_like(hidden: int, mlp: int, heads: int, kv_heads: int) -> list[tuple[int, int]]:
    """q, k and v, o, gate and up, down: (N, K) of each distinct weight shape."""
    head_dim = hidden // heads
    kv = kv_heads * head_dim
    return [(hidden, hidden), (kv, hidden), (mlp, hidden), (hidden, mlp)]


MODELS: dict[str, list[tuple[int, int]]] = {
    "llama-3-8b": llama_like(4096, 14336, 32, 8),
    "llama-3-70b": llama_like(8192, 28672, 64, 8),
    "mistral-7b": llama_like(4096, 14336, 32, 8),
    "qwen2.5-7b": llama_like(3584, 18944, 28, 4),
    # GPT-2 (small): packed qkv, attention out, MLP up and down (Conv1D, the same GEMMs)
    "gpt2": [(2304, 768), (768, 768), (3072, 768), (768, 3072)],
    # BERT-large: q, k, v and attention out are 1024 x 1024; intermediate and output
    "bert-large": [(1024, 1024), (4096, 1024), (1024, 4096)],
}


def pairs() -> list[tuple[int, int]]:
    seen: list[tuple[int, int]] = []
    for shapes in MODELS.values():
        seen += [s for s in shapes if s not in seen]
    return seen


def main() -> int:
    out = sys.stdout
    out.write("M,N,K,dtype,activation,bias,layout\n")
    for dtype in ("float16", "bfloat16"):
        for n, k in pairs():
            for m in TOKENS:
                out.write(f"{m},{n},{k},{dtype},none,false,nt\n")
        for size in CUBES:
            out.write(f"{size},{size},{size},{dtype},none,false,nn\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

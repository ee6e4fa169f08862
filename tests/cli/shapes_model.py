"""Tiny models for `autokernel shapes` tests."""

import torch


def build() -> torch.nn.Module:
    """Two Linear shapes, one of them twice: once with the ReLU that follows it fused."""
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64, bias=False),
                               torch.nn.Linear(64, 128))


class Block(torch.nn.Module):
    """An MLP with a fused GELU, a torch encoder layer and a LazyLinear never run."""

    def __init__(self):
        super().__init__()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(32, 96), torch.nn.GELU(), torch.nn.Linear(96, 32))
        self.encoder = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.lazy = torch.nn.LazyLinear(16)

    def forward(self, x):
        return self.lazy(self.encoder(self.mlp(x)))


def block() -> torch.nn.Module:
    return Block()


def block_run() -> torch.nn.Module:
    """Block after one example input: the LazyLinear knows its in_features."""
    model = Block()
    model(torch.zeros(1, 3, 32))
    return model

"""A tiny model for `autokernel shapes` tests: two Linear shapes, one used twice."""

import torch


def build() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64, bias=False),
                               torch.nn.Linear(64, 128))

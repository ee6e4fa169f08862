"""autokernel: Triton GEMM kernels with fused epilogues, measured against PyTorch.

The public names are imported on first use (PEP 562), so ``autokernel --help`` and the
CLI's argument checks run without importing torch or triton. ``runtime``, imported before
any public name, decides whether kernels run on the GPU or under Triton's interpreter on
the CPU (with no CUDA device: the interpreter, whatever was imported first).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "ACTIVATIONS": "autokernel.records",
    "ConfigError": "autokernel.config",
    "KernelConfig": "autokernel.config",
    "default_config": "autokernel.config",
    "linear": "autokernel.api",
    "matmul": "autokernel.api",
    "nn": "autokernel.nn",
}

__all__ = [*sorted(_EXPORTS), "__version__"]

if TYPE_CHECKING:
    from autokernel import nn
    from autokernel.api import linear, matmul
    from autokernel.config import ConfigError, KernelConfig, default_config
    from autokernel.records import ACTIVATIONS


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'autokernel' has no attribute {name!r}")
    importlib.import_module("autokernel.runtime")  # first: chooses the GPU or the interpreter before any kernel is defined
    module = importlib.import_module(_EXPORTS[name])
    value = module if name == "nn" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])

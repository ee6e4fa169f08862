"""autokernel: Triton GEMM kernels with fused epilogues, measured against PyTorch.

Import order matters: ``runtime`` decides, before triton is imported, whether kernels
run on the GPU or under Triton's interpreter on the CPU.
"""

from autokernel import runtime  # noqa: F401  (must come first: sets TRITON_INTERPRET)
from autokernel.api import linear, matmul
from autokernel.config import ConfigError, KernelConfig, default_config
from autokernel.kernels.epilogue import ACTIVATIONS

from autokernel import nn  # noqa: E402  (after api: nn.Linear builds on linear)

__version__ = "0.1.0"

__all__ = ["ACTIVATIONS", "ConfigError", "KernelConfig", "default_config", "linear", "matmul", "nn", "__version__"]

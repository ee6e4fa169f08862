"""The records at the bottom of autokernel: plain data every layer above shares.

``Problem`` (one GEMM to run, check and time: the key everything is indexed by), the names
it is built from (dtypes, activations, operand layouts) and their parsing. Importing this
module imports neither torch nor Triton (a test and an import-linter contract hold it to
that): the history, the CLI's argument checks and the tuner's records need neither.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DTYPE_SIZES: dict[str, int] = {"float16": 2, "bfloat16": 2, "float32": 4}
"""The dtypes the kernels take, by canonical name, with their element size in bytes."""
_DTYPE_ALIASES = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "float": "float32"}
LAYOUTS = ("nn", "tn", "nt", "tt")
ACTIVATIONS = ("none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu")
"""The epilogue's activations (kernels/epilogue.py); "gelu" is exact (erf), "gelu_tanh"
the tanh approximation."""


def normalize_activation(activation: str | None) -> str:
    """None and "none" mean no activation; anything else must be a known name."""
    name = "none" if activation is None else str(activation).lower().replace("-", "_")
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}; got {activation!r}")
    return name


def torch_dtype(name: str) -> "torch.dtype":
    """The torch dtype of a dtype name or alias."""
    import torch  # heavy: only callers that hold tensors get here

    return getattr(torch, parse_dtype(name))


def fresh_seed() -> int:
    """A random seed that leaves torch's global generator alone (torch.seed() would
    reseed it under the user's manual_seed)."""
    return secrets.randbits(62)


def parse_dtype(name: str) -> str:
    """Canonical dtype name ("float16", "bfloat16", "float32") from a name or alias."""
    key = str(name).lower().removeprefix("torch.")
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_SIZES:
        raise ValueError(f"unknown dtype {name!r}; choose float16 (fp16), bfloat16 (bf16) or float32 (fp32)")
    return key


@dataclass(frozen=True)
class Problem:
    """C[M, N] = act(A[M, K] @ B[K, N] + bias).

    layout: two letters for A and B, "n" for a row-major tensor, "t" for a transposed
    view of a row-major tensor (A given as a [K, M] tensor's .t(), B as a [N, K] tensor's
    .t() — the nn.Linear weight layout).
    """

    m: int
    n: int
    k: int
    dtype: str = "float16"
    activation: str = "none"
    bias: bool = False
    layout: str = "nn"

    def __post_init__(self) -> None:
        for name in ("m", "n", "k"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name.upper()} must be an integer >= 0, got {v!r}")
        object.__setattr__(self, "dtype", parse_dtype(self.dtype))
        object.__setattr__(self, "activation", normalize_activation(self.activation))
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}; got {self.layout!r}")

    @property
    def torch_dtype(self) -> "torch.dtype":
        return torch_dtype(self.dtype)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def bytes(self) -> int:
        """Fewest bytes moved: A, B (and bias) read once, C written once."""
        elem = DTYPE_SIZES[self.dtype]
        total = (self.m * self.k + self.k * self.n + self.m * self.n) * elem
        if self.bias:
            total += self.n * elem
        return total

    def label(self) -> str:
        extra = [self.dtype]
        if self.layout != "nn":
            extra.append(self.layout)
        if self.bias:
            extra.append("bias")
        if self.activation != "none":
            extra.append(self.activation)
        return f"{self.m}x{self.n}x{self.k} " + " ".join(extra)

    def to_dict(self) -> dict:
        return asdict(self)

    def make_inputs(self, device: "torch.device | str", seed: int | None = None):
        """Fresh random (a, b, bias) in the problem's layout and dtype.

        A is scaled by 1/sqrt(K) so that C stays O(1) whatever K is, and errors are
        comparable across sizes. One seed gives the same inputs on one kind of device.
        """
        # Drawn where they are used: on a GPU, drawing 4096^2 values on the CPU and copying
        # them over took most of a tuning trial's time.
        import torch  # heavy: only callers that make tensors get here

        device = torch.device(device)
        gen = torch.Generator(device=device)
        gen.manual_seed(seed if seed is not None else fresh_seed())
        dt = self.torch_dtype
        scale = 1.0 / math.sqrt(max(self.k, 1))

        def randn(*shape):
            return torch.randn(*shape, generator=gen, dtype=torch.float32, device=device)

        a = randn(self.k, self.m).t() if self.layout[0] == "t" else randn(self.m, self.k)
        b = randn(self.n, self.k).t() if self.layout[1] == "t" else randn(self.k, self.n)
        a = (a * scale).to(device=device, dtype=dt)
        b = b.to(device=device, dtype=dt)
        bias = randn(self.n).to(device=device, dtype=dt) if self.bias else None
        return a, b, bias

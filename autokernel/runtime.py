"""Where kernels run: a CUDA GPU, or Triton's interpreter on the CPU.

Triton reads TRITON_INTERPRET when it is first imported, so this module must be
imported before anything imports triton. ``autokernel/__init__.py`` imports it first.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings

import torch


def _decide_interpreter() -> bool:
    forced = os.environ.get("TRITON_INTERPRET")
    if forced is not None:
        return forced not in ("", "0")
    if torch.cuda.is_available():
        return False
    if "triton" in sys.modules:
        warnings.warn(
            "triton was imported before autokernel on a machine with no GPU; "
            "set TRITON_INTERPRET=1 before importing triton so kernels can run on the CPU",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    os.environ["TRITON_INTERPRET"] = "1"
    return True


INTERPRETER: bool = _decide_interpreter()
"""True when kernels run under Triton's interpreter on CPU tensors."""


def kernel_device() -> torch.device:
    """The device whose tensors the kernels accept."""
    return torch.device("cpu") if INTERPRETER else torch.device("cuda")


INTERPRETER_DEVICE = "cpu (triton interpreter)"
"""The device name of kernels run under the interpreter, in the history and best-config files."""


def device_name(device: torch.device | None = None) -> str:
    """The name of the GPU that runs ``device``'s kernels (default: the current one)."""
    if INTERPRETER:
        return INTERPRETER_DEVICE
    return torch.cuda.get_device_name(device)


@functools.lru_cache(maxsize=None)
def has_tma() -> bool:
    """True on a GPU with tensor-memory-accelerator descriptors (Hopper, sm_90, and later)
    and a Triton with host-side tensor descriptors (3.3 and later)."""
    if INTERPRETER or torch.cuda.get_device_capability() < (9, 0):
        return False
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def shared_memory_limit() -> int | None:
    """Bytes of shared memory one program may use on this device; None under the interpreter."""
    if INTERPRETER:
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "shared_memory_per_block_optin", 0) or 49152)


@functools.lru_cache(maxsize=None)
def sm_count() -> int | None:
    """Streaming multiprocessors of this device; None under the interpreter."""
    if INTERPRETER:
        return None
    return int(torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count)

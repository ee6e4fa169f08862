"""Where kernels run: a CUDA GPU, or Triton's interpreter on the CPU.

With no CUDA device the kernels run under the interpreter, whatever was imported first;
``TRITON_INTERPRET`` set in the environment decides instead (``1``: the interpreter even on
a GPU machine; ``0``: never). Triton chooses between compiling and interpreting when
``@jit`` wraps a function, reading ``TRITON_INTERPRET`` then: autokernel's kernels are
wrapped after this module has run (``autokernel.kernels`` imports it first), and Triton's
own helpers (tl.cdiv, tl.sum, ...), wrapped when triton.language was imported, are wrapped
again here if that import came first.
"""

from __future__ import annotations

import functools
import os
import sys

import torch


_TRUE = ("1", "true", "on", "yes")


def _interpret_jit() -> None:
    """Make ``@triton.jit`` interpret the kernels defined from here on, and Triton's own
    ``@jit`` helpers if triton.language was already imported for the compiler."""
    os.environ["TRITON_INTERPRET"] = "1"
    if "triton.language" in sys.modules:  # else it wraps its helpers for the interpreter when imported
        _interpret_triton_language()


def _interpret_triton_language() -> None:
    """Wrap the ``@jit`` helpers of the loaded triton.language modules (tl.cdiv, tl.sum,
    tl.zeros, ...) for the interpreter, as importing triton under TRITON_INTERPRET=1 does:
    an interpreted kernel cannot call a helper wrapped for the compiler."""
    from triton.language import core
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    wrapped: dict[int, InterpretedFunction] = {}

    def interpreted(fn: JITFunction) -> InterpretedFunction:
        if id(fn) not in wrapped:
            wrapped[id(fn)] = InterpretedFunction(fn.fn, do_not_specialize=fn.do_not_specialize,
                                                  debug=fn.debug, noinline=fn.noinline)
        return wrapped[id(fn)]

    for name, module in list(sys.modules.items()):
        if module is None or not (name == "triton.language" or name.startswith("triton.language.")):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, JITFunction):
                setattr(module, attr, interpreted(value))
    for attr, value in list(vars(core.tensor).items()):  # x.sum(), x.cdiv(...): a method forwarding to the helper
        if isinstance(value, JITFunction):
            setattr(core.tensor, attr, _method(interpreted(value)))


def _method(fn):
    def method(*args, **kwargs):
        return fn(*args, **kwargs)

    return method


def round_bfloat16_to_nearest() -> None:
    """Make the interpreter round float32 to bfloat16 to nearest, ties to even, as the GPU
    does (``cvt.rn.bf16.f32``). Triton's interpreter (3.9, where the tests run) truncates there:
    its cast passes no rounding mode. That left every bfloat16 output of the kernels up to
    one unit in the last place short in magnitude, twice the error of torch's own bfloat16
    matmul on the CPU.
    Called where the kernels are defined, under the interpreter only; idempotent. An
    interpreter without that cast (another Triton) is left as it is."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    truncating = getattr(builder, "cast_impl", None)
    if truncating is None or not hasattr(interpreter, "TensorHandle") or getattr(truncating, "rounds_to_nearest", False):
        return

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            bits = np.asarray(src.data, dtype=np.float32).view(np.uint32).astype(np.uint64)
            half = bits >> 16
            rounded = ((bits + 0x7FFF + (half & 1)) >> 16).astype(np.uint16)
            nan = np.isnan(src.data)
            if nan.any():  # the sum would carry out of a NaN's bits: keep it a quiet NaN, its sign kept
                rounded = np.where(nan, (half | 0x40).astype(np.uint16), rounded)
            return interpreter.TensorHandle(rounded, dst_type.scalar)
        return truncating(self, src, dst_type)

    cast_impl.rounds_to_nearest = True
    builder.cast_impl = cast_impl


def _decide_interpreter() -> bool:
    forced = os.environ.get("TRITON_INTERPRET")
    if forced is not None:
        interpret = forced.strip().lower() in _TRUE  # read as triton reads it
    else:
        interpret = not torch.cuda.is_available()
    if interpret:
        _interpret_jit()
    return interpret


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
    index = device.index if isinstance(device, torch.device) else device
    if index is None:
        index = torch.cuda.current_device()
    if isinstance(index, int):
        return _gpu_name(index)
    return torch.cuda.get_device_name(index)  # a device string


@functools.lru_cache(maxsize=None)
def _gpu_name(index: int) -> str:
    """The name of GPU ``index``, asked of torch once: the first call of every new shape
    reads it."""
    return torch.cuda.get_device_name(index)


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

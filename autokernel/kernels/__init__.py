"""Triton kernels and their thin launchers. Nothing here knows of tuning or history."""

from autokernel import runtime  # (first: it chooses the GPU or the interpreter before the kernels are defined)

if runtime.INTERPRETER:
    runtime.round_bfloat16_to_nearest()

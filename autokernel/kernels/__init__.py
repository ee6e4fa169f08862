"""Triton kernels and their thin launchers. Nothing here knows of tuning or history."""

from autokernel import runtime  # noqa: F401  (first: it chooses the GPU or the interpreter before the kernels are defined)

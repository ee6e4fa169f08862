"""Triton kernels and their thin launchers. Nothing here knows of tuning or history."""

from autokernel import runtime  # noqa: F401  (before triton: it sets TRITON_INTERPRET on a CPU machine)

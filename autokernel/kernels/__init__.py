"""Triton kernels and their thin launchers. Nothing here knows of tuning or history."""

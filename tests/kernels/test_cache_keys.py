"""Every process must key each kernel alike in Triton's cache: the tuner's compile workers
leave binaries there for its timing workers, whichever kernel each process ran first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_CHECK = r"""
import sys, triton.runtime.jit as jit
from autokernel.kernels.launch import _jit_callees
first = sys.argv[1]
original = next(vars(k)["cache_key"] for k in jit.JITFunction.__mro__ if "cache_key" in vars(k))
early = []

def checked(fn):
    if fn.hash is None:  # its key is worked out now: its callees' must exist already
        early.extend(f"{fn.__name__} before {c.__name__}" for c in _jit_callees(fn) if c.hash is None)
    return original.fget(fn)

jit.JITFunction.cache_key = property(checked)
seen = []  # (caller's name, callee) for each JIT function Triton folds into another's key
update = jit.DependenciesFinder._update_hash

def recorded(finder, func):
    seen.append((finder.name, func))
    return update(finder, func)

jit.DependenciesFinder._update_hash = recorded
import importlib
importlib.import_module("autokernel.kernels." + first)
from autokernel.kernels import backward, epilogue, matmul, matmul_tma, splitk, streamk
assert not early, early
ours = {v.__name__: v for m in (backward, epilogue, matmul, matmul_tma, splitk, streamk) for v in vars(m).values()
        if isinstance(v, jit.JITFunction)}
missed = [f"{caller} -> {callee.__name__}" for caller, callee in seen
          if caller in ours and all(c is not callee for c in _jit_callees(ours[caller]))]
assert seen and not missed, missed  # every callee Triton finds, found first here
kernels = [matmul._matmul_kernel, matmul_tma._matmul_tma_kernel, streamk._streamk_kernel, splitk._splitk_partial_kernel,
           epilogue.store_epilogue]
assert all(k.hash for k in kernels)
assert {c.__name__ for c in _jit_callees(epilogue.store_epilogue)} >= {"apply_activation"}
print(" ".join(k.hash for k in kernels))
"""


def _run(script: str, *args: str) -> str:
    """What ``script`` prints in a fresh process compiling for the GPU (no interpreter)."""
    # This checkout first, then whatever path the caller has (the GPU machine's carried wheels).
    env = {**os.environ, "TRITON_INTERPRET": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def test_kernels_are_hashed_callees_first_and_alike_whichever_module_comes_first():
    pytest.importorskip("triton")
    keys = {first: _run(_CHECK, first) for first in ("matmul", "streamk", "matmul_tma")}
    assert len(set(keys.values())) == 1, keys


_EMULATED = r"""
import sys, triton.runtime.jit as jit

def update_merging_first(self, func):
    # Triton 3.6's order: the callee's globals merged before its key is worked out
    self.used_global_vals.update(func.used_global_vals)
    self.hasher.update((func.cache_key + str(getattr(func, "noinline", False))).encode("utf-8"))

jit.DependenciesFinder._update_hash = update_merging_first
first, fixed = sys.argv[1], sys.argv[2] == "fixed"
from autokernel.kernels import launch
if not fixed:
    launch.hash_callees_first = lambda namespace: None
from autokernel.kernels import epilogue, matmul, matmul_tma, streamk
first_kernel = {"matmul": matmul._matmul_kernel, "matmul_tma": matmul_tma._matmul_tma_kernel,
                "streamk": streamk._streamk_kernel}[first]
first_kernel.cache_key  # the kernel this process launches first
print(epilogue.store_epilogue.cache_key, matmul._matmul_kernel.cache_key, streamk._streamk_kernel.cache_key)
"""


def test_the_keys_agree_under_triton_36s_hashing_order():
    """With Triton 3.6's order of hashing emulated, the keys of the epilogue and of the
    kernels calling it depend on the kernel a process hashes first (the fault measured on
    the H100: compile workers and timing workers keyed binaries apart); hashed callees
    first at import, they do not."""
    pytest.importorskip("triton")
    unfixed = {first: _run(_EMULATED, first, "unfixed") for first in ("matmul_tma", "matmul")}
    assert unfixed["matmul_tma"] != unfixed["matmul"]
    fixed = {first: _run(_EMULATED, first, "fixed") for first in ("matmul_tma", "matmul", "streamk")}
    assert len(set(fixed.values())) == 1, fixed

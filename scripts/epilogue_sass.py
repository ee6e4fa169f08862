"""Count the sm_90 SASS instructions each activation spelling costs per element (CPU only).

Compiles a one-element-per-thread kernel ``y = apply_activation(x)`` for each name (the
public activations and epilogue.MATH_VARIANTS), disassembles it with the nvdisasm that
ships with Triton, and prints the instructions beyond those of "none": MUFU operations
(the SFU, 16 per clock per SM on the H100) apart from the FMA/ALU-pipe rest (128 FP32
per clock per SM). Constant loads (MOV/HFMA2.MMA of an immediate) are left out: in the
GEMM epilogue they are hoisted out of the tile loop. scripts/epilogue_math.py quotes
these counts.

Usage: python3 scripts/epilogue_sass.py [NAME ...]
"""

import collections
import os
import re
import subprocess
import sys
import tempfile

os.environ["TRITON_INTERPRET"] = "0"

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from autokernel.kernels.epilogue import ACTIVATIONS, MATH_VARIANTS, apply_activation  # noqa: E402

_SKIP = {"NOP", "MOV", "HFMA2.MMA"}


@triton.jit
def _one_each(x_ptr, y_ptr, ACTIVATION: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, apply_activation(tl.load(x_ptr + offs), 0.01, ACTIVATION))


def counts(act: str) -> collections.Counter:
    kernel = triton.compile(
        ASTSource(fn=_one_each, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "ACTIVATION": "constexpr",
                                           "BLOCK": "constexpr"}, constexprs={"ACTIVATION": act, "BLOCK": 128}),
        target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        sass = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True, check=True).stdout
    ops = collections.Counter()
    for line in sass.splitlines():
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)((?:\.[A-Z0-9_]+)*)", line)
        if m:
            op = m.group(1) + (m.group(2) if m.group(1) in ("MUFU", "HFMA2") else "")
            if op not in _SKIP:
                ops[op] += 1
    return ops


def main() -> int:
    names = sys.argv[1:] or [*ACTIVATIONS[1:], *(n for names in MATH_VARIANTS.values() for n in names)]
    base = counts("none")
    print("activation | MUFU | FMA/ALU pipe | instructions beyond 'none'")
    for name in names:
        extra = counts(name)
        extra.subtract(base)
        extra = {op: c for op, c in sorted(extra.items()) if c}
        mufu = sum(c for op, c in extra.items() if op.startswith("MUFU"))
        print(f"{name} | {mufu} | {sum(extra.values()) - mufu} | "
              + " ".join(f"{op}x{c}" for op, c in extra.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

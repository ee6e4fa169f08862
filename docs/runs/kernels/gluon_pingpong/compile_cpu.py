"""Compile the Gluon ping-pong kernels for sm_90 with Triton 3.6 on a machine with no GPU, and print
their shared memory and warps (a tile that does not fit fails here, not on the GPU):

    python3 compile_cpu.py 128 128 64 5        # pp.py: BM BN BK stages
    python3 compile_cpu.py 128 128+64 64 3     # pp2.py: BN as two boxes
"""
import os, sys
os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.runtime.jit import mangle_type
import pp, pp2

BM, BK, S = int(sys.argv[1]), int(sys.argv[3]), int(sys.argv[4])
BN = [int(x) for x in sys.argv[2].split("+")]
g = gl.float16
T = torch.empty(1024, 1024, dtype=torch.float16)
desc = lambda shape: mangle_type(TensorDescriptor.from_tensor(T, shape, gl.NVMMASharedLayout.get_default_for(shape, g)))
consts = {"S": S, "GROUP_M": 8, "CONSUMER_REGS": 232, "PRODUCER_REGS": 40, "num_warps": 4}
if len(BN) == 1:
    sig = {"a_desc": desc([BM, BK]), "b_desc": desc([BN[0], BK]), "c_desc": desc([BM, BN[0]]), "B_KMAJOR": "constexpr"}
    kernel, consts["B_KMAJOR"] = pp.pingpong_kernel, True
else:
    sig = {"a_desc": desc([BM, BK]), "b0_desc": desc([BN[0], BK]), "b1_desc": desc([BN[1], BK]),
           "c0_desc": desc([BM, BN[0]]), "c1_desc": desc([BM, BN[1]]), "N": "i32"}
    kernel = pp2.pingpong2_kernel
sig.update({name: "constexpr" for name in ("S", "GROUP_M", "CONSUMER_REGS", "PRODUCER_REGS", "num_warps")})
k = triton.compile(GluonASTSource(fn=kernel, signature=sig, constexprs=consts), target=GPUTarget("cuda", 90, 32),
                   options={"num_warps": 4, "maxnreg": 168})
print(f"compiled: {k.metadata.shared} bytes of shared memory, {k.metadata.num_warps} warps")

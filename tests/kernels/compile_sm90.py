"""Compile the Triton kernels for Hopper (sm_90) on a machine with no GPU.

The interpreter runs kernels as Python and misses errors that only compilation finds
(e.g. a non-constexpr global). Triton can lower a kernel to PTX without a GPU, so this
script compiles each kernel variant and prints one line per failure. It must run in its
own process: TRITON_INTERPRET has to be 0 when triton is imported.

Usage: python tests/kernels/compile_sm90.py   (exit code 1 if any variant fails)
"""

import os
import sys

os.environ["TRITON_INTERPRET"] = "0"

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from autokernel.kernels.epilogue import ACTIVATIONS  # noqa: E402
from autokernel.kernels.matmul import _matmul_kernel  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
_TYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


def matmul_variants():
    """(name, kernel, signature, constexprs, options) for the forward kernel."""
    for dtype, act, has_bias, even_k, index_64 in [
        *[("float16", act, True, True, False) for act in ACTIVATIONS],
        ("bfloat16", "gelu_tanh", True, False, False),
        ("float32", "silu", False, False, True),
    ]:
        t = "*" + _TYPES[dtype]
        sig = {"a_ptr": t, "b_ptr": t, "c_ptr": t, "bias_ptr": t, "z_ptr": t}
        sig.update({name: "i32" for name in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk",
                                             "stride_bn", "stride_cm", "stride_cn", "stride_zm", "stride_zn",
                                             "stride_bias")})
        sig["slope"] = "fp32"
        consts = dict(HAS_BIAS=has_bias, STORE_Z=act != "none", ACTIVATION=act, EVEN_K=even_k, UPCAST=False, INDEX_64=index_64,
                      A_LEAD=0 if even_k else 8, B_LEAD=0 if even_k else -8,
                      M_RUN=128 if even_k else 16 if not index_64 else 1, N_RUN=64 if even_k else 8 if not index_64 else 2,
                      MASK_M=not even_k, MASK_N=index_64, BLOCK_M=128, BLOCK_N=128, BLOCK_K=32 if dtype == "float32" else 64, GROUP_M=8)
        sig.update({name: "constexpr" for name in consts})
        yield f"matmul {dtype} {act} mask_m={not even_k} mask_n={index_64}", _matmul_kernel, sig, consts, {"num_warps": 8, "num_stages": 3}


def matmul_tma_variants():
    """The Hopper TMA kernel: each operand layout, then warp specialization, the subtiled
    epilogue and the flattened loops (with bias, Z and activations), each as the tuner's
    space allows them (tuning/space.py: no warp specialization beside the others)."""
    from autokernel.kernels.matmul_tma import _matmul_tma_kernel

    bm, bn, bk = 128, 256, 64
    plain = [(dtype, act, a_trans, b_trans, False, 1, False, 8, 3, False) for dtype, act, a_trans, b_trans in [
        ("float16", "gelu_tanh", False, True), ("bfloat16", "silu", True, False),
        ("float16", "none", False, False), ("bfloat16", "relu", True, True), ("bfloat16", "gelu", False, True)]]
    options = [("float16", "none", False, False, True, 1, False, 4, 3, False),
               ("bfloat16", "gelu_tanh", False, True, True, 1, False, 4, 3, False),
               ("float16", "none", False, False, False, 2, False, 8, 4, False),
               ("bfloat16", "leaky_relu", True, True, False, 2, False, 8, 4, False),
               ("float16", "none", False, False, False, 1, True, 8, 3, False),
               ("bfloat16", "silu", False, True, False, 2, True, 8, 3, False)]
    # C stored through pointers (its rows no multiple of 16 bytes): plain, flattened with
    # column halves, and warp-specialized
    c_ptr = [("float16", "gelu_tanh", False, True, False, 1, False, 8, 3, True),
             ("bfloat16", "none", True, True, False, 2, True, 8, 3, True),
             ("float16", "silu", False, True, True, 1, False, 4, 3, True)]
    for dtype, act, a_trans, b_trans, ws, subtile, flatten, warps, stages, c_ptr in plain + options + c_ptr:
        t = _TYPES[dtype]
        if ws:  # warp-specialized: the programs describe the operands (matmul_tma.plan_matmul_tma)
            descs = {"a_desc": "*" + t, "b_desc": "*" + t, "c_desc": "*" + t}
        else:
            descs = {"a_desc": f"tensordesc<{t}{[bk, bm] if a_trans else [bm, bk]}>",
                     "b_desc": f"tensordesc<{t}{[bn, bk] if b_trans else [bk, bn]}>",
                     "c_desc": "*" + t if c_ptr else f"tensordesc<{t}{[bm, bn // subtile]}>"}
        sig = {
            **descs, "bias_ptr": "*" + t, "z_ptr": "*" + t, "M": "i32", "N": "i32", "K": "i32",
            "stride_a": "i32", "stride_b": "i32", "stride_c": "i32", "stride_zm": "i32", "stride_zn": "i32",
            "stride_bias": "i32", "slope": "fp32",
        }
        consts = dict(HAS_BIAS=True, STORE_Z=act != "none", ACTIVATION=act, A_TRANS=a_trans, B_TRANS=b_trans, UPCAST=False,
                      BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, NUM_PROGRAMS=132, WARP_SPECIALIZE=ws,
                      EPILOGUE_SUBTILE=subtile, FLATTEN=flatten, DEVICE_DESCRIPTORS=ws, C_PTR=c_ptr, SWAP_AB=False)
        sig.update({name: "constexpr" for name in consts})
        name = (f"matmul_tma {dtype} {act} a_trans={a_trans} b_trans={b_trans} ws={ws} subtile={subtile} "
                f"flatten={flatten} w{warps} s{stages} c_ptr={c_ptr}")
        yield name, _matmul_tma_kernel, sig, consts, {"num_warps": warps, "num_stages": stages}
    # swap_ab: C^T = B^T A^T on thin tiles, stored transposed (B's storage first: nn.Linear's
    # weight is not transposed, the activations' rows are)
    for dtype, act, a_trans, b_trans, subtile, flatten, (sbm, sbn, sbk, warps, stages) in [
            ("float16", "gelu_tanh", False, True, 1, True, (64, 32, 128, 4, 6)),
            ("bfloat16", "none", True, False, 2, False, (128, 32, 128, 4, 5)),
            ("bfloat16", "silu", False, True, 1, True, (128, 16, 128, 4, 5))]:
        t = _TYPES[dtype]
        sig = {"a_desc": f"tensordesc<{t}{[sbk, sbm] if a_trans else [sbm, sbk]}>",
               "b_desc": f"tensordesc<{t}{[sbn, sbk] if b_trans else [sbk, sbn]}>",
               "c_desc": f"tensordesc<{t}{[sbn // subtile, sbm]}>", "bias_ptr": "*" + t, "z_ptr": "*" + t,
               "M": "i32", "N": "i32", "K": "i32", "stride_a": "i32", "stride_b": "i32", "stride_c": "i32",
               "stride_zm": "i32", "stride_zn": "i32", "stride_bias": "i32", "slope": "fp32"}
        consts = dict(HAS_BIAS=True, STORE_Z=act != "none", ACTIVATION=act, A_TRANS=a_trans, B_TRANS=b_trans,
                      UPCAST=False, BLOCK_M=sbm, BLOCK_N=sbn, BLOCK_K=sbk, GROUP_M=8, NUM_PROGRAMS=132,
                      WARP_SPECIALIZE=False, EPILOGUE_SUBTILE=subtile, FLATTEN=flatten, DEVICE_DESCRIPTORS=False,
                      C_PTR=False, SWAP_AB=True)
        sig.update({name: "constexpr" for name in consts})
        yield (f"matmul_tma swap_ab {dtype} {act} {sbm}x{sbn}x{sbk} subtile={subtile} flatten={flatten}",
               _matmul_tma_kernel, sig, consts, {"num_warps": warps, "num_stages": stages})


def splitk_variants():
    """The split-K partial and reduce kernels (kernels/splitk.py)."""
    from autokernel.kernels.splitk import _splitk_partial_kernel, _splitk_reduce_kernel

    for dtype, even_k, index_64 in [("float16", True, False), ("bfloat16", False, False), ("float32", False, True)]:
        t = "*" + _TYPES[dtype]
        sig = {"a_ptr": t, "b_ptr": t, "ws_ptr": "*fp32"}
        sig.update({name: "i32" for name in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                                             "slice_size", "iters_per_split")})
        consts = dict(EVEN_K=even_k, UPCAST=False, INDEX_64=index_64, A_LEAD=0 if even_k else -4,
                      B_LEAD=0 if even_k else 8, M_RUN=16 if even_k else 4, N_RUN=64 if even_k else 8,
                      MASK_M=not even_k, MASK_N=index_64, BLOCK_M=16, BLOCK_N=64,
                      BLOCK_K=64 if dtype == "float32" else 128, GROUP_M=8, LAUNCH_NEXT=dtype != "float32")
        sig.update({name: "constexpr" for name in consts})
        yield f"splitk_partial {dtype} even_k={even_k} mask_m={not even_k} mask_n={index_64}", _splitk_partial_kernel, sig, consts, {"num_warps": 4, "num_stages": 4}
    for dtype, act, split_k, index_64 in [*[("float16", act, 4, False) for act in ACTIVATIONS],
                                          ("bfloat16", "gelu_tanh", 2, False), ("float32", "silu", 16, True)]:
        t = "*" + _TYPES[dtype]
        sig = {"ws_ptr": "*fp32", "c_ptr": t, "bias_ptr": t, "z_ptr": t}
        sig.update({name: "i32" for name in ("M", "N", "stride_cm", "stride_cn", "stride_zm", "stride_zn",
                                             "stride_bias", "slice_size")})
        sig["slope"] = "fp32"
        pdl = dtype != "float32"
        consts = dict(HAS_BIAS=True, STORE_Z=act != "none", ACTIVATION=act, INDEX_64=index_64, SPLIT_K=split_k,
                      BLOCK_M=16, BLOCK_N=64, WAIT_PRIOR=pdl)
        sig.update({name: "constexpr" for name in consts})
        yield (f"splitk_reduce {dtype} {act} split_k={split_k}", _splitk_reduce_kernel, sig, consts,
               {"num_warps": 4, "launch_pdl": pdl})


def streamk_variants():
    """The stream-K kernel (kernels/streamk.py)."""
    from autokernel.kernels.streamk import _streamk_kernel

    for dtype, act, even_k, index_64 in [("float16", "gelu_tanh", True, False), ("bfloat16", "relu", False, False),
                                         ("float32", "silu", False, True), ("float16", "none", True, False)]:
        t = "*" + _TYPES[dtype]
        sig = {"a_ptr": t, "b_ptr": t, "c_ptr": t, "bias_ptr": t, "z_ptr": t, "ws_ptr": "*fp32", "locks_ptr": "*i32"}
        sig.update({name: "i32" for name in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                                             "stride_cm", "stride_cn", "stride_zm", "stride_zn", "stride_bias")})
        sig.update(slope="fp32", sk_tiles="i32", iters_per_program="i32")
        consts = dict(HAS_BIAS=act != "none", STORE_Z=act != "none", ACTIVATION=act, EVEN_K=even_k, UPCAST=False,
                      INDEX_64=index_64, A_LEAD=0 if even_k else 8, B_LEAD=0 if even_k else -8,
                      M_RUN=128 if even_k else 16, N_RUN=64 if even_k else 8, MASK_M=not even_k, MASK_N=index_64,
                      BLOCK_M=128, BLOCK_N=128, BLOCK_K=32 if dtype == "float32" else 64, GROUP_M=8,
                      NUM_PROGRAMS=132)
        sig.update({name: "constexpr" for name in consts})
        yield f"streamk {dtype} {act} even_k={even_k} mask_m={not even_k} mask_n={index_64}", _streamk_kernel, sig, consts, {"num_warps": 8, "num_stages": 3}


def tma_streamk_variants():
    """The TMA kernel with a stream-K tail and its fix-up (kernels/matmul_tma.py)."""
    from autokernel.kernels.matmul_tma import FIXUP_PIECE, _matmul_tma_streamk_kernel, _streamk_fixup_kernel

    for dtype, act, a_trans, b_trans, subtile, flatten, (bm, bn, warps, stages), heads, c_ptr, swap in [
            ("float16", "none", False, True, 1, False, (128, 256, 8, 3), True, False, False),
            ("bfloat16", "gelu_tanh", True, False, 2, True, (128, 128, 8, 4), False, False, False),
            ("float16", "silu", False, False, 1, True, (64, 256, 4, 4), True, False, False),
            ("bfloat16", "relu", False, True, 1, True, (128, 128, 4, 5), False, True, False),
            ("bfloat16", "gelu_tanh", False, True, 1, True, (64, 32, 4, 6), False, False, True)]:
        t = _TYPES[dtype]
        c_block = [bn // subtile, bm] if swap else [bm, bn // subtile]
        sig = {"a_desc": f"tensordesc<{t}{[64, bm] if a_trans else [bm, 64]}>",
               "b_desc": f"tensordesc<{t}{[bn, 64] if b_trans else [64, bn]}>",
               "c_desc": "*" + t if c_ptr else f"tensordesc<{t}{c_block}>", "bias_ptr": "*" + t,
               "z_ptr": "*" + t, "ws_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "stride_c": "i32",
               "stride_zm": "i32", "stride_zn": "i32", "stride_bias": "i32", "slope": "fp32", "dp_tiles": "i32",
               "sk_progs": "i32", "head_steps": "i32"}
        consts = dict(HAS_BIAS=True, STORE_Z=act != "none", ACTIVATION=act, A_TRANS=a_trans, B_TRANS=b_trans,
                      UPCAST=False, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, NUM_PROGRAMS=132,
                      EPILOGUE_SUBTILE=subtile, FLATTEN=flatten, HEAD_AND_TAILS=heads, C_PTR=c_ptr, SWAP_AB=swap)
        sig.update({name: "constexpr" for name in consts})
        yield (f"matmul_tma_streamk {dtype} {act} a_trans={a_trans} b_trans={b_trans} subtile={subtile} "
               f"flatten={flatten} heads={heads} {bm}x{bn} c_ptr={c_ptr} swap_ab={swap}", _matmul_tma_streamk_kernel,
               sig, consts,
               {"num_warps": warps, "num_stages": stages})
        sig = {"ws_ptr": "*fp32", "c_ptr": "*" + t, "bias_ptr": "*" + t, "z_ptr": "*" + t}
        sig.update({name: "i32" for name in ("M", "N", "stride_cm", "stride_cn", "stride_zm", "stride_zn",
                                             "stride_bias")})
        sig.update(slope="fp32", dp_tiles="i32", sk_progs="i32")
        consts = dict(HAS_BIAS=True, STORE_Z=act != "none", ACTIVATION=act, BLOCK_M=bm, BLOCK_N=bn, GROUP_M=8,
                      FIX_M=min(FIXUP_PIECE[0], bm), FIX_N=min(FIXUP_PIECE[1], bn), A_TRANS=a_trans, B_TRANS=b_trans,
                      C_PTR=c_ptr, SWAP_AB=swap)
        sig.update({name: "constexpr" for name in consts})
        yield (f"streamk_fixup {dtype} {act} {bm}x{bn} swap_ab={swap}", _streamk_fixup_kernel, sig, consts,
               {"num_warps": 4})


def backward_variants():
    """The elementwise kernels of the linear layer's forward and backward."""
    from autokernel.kernels.backward import _activation_grad_kernel

    # Every activation with dZ stored, and db alone (the unrolled form), each summing its
    # partials into db in the same launch.
    for act, store_dz, row_tiles in [(act, True, 2) for act in ACTIVATIONS] + [("none", False, 16)]:
        sig = {"dy_ptr": "*bf16", "z_ptr": "*bf16", "dz_ptr": "*bf16", "partial_ptr": "*fp32", "db_ptr": "*bf16",
               "counts_ptr": "*i32", "M": "i32", "N": "i32"}
        sig.update({name: "i32" for name in ("stride_dym", "stride_dyn", "stride_zm", "stride_zn",
                                             "stride_dzm", "stride_dzn")})
        sig["slope"] = "fp32"
        consts = dict(GRAD_ACTIVATION=act, STORE_DZ=store_dz, COLUMN_SUM=True, FINISH=True, ROW_TILES=row_tiles,
                      BLOCK_M=32, BLOCK_N=128, SUM_ROWS=32)
        sig.update({name: "constexpr" for name in consts})
        yield f"activation_grad {act}{'' if store_dz else ' db alone'}", _activation_grad_kernel, sig, consts, \
            {"num_warps": 4}


def aligned_copy_variants():
    """The copy of operands into rows padded to 16 bytes, for each 16-bit dtype."""
    from autokernel.kernels.aligned import _BLOCK_COLS, _BLOCK_ROWS, _WARPS, _copy_rows_kernel

    for dtype in ("float16", "bfloat16"):
        t = _TYPES[dtype]
        sig = {name: f"*{t}" for name in ("src_a", "dst_a", "src_b", "dst_b")}
        sig.update({name: "i32" for name in ("rows_a", "cols_a", "src_stride_a", "dst_stride_a", "rows_b", "cols_b",
                                             "src_stride_b", "dst_stride_b", "tiles_a")})
        consts = dict(BLOCK_ROWS=_BLOCK_ROWS, BLOCK_COLS=_BLOCK_COLS)
        sig.update({name: "constexpr" for name in consts})
        yield f"aligned_copy {dtype}", _copy_rows_kernel, sig, consts, {"num_warps": _WARPS}


def variants():
    yield from matmul_variants()
    yield from matmul_tma_variants()
    yield from splitk_variants()
    yield from streamk_variants()
    yield from tma_streamk_variants()
    yield from backward_variants()
    yield from aligned_copy_variants()


# The instructions each forward activation's epilogue must compile to
# (kernels/epilogue.py: what was measured on the H100): {activation: (wanted, refused)}.
_MUFU = {
    "relu": (("max.NaN.f32",), ()),  # NaN stays NaN, as in torch.relu
    "gelu": (("ex2.approx.ftz.f32", "rcp.approx.ftz.f32"), ()),  # erfc's fit, not libdevice's erf
    "gelu_tanh": (("ex2.approx.ftz.f32", "rcp.approx.ftz.f32"), ("tanh.approx",)),
    "silu": (("ex2.approx.ftz.f32", "rcp.approx.ftz.f32"), ("tanh.approx",)),
}


def mufu_problem(consts: dict, ptx: str) -> str | None:
    """What is wrong with a forward kernel's PTX for its activation's epilogue, or None."""
    wanted, refused = _MUFU.get(consts.get("ACTIVATION"), ((), ()))
    missing = [op for op in wanted if op not in ptx]
    extra = [op for op in refused if op in ptx]
    if missing or extra:
        return f"{consts['ACTIVATION']} epilogue: missing {missing}, unexpected {extra}"
    return None


# The grid dependency control a dependent launch's kernels must hold (kernels/launch.py,
# ``dependent_launch``): the first kernel lets the second start, the second waits for the first.
_GDC = {"LAUNCH_NEXT": "griddepcontrol.launch_dependents", "WAIT_PRIOR": "griddepcontrol.wait"}


def gdc_problem(consts: dict, ptx: str) -> str | None:
    """Where a kernel's PTX holds grid dependency control its constexprs did not ask for, or
    lacks what they did, what is wrong; else None."""
    for flag, op in _GDC.items():
        if flag in consts and bool(consts[flag]) != (op in ptx):
            return f"{flag}={consts[flag]} but {op} {'missing' if consts[flag] else 'present'}"
    return None


def main() -> int:
    failures = 0
    count = 0
    for name, kernel, sig, consts, options in variants():
        count += 1
        try:
            compiled = triton.compile(ASTSource(fn=kernel, signature=sig, constexprs=consts), target=TARGET,
                                      options=options)
            if "GRAD_ACTIVATION" not in consts and (problem := mufu_problem(consts, compiled.asm["ptx"])):
                failures += 1
                print(f"FAIL {name}: {problem}")
            elif problem := gdc_problem(consts, compiled.asm["ptx"]):
                failures += 1
                print(f"FAIL {name}: {problem}")
        except Exception as exc:
            root = exc
            while root.__cause__ is not None:
                root = root.__cause__
            failures += 1
            print(f"FAIL {name}: {type(root).__name__}: {str(root).splitlines()[0] if str(root) else ''}")
    print(f"compiled {count - failures}/{count} kernel variants for sm_90")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Shared memory of our kernels as compiled for Hopper (sm_90), against the fit model.

Each case is a config, a dtype and a mode (bias, store_z, activation, operand layout,
whether the TMA kernel may run). The launch is planned by the same code the library runs
(api._plan_kernel on stand-in tensors of the layout: the kernel the config and operands
pick, with its constexprs), each of its kernels is compiled for sm_90 the way Triton's
JIT would specialize the arguments, and ``.metadata.shared`` is the real figure in bytes.
It must run in its own process: TRITON_INTERPRET has to be 0 when triton is imported.

Usage: python tests/kernels/fit_sm90.py CASES.json   (prints one JSON line per case:
{"case": ..., "kernel": ..., "estimate": ..., "compiled": ...})
"""

import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor

os.environ["TRITON_INTERPRET"] = "0"

import torch  # noqa: E402
import triton  # noqa: E402
from triton._C.libtriton import native_specialize_impl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.compiler import CUDABackend  # noqa: E402
from triton._C.libtriton import ir  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.compiler.compiler import make_backend  # noqa: E402

from autokernel import runtime  # noqa: E402
from autokernel.config import KernelConfig  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
SIZES = (512, 512, 512)
"""M, N, K of the stand-in tensors: multiples of every tile, 16-byte aligned strides."""


def _operands(layout: str, m: int, n: int, k: int, dtype):
    """(a, b) of an [M, K] @ [K, N] GEMM: "nt" (forward, b = weight.t()), "nn" (dX = dZ @ W),
    "tn" (dW = dZ^T @ X, a transposed view)."""
    a = torch.empty(k, m, dtype=dtype).t() if layout[0] == "t" else torch.empty(m, k, dtype=dtype)
    b = torch.empty(n, k, dtype=dtype).t() if layout[1] == "t" else torch.empty(k, n, dtype=dtype)
    return a, b


def launches(case: dict):
    """(kernel name, [KernelLaunch and the tensors it is called with]) of ``case``."""
    from autokernel import api

    runtime.has_tma = lambda: case.get("tma", True)  # the GPU is a Hopper: the operands decide
    dtype = _DTYPES[case["dtype"]]
    config = KernelConfig(**case["config"])
    m, n, k = SIZES
    a, b = _operands(case.get("layout", "nt"), m, n, k, dtype)
    c = torch.empty(m, n, dtype=dtype)
    bias = torch.empty(n, dtype=dtype) if case.get("bias") else None
    z = torch.empty(m, n, dtype=dtype) if case.get("store_z") else None
    plan = api._plan_kernel(a, b, c, bias, case.get("activation", "none"), 0.01, config, z)
    bias_ = bias if bias is not None else c
    z_ = z if z is not None else c
    kind = type(plan).__name__
    if kind == "SplitKLaunch":
        ws = torch.empty(config.split_k, m, n, dtype=torch.float32)
        return "splitk", [(plan.partial, (a, b, ws)), (plan.reduce, (ws, c, bias_, z_))]
    if kind == "StreamKLaunch":
        ws = torch.empty(*plan.workspace_shape, dtype=torch.float32)
        locks = torch.zeros(16, dtype=torch.int32)
        return "streamk", [(plan.kernel, (a, b, c, bias_, z_, ws, locks))]
    if kind == "TmaLaunch":
        return "tma", [(plan.kernel, (*plan.descriptors(a, b, c), bias_, z_))]
    name = "tma" if plan.fn.__name__ == "_matmul_tma_kernel" else "grouped"  # warp-specialized TMA: pointers
    return name, [(plan, (a, b, c, bias_, z_))]


def compile_launch(launch, tensors) -> int:
    """``launch``'s kernel compiled for sm_90, its arguments specialized as the JIT would
    (16-byte divisibility of pointers and ints, ints equal to 1 as constants): .metadata.shared."""
    fn = launch.fn
    constexprs = {k: v for k, v in launch.kwargs.items() if k in fn.arg_names}
    options = {k: v for k, v in launch.kwargs.items() if k not in fn.arg_names}
    values = [*tensors, *launch.scalars]
    signature, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
            continue
        kind, key = native_specialize_impl(CUDABackend, values[i], False, True, True)
        signature[name] = kind
        if kind == "constexpr":
            constexprs[name] = key
        elif isinstance(key, str):
            attrs[(i,)] = CUDABackend.parse_attr(key)
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    if FULL:
        return triton.compile(src, target=TARGET, options=options).metadata.shared
    return _lowered_shared(src, options)


FULL = os.environ.get("FIT_SM90_FULL") == "1"
"""Compile to a cubin, as Triton does, instead of stopping at LLVM IR."""


def _lowered_shared(src: ASTSource, options: dict) -> int:
    """``.metadata.shared`` of ``src`` without PTX and cubin: Triton sets it while lowering
    to LLVM IR (shared memory is allocated there), and ptxas takes most of a compile."""
    backend = make_backend(TARGET)
    opts = backend.parse_options(dict(options))
    stages = {}
    backend.add_stages(stages, opts, src.language)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = src.make_ir(TARGET, opts, backend.get_codegen_implementation(opts), backend.get_module_map(), context)
    metadata = {"target": TARGET, **opts.__dict__}
    for ext, step in stages.items():
        module = step(module, metadata)
        if ext == "llir":
            return metadata["shared"]
    raise RuntimeError("no LLVM IR stage")


def measure(case: dict) -> dict:
    from autokernel.kernels.fit import shared_memory_need

    kernel, parts = launches(case)
    try:
        compiled = max(compile_launch(launch, tensors) for launch, tensors in parts)
    except Exception as exc:  # a config Triton cannot build: nothing to compare
        return {"case": case, "kernel": kernel, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    config = KernelConfig(**case["config"])
    estimate = shared_memory_need(config, _DTYPES[case["dtype"]], tma=case.get("tma", True),
                                  bias=bool(case.get("bias")), store_z=bool(case.get("store_z")),
                                  )
    return {"case": case, "kernel": kernel, "estimate": estimate, "compiled": compiled}


def main() -> int:
    cases = json.loads(open(sys.argv[1]).read())
    workers = int(os.environ.get("FIT_SM90_WORKERS", os.cpu_count() or 1))
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(cases)))) as pool:
        for result in pool.map(measure, cases):
            print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

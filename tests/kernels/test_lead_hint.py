"""The pointer kernels' leading-stride hint and K tail: right answers, and 16-byte loads on sm_90."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import autokernel as ak
from autokernel.config import KernelConfig
from autokernel.evaluate import reference
from autokernel.kernels.matmul import index_run, lead_hint

from tests.helpers import rel_error

ROOT = Path(__file__).resolve().parents[2]


def test_lead_hint_values():
    assert lead_hint(torch.empty(4, 1000)) == 8  # rows of 1000: a multiple of 8, not 16
    assert lead_hint(torch.empty(4, 1000).t()) == -8  # a transposed view leads with dimension 1
    assert lead_hint(torch.empty(4, 1024)) == 0  # divisible by 16: Triton specializes it itself
    assert lead_hint(torch.empty(4, 1001)) == 0  # odd: nothing to tell
    assert lead_hint(torch.empty(4, 12)) == 4
    assert lead_hint(torch.empty(4, 6)[:, ::2]) == 0  # no unit stride


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("config", [
    KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1, variant="grouped"),
    KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1, variant="grouped",
                 split_k=2),
    KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1, variant="grouped",
                 stream_k=True),
], ids=["one-pass", "split-k", "stream-k"])
def test_hinted_strides_and_k_tail_are_correct(layout, config, device):
    # K = 40 and N = 24: leading strides of 40 and 24 (multiples of 8, not 16), and a
    # K tail of 8 after two whole 16-wide steps.
    m, n, k = 33, 24, 40
    g = torch.Generator().manual_seed(11)
    a = torch.randn(k, m, generator=g).t() if layout[0] == "t" else torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t() if layout[1] == "t" else torch.randn(k, n, generator=g)
    a, b = a.to(device, torch.float16), b.to(device, torch.float16)
    assert lead_hint(a) != 0 or lead_hint(b) != 0
    bias = torch.randn(n, generator=g).to(device, torch.float16)
    out = ak.matmul(a, b, bias, "silu", config=config)
    assert rel_error(out, reference(a, b, bias, "silu")) < 1e-2


def test_hint_gives_16_byte_pipelined_loads_on_sm90():
    pytest.importorskip("triton.backends.nvidia")
    script = textwrap.dedent("""
        import os
        os.environ["TRITON_INTERPRET"] = "0"
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from autokernel.kernels.matmul import _matmul_kernel

        def ptx(lead_a, lead_b):
            sig = {name: "*fp16" for name in ("a_ptr", "b_ptr", "c_ptr", "bias_ptr", "z_ptr")}
            sig.update({name: "i32" for name in ("M", "N", "K", "stride_am", "stride_bn", "stride_cm", "stride_cn",
                                                 "stride_zm", "stride_zn", "stride_bias")})
            consts = dict(stride_ak=1, stride_bk=1, HAS_BIAS=False, STORE_Z=False, ACTIVATION="none", EVEN_K=False,
                          UPCAST=False, INDEX_64=False, A_LEAD=lead_a, B_LEAD=lead_b, M_RUN=128, N_RUN=128,
                          MASK_M=False, MASK_N=False, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8)
            order = ["a_ptr", "b_ptr", "c_ptr", "bias_ptr", "z_ptr", "M", "N", "K", "stride_am", "stride_ak",
                     "stride_bk", "stride_bn", "stride_cm", "stride_cn", "stride_zm", "stride_zn", "stride_bias",
                     "slope", *list(consts)[2:]]
            sig.update(slope="fp32", **{name: "constexpr" for name in consts})
            sig = {name: sig[name] for name in order}
            attrs = {(i,): [["tt.divisibility", 16]] for i in range(5)}
            src = ASTSource(_matmul_kernel, sig, consts, attrs)
            return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                  options={"num_warps": 4, "num_stages": 4}).asm["ptx"]

        print("unhinted", "cp.async.cg.shared.global" in ptx(0, 0))
        print("hinted", "cp.async.cg.shared.global" in ptx(8, -8))
    """)
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONWARNINGS="ignore",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # Without the hint a stride of K = 1000 halves compiles to 2-byte loads and no async copies.
    assert "unhinted False" in proc.stdout and "hinted True" in proc.stdout, proc.stdout


@pytest.mark.parametrize("block", [16, 32, 64, 128, 256])
def test_index_run_is_what_wrapped_tile_indices_hold(block):
    # The pointer kernels claim that a tile's indices wrapped at M (or N) run contiguously
    # in aligned groups of index_run(M, BLOCK): check the claim on every tile of many sizes.
    for size in [1, 2, 3, 7, 8, 12, 16, 30, 60, 100, 120, 128, 129, 1000, 4104, 50257]:
        run = index_run(size, block)
        assert run <= block and block % run == 0 and size % run == 0
        for tile in range(-(-size // block)):
            idx = [(tile * block + i) % size for i in range(block)]
            for g in range(0, block, run):
                group = idx[g:g + run]
                assert group[0] % run == 0 and group == list(range(group[0], group[0] + run)), (size, block, g)


@pytest.mark.parametrize("layout", ["nn", "nt"])
def test_the_square_pointer_tile_for_unvectorized_rows_is_correct(layout, device):
    # select.SCALAR_SQUARE (128x128x64, 8 warps, the pointer kernel) on rows of an odd K:
    # no hint, no vectors; a partial tile in every dimension and a K tail.
    from autokernel import select

    m, n, k = 131, 70, 67
    g = torch.Generator().manual_seed(12)
    a = torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t() if layout[1] == "t" else torch.randn(k, n, generator=g)
    a, b = a.to(device, torch.float16), b.to(device, torch.float16)
    assert lead_hint(a) == 0 and select.unvectorized(k, 2, layout)[0]
    bias = torch.randn(n, generator=g).to(device, torch.float16)
    out = ak.matmul(a, b, bias, "gelu", config=select.SCALAR_SQUARE)
    assert rel_error(out, reference(a, b, bias, "gelu")) < 1e-2

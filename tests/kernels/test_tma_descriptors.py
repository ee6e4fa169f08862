"""The TMA launch's host descriptors (kernels/matmul_tma.TmaLaunch) as a GPU launch makes
them, built on CPU tensors without launching: what each describes, that they are kept by
the operands' addresses, and that keeping them holds no tensor alive."""

import gc
import weakref

import pytest
import torch
import triton
import triton.language as tl

from autokernel import plans
from autokernel.kernels import launch as launch_mod
from autokernel.kernels import matmul_tma
from autokernel.kernels.launch import KernelLaunch
from autokernel.records import KernelConfig

CONFIG = KernelConfig(block_m=64, block_n=128, block_k=32, num_warps=4, num_stages=3, variant="tma",
                      epilogue_subtile=2)


def _operands(m=96, n=160, k=48):
    a = torch.empty(k, m, dtype=torch.float16).t()  # a transposed view: read as [K, M]
    b = torch.empty(n, k, dtype=torch.float16).t()  # nn.Linear's weight.t(): read as [N, K]
    c = torch.empty(m, n, dtype=torch.float16)
    return a, b, c


def _launch(a, b, c, config=CONFIG):
    operands = matmul_tma.tma_operands(a, b, c)
    assert operands is not None
    return matmul_tma.plan_matmul_tma(a, b, c, None, "none", 0.0, config, operands, interpret=False)


def test_descriptors_describe_the_row_major_storage_of_each_operand():
    a, b, c = _operands()
    da, db, dc = _launch(a, b, c).descriptors(a, b, c)
    assert (list(da.shape), list(da.strides), list(da.block_shape)) == ([48, 96], [96, 1], [32, 64])
    assert (list(db.shape), list(db.strides), list(db.block_shape)) == ([160, 48], [48, 1], [128, 32])
    assert (list(dc.shape), list(dc.strides), list(dc.block_shape)) == ([96, 160], [160, 1], [64, 64])  # half-width
    assert [d.base.data_ptr() for d in (da, db, dc)] == [a.data_ptr(), b.data_ptr(), c.data_ptr()]
    assert all(d.base.dtype == torch.float16 for d in (da, db, dc))


def test_descriptors_are_kept_by_address_and_hold_no_tensor():
    a, b, c = _operands()
    launch = _launch(a, b, c)
    first = launch.descriptors(a, b, c)
    assert launch.descriptors(a, b, c) is first  # the same operands: nothing made again
    a2, b2, c2 = _operands()
    assert launch.descriptors(a2, b2, c2) is not first
    alive = weakref.ref(c2)
    del a2, b2, c2
    gc.collect()
    assert alive() is None  # the kept descriptors hold an address, not the tensor


def test_descriptors_kept_are_bounded():
    a, b, c = _operands()
    launch = _launch(a, b, c)
    keep = [_operands() for _ in range(3 * matmul_tma._DESCRIPTORS_KEPT)]
    for ops in keep:
        launch.descriptors(*ops)
        assert len(launch.kept) <= matmul_tma._DESCRIPTORS_KEPT
    for _ in range(2 * matmul_tma._OPERAND_DESCRIPTORS_KEPT // len(keep) + 1):
        for ops in [_operands() for _ in range(len(keep))]:
            launch.descriptors(*ops)
            assert all(len(kept) <= matmul_tma._OPERAND_DESCRIPTORS_KEPT for kept in launch.by_operand)


def test_triples_not_kept_are_put_together_from_each_operands_descriptors():
    """A model's layers of one shape: one activation, a weight per layer, outputs cycling
    through a few blocks: more triples than are kept, few addresses per operand."""
    a, _, c = _operands()
    weights = [_operands()[1] for _ in range(2 * matmul_tma._DESCRIPTORS_KEPT)]
    launch = _launch(a, weights[0], c)
    first = [launch.descriptors(a, w, c) for w in weights]
    again = [launch.descriptors(a, w, c) for w in weights]
    for d1, d2 in zip(first, again):
        assert all(x is y for x, y in zip(d1, d2))  # each operand's descriptor made once
    assert first[0][0] is first[-1][0] and first[0][2] is first[-1][2]  # A's and C's shared


def test_warp_specialized_configs_describe_the_operands_on_the_device():
    a, b, c = _operands()
    launch = _launch(a, b, c, CONFIG.model_copy(update={"warp_specialize": True, "epilogue_subtile": 1}))
    assert isinstance(launch, KernelLaunch) and launch.kwargs["DEVICE_DESCRIPTORS"] is True


# Triton 3.6's wrapper of a kernel's C launcher where the kernel takes host tensor
# descriptors (triton/backends/nvidia/driver.py, wrap_handle_tensordesc), in its form:
# the launch's leading arguments pass through, each descriptor becomes what
# make_tensordesc_arg makes of it (a filled tensor map, then its shape and strides).
_WRAPPER_36 = '''
def wrap(launcher, signature, tensordesc_meta):
    tensordesc_indices = set(i for i, sig in enumerate(signature.values()) if sig.startswith("tensordesc"))

    def inner(*args):
        final_args = list(args[:_BASE_ARGS_FORMAT_LEN])
        tensordesc_idx = 0
        for i, arg in enumerate(args[_BASE_ARGS_FORMAT_LEN:]):
            if i in tensordesc_indices:
                final_args.extend(make_tensordesc_arg(arg, tensordesc_meta[tensordesc_idx]))
                tensordesc_idx += 1
            else:
                final_args.append(arg)
        return launcher(*final_args)

    return inner
'''
_SIGNATURE = {"a": "tensordesc<fp16[32, 64]>", "b": "tensordesc<fp16[128, 32]>", "c": "tensordesc<fp16[64, 64]>",
              "bias": "*fp16", "z": "*fp16", "M": "i32"}


def _wrapped(prefix_len: int, signature=_SIGNATURE):
    """(Triton 3.6's wrapper around a recording C launcher, the calls it saw, the maps filled)."""
    filled, calls = [], []

    def make_tensordesc_arg(arg, meta):
        filled.append((arg.base.data_ptr(), meta))
        return [("map", arg.base.data_ptr(), meta["swizzle"]), *arg.shape, *arg.strides]

    scope = {"_BASE_ARGS_FORMAT_LEN": prefix_len, "make_tensordesc_arg": make_tensordesc_arg}
    exec(_WRAPPER_36, scope)
    metas = [{"swizzle": 128 - i} for i in range(3)]
    return scope["wrap"](lambda *args: calls.append(args), signature, metas), calls, filled


def _replaying(launch, monkeypatch, wrapper_len: int = 13):
    """``launch`` (a TmaLaunch) as ``KernelLaunch._replay_with`` leaves it after its first GPU
    launch, its launcher Triton 3.6's wrapper with ``wrapper_len`` leading arguments."""
    inner, calls, filled = _wrapped(wrapper_len)
    kernel = launch.kernel
    kernel.head = (None, None, None, None)  # function, cooperative, pdl, packed metadata
    ours = len(kernel._prefix(0, None))
    kernel.expand = launch_mod._descriptor_launcher(inner, ours)
    kernel.direct = inner
    monkeypatch.setattr(KernelLaunch, "_direct_prefix", lambda self: ("prefix",) * ours)
    return inner, calls, filled


def test_a_replayed_launch_fills_each_operands_tensor_maps_once(monkeypatch):
    a, b, c = _operands()
    launch = _launch(a, b, c)
    inner, calls, filled = _replaying(launch, monkeypatch)
    prefix_len = 13
    assert launch.kernel.expand is not None
    for _ in range(3):
        launch(a, b, c, c, c)
    assert len(filled) == 3  # A's, B's and C's maps, on the first call only
    # Each call hands the C launcher what Triton's wrapper would have.
    inner(*("prefix",) * prefix_len, *launch.descriptors(a, b, c), c, c, *launch.kernel.args_tail)
    assert len(calls) == 4 and calls[0] == calls[1] == calls[2] == calls[3]
    a2, b2, c2 = _operands()
    launch(a2, b2, c2, c2, c2)  # other operands: their own maps
    assert [ptr for ptr, _ in filled[-3:]] == [a2.data_ptr(), b2.data_ptr(), c2.data_ptr()]
    assert calls[-1][prefix_len] == ("map", a2.data_ptr(), 128)
    # Outputs cycling through more blocks than triples are kept: each output's map filled
    # once, A's and B's not again.
    outs = [torch.empty_like(c) for _ in range(2 * matmul_tma._DESCRIPTORS_KEPT)]
    before = len(filled)
    for _ in range(2):
        for out in outs:
            launch(a, b, out, out, out)
            assert calls[-1][prefix_len:prefix_len + 2] == (("map", a.data_ptr(), 128), 48)
    assert [ptr for ptr, _ in filled[before:]] == [out.data_ptr() for out in outs]


def test_a_launcher_of_another_form_is_called_as_it_is(monkeypatch):
    a, b, c = _operands()
    inner, _, _ = _wrapped(13)
    assert launch_mod._descriptor_launcher(inner, 12) is None  # another layout of the leading arguments
    assert launch_mod._descriptor_launcher(lambda *args: None, 13) is None  # no wrapper: a C function
    late = dict(_SIGNATURE)
    late = {"bias": late.pop("bias"), **late}  # descriptors not the leading parameters
    assert launch_mod._descriptor_launcher(_wrapped(13, late)[0], 13) is None
    launch = _launch(a, b, c)
    _, calls, filled = _replaying(launch, monkeypatch, wrapper_len=12)  # its leading arguments differ from ours
    assert launch.kernel.expand is None
    called = []
    monkeypatch.setattr(KernelLaunch, "__call__", lambda self, *args: called.append(args))
    launch(a, b, c, c, c)
    assert called == [(*launch.descriptors(a, b, c), c, c)] and not filled


@triton.jit
def _origins_kernel(out_ptr, tiles_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, A_TRANS: tl.constexpr,
                    B_TRANS: tl.constexpr, C_PTR: tl.constexpr, SWAP_AB: tl.constexpr):
    pid = tl.program_id(0)
    off_m, off_n = matmul_tma._tile_origin(tl.load(tiles_ptr + 2 * pid), tl.load(tiles_ptr + 2 * pid + 1), M, N,
                                           BLOCK_M, BLOCK_N, A_TRANS, B_TRANS, C_PTR, SWAP_AB)
    tl.store(out_ptr + 2 * pid, off_m)
    tl.store(out_ptr + 2 * pid + 1, off_n)


@pytest.mark.skipif(not plans.runtime.INTERPRETER, reason="reads tile origins on the interpreter")
@pytest.mark.parametrize("flags", [(True, False, False, False), (False, True, False, False), (False, True, True, False),
                                   (True, True, True, False), (False, True, False, True), (True, False, False, True)])
@pytest.mark.parametrize("block", [(64, 128), (128, 256), (16, 32)])
@pytest.mark.parametrize("m,n", [(11081, 1001), (1081, 2000), (388, 129), (5, 7), (200, 264), (129, 1000)])
def test_tile_origins_start_on_16_bytes_along_described_contiguous_rows(flags, block, m, n):
    """A box's start along the contiguous dimension of A as a transposed view (M), of C and of
    a row-major B (N) at an odd element stopped the H200 (an illegal instruction), over rows of
    padded storage: there every origin is a multiple of 8 elements; elsewhere (A row-major;
    N where B is a transposed view and C has no descriptor) the last tile ends at the edge
    as before. With swap_ab (the kernel's M and N are C's columns and rows) C's contiguous
    dimension is the kernel's M. Every origin is no later than its tile's own start, and the box reaches the
    tile's end (or the operand's). The first two and last two tiles of each dimension (the
    interpreter runs one program at a time)."""
    a_trans, b_trans, c_ptr, swap = flags
    bm, bn = block
    tiles_m, tiles_n = -(-m // bm), -(-n // bn)
    rows = sorted({0, 1, tiles_m - 2, tiles_m - 1} & set(range(tiles_m)))
    cols = sorted({0, 1, tiles_n - 2, tiles_n - 1} & set(range(tiles_n)))
    tiles = [(p, q) for p in rows for q in cols]
    out = torch.zeros(2 * len(tiles), dtype=torch.int32)
    _origins_kernel[(len(tiles),)](out, torch.tensor(tiles, dtype=torch.int32).flatten(), m, n, bm, bn, a_trans,
                                   b_trans, c_ptr, swap)
    align = (8 if a_trans or swap else 1, 8 if not (b_trans and (c_ptr or swap)) else 1)
    for (p_m, p_n), (off_m, off_n) in zip(tiles, out.view(-1, 2).tolist()):
        for off, p, block_, size, step in ((off_m, p_m, bm, m, align[0]), (off_n, p_n, bn, n, align[1])):
            assert off % step == 0 and 0 <= off <= p * block_
            assert off + block_ >= min((p + 1) * block_, size)  # covers the tile
            if off < p * block_:  # moved back: ends at the edge, or at most 7 past it where aligned
                assert 0 <= off + block_ - size < step or (off == 0 and size < block_)

"""The TMA launch's host descriptors (kernels/matmul_tma.TmaLaunch) as a GPU launch makes
them, built on CPU tensors without launching: what each describes, that they are kept by
the operands' addresses, and that keeping them holds no tensor alive."""

import gc
import weakref

import torch

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


def test_warp_specialized_configs_describe_the_operands_on_the_device():
    a, b, c = _operands()
    launch = _launch(a, b, c, CONFIG.model_copy(update={"warp_specialize": True, "epilogue_subtile": 1}))
    assert isinstance(launch, KernelLaunch) and launch.kwargs["DEVICE_DESCRIPTORS"] is True

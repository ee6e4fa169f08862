"""``aligned.AlignedCopy``: operands copied, in one launch, into rows padded to 32 bytes,
keeping their shape, values and layout (row-major or a transposed view); copies kept in a
stream's buffer up to ``KEEP_BYTES``, fresh above."""

import pytest
import torch

from autokernel import runtime
from autokernel.kernels import aligned


def operand(rows, cols, how, dtype, seed, device):
    """[rows, cols]: row-major with rows of ``cols`` ("n"), a transposed view ("t"), or the
    columns from 1 of a wider row-major tensor, its base off 16 bytes ("s")."""
    g = torch.Generator().manual_seed(seed)
    if how == "t":
        t = torch.randn(cols, rows, generator=g).t()
    elif how == "s":
        t = torch.randn(rows, cols + 1, generator=g)[:, 1:]
    else:
        t = torch.randn(rows, cols, generator=g)
    return t.to(device=device, dtype=dtype)


def aligned_rows(t):
    lead = t.stride(0) if t.stride(1) == 1 else t.stride(1)
    return (lead * t.element_size()) % aligned.ROW_ALIGN_BYTES == 0 and t.data_ptr() % 16 == 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("how_a,how_b", [("n", "t"), ("t", "n"), ("s", "s"), ("t", "t")])
def test_both_operands_copied_in_one_launch_keep_shape_values_and_layout(device, dtype, how_a, how_b):
    # Sizes past one 32 x 128 tile in each direction, none a multiple of 8.
    a = operand(45, 141, how_a, dtype, 0, device)
    b = operand(141, 37, how_b, dtype, 1, device)
    copy = aligned.AlignedCopy(a, b, True, True, runtime.INTERPRETER)
    a2, b2 = copy(a, b)
    for x, y in ((a, a2), (b, b2)):
        assert y.shape == x.shape and torch.equal(y, x)
        assert (y.stride(1) == 1) == (x.stride(1) == 1)  # the layout kept
        assert aligned_rows(y)


@pytest.mark.parametrize("which", ["a", "b"])
def test_one_operand_copied_the_other_handed_back_as_it_is(device, which):
    a = operand(33, 77, "n", torch.float16, 2, device)
    b = operand(77, 129, "t", torch.float16, 3, device)
    copy = aligned.AlignedCopy(a, b, which == "a", which == "b", runtime.INTERPRETER)
    a2, b2 = copy(a, b)
    assert torch.equal(a2, a) and torch.equal(b2, b)
    assert (a2 is a) == (which == "b") and (b2 is b) == (which == "a")
    assert aligned_rows(a2 if which == "a" else b2)


def test_a_kept_copy_reuses_its_buffer_and_later_operands_overwrite_it(device):
    a = operand(40, 99, "n", torch.float16, 4, device)
    b = operand(99, 64, "n", torch.float16, 5, device)
    copy = aligned.AlignedCopy(a, b, True, False, runtime.INTERPRETER)
    first = copy(a, b)[0]
    a_new = operand(40, 99, "n", torch.float16, 6, device)
    second = copy(a_new, b)[0]
    assert second.data_ptr() == first.data_ptr() and torch.equal(second, a_new)


def test_a_copy_above_the_kept_size_takes_a_fresh_buffer(device, monkeypatch):
    monkeypatch.setattr(aligned, "KEEP_BYTES", 0)
    a = operand(40, 99, "n", torch.float16, 7, device)
    b = operand(99, 64, "n", torch.float16, 8, device)
    copy = aligned.AlignedCopy(a, b, True, False, runtime.INTERPRETER)
    first = copy(a, b)[0]
    second = copy(a, b)[0]
    assert torch.equal(first, a) and torch.equal(second, a) and aligned_rows(second)
    assert second.data_ptr() != first.data_ptr()  # the first is still alive: not reused


def test_nothing_to_copy_or_32_bit_operands_are_refused():
    a = torch.zeros(8, 9, dtype=torch.float16)
    b = torch.zeros(9, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match="needs an operand"):
        aligned.AlignedCopy(a, b, False, False, True)
    with pytest.raises(ValueError, match="16-bit"):
        aligned.AlignedCopy(a.float(), b.float(), True, False, True)

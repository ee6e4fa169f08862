"""Operands copied into rows that start on 32-byte boundaries, both in one launch.

A 16-bit operand whose rows (along its unit stride) are no multiple of 16 bytes long, or
whose base is off 16 bytes, takes no vector loads and no TMA descriptor; a copy of it whose
rows are padded does (``plans.Padding`` decides where the copy pays). Copied with torch, each
operand costs a ``torch.empty`` and a ``copy_``, some 19 µs of host time per operand on an
H200 host, more than the GEMM's own launch; here one launch copies A and B, into buffers
kept per stream (``launch.stream_buffer``) up to ``KEEP_BYTES`` each, so that a call
allocates nothing and the TMA kernel's descriptors of the copies are made once.

Each operand is copied as the row-major matrix it is stored as: a transposed view
([M, K] with its first dimension contiguous) as the [K, M] rows under it, and handed back
transposed again, so the copy keeps the operand's layout.
"""

import torch
import triton
import triton.language as tl

from autokernel.kernels.launch import KernelLaunch, hash_callees_first, stream_buffer, stream_handle

ROW_ALIGN_BYTES = 32
"""The padded rows' length and the buffers' base are multiples of this many bytes: 16 is what
a TMA descriptor asks of every stride but the last, and what 16-byte vector loads need; 32
keeps every row on whole 32-byte sectors, where rows of an odd multiple of 16 bytes load
slower (``select.split_rows``)."""

KEEP_BYTES = 32 * 2**20
"""The largest copy (bytes, padding included) kept in a per-stream buffer between calls;
larger ones are allocated per call from torch's caching allocator. Copying 32 MiB takes
some 20 µs of GPU time, against which a few µs of host time per call are small, and it
bounds what an idle process holds for the copies (two buffers per stream)."""

_BLOCK_ROWS, _BLOCK_COLS, _WARPS = 16, 512, 4


@triton.jit
def _copy_tile(src, dst, rows, cols, src_stride, dst_stride, tile,
               BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    tiles_c = tl.cdiv(cols, BLOCK_COLS)
    r = (tile // tiles_c) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    c = (tile % tiles_c) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    r64 = r.to(tl.int64)[:, None]
    x = tl.load(src + r64 * src_stride + c[None, :], mask=mask)
    tl.store(dst + r64 * dst_stride + c[None, :], x, mask=mask)


# The padded strides are not specialized: Triton's divisible-by-16 specialization of a
# stride made the stores of rows padded to a multiple of 16 elements run at 0.6-1.1 TB/s
# on an H200, against 3.7-3.9 TB/s unspecialized (one operand's copy alone, seven shapes;
# torch's copy_: 1.8).
@triton.jit(do_not_specialize=["dst_stride_a", "dst_stride_b"])
def _copy_rows_kernel(src_a, dst_a, src_b, dst_b,
                      rows_a, cols_a, src_stride_a, dst_stride_a,
                      rows_b, cols_b, src_stride_b, dst_stride_b, tiles_a,
                      BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    """Programs [0, tiles_a) copy A's tiles, the rest B's; each a BLOCK_ROWS x BLOCK_COLS
    piece of a row-major matrix into rows of another stride."""
    pid = tl.program_id(0)
    if pid < tiles_a:
        _copy_tile(src_a, dst_a, rows_a, cols_a, src_stride_a, dst_stride_a, pid, BLOCK_ROWS, BLOCK_COLS)
    else:
        _copy_tile(src_b, dst_b, rows_b, cols_b, src_stride_b, dst_stride_b, pid - tiles_a,
                   BLOCK_ROWS, BLOCK_COLS)


hash_callees_first(globals())  # one cache key per kernel in every process (see there)


def _stored(t: torch.Tensor) -> tuple[int, int, int, bool]:
    """(rows, cols, row stride, transposed) of the row-major matrix ``t`` is stored as (one
    unit stride): ``t`` itself, or for a transposed view the matrix under it."""
    if t.stride(1) == 1 and t.shape[1] > 1 or t.shape[0] == 1:
        return t.shape[0], t.shape[1], t.stride(0), False
    return t.shape[1], t.shape[0], t.stride(1), True


def _lead(cols: int, t: torch.Tensor) -> int:
    per = ROW_ALIGN_BYTES // t.element_size()
    return -(-cols // per) * per


_VIEWS: dict = {}
"""(buffer name, device, stream) -> (the stream's buffer, {layout: the copy's view of it}):
a call makes no view; a buffer that grew replaces its entry, and with it the old views."""
_MAX_VIEWS = 256


def _kept_view(name: str, nbytes: int, device, stream: int, layout: tuple, make) -> torch.Tensor:
    """``make(buffer)``, the view of layout ``layout`` over the stream's buffer ``name`` of at
    least ``nbytes``, made once per buffer and layout."""
    buf = stream_buffer(name, nbytes, device, stream, torch.uint8)
    if stream and torch._C._cuda_isCurrentStreamCapturing():  # a capture's own buffer: not kept
        return make(buf)
    where = (name, device, stream)
    entry = _VIEWS.get(where)
    if entry is None or entry[0] is not buf or len(entry[1]) >= _MAX_VIEWS:
        entry = _VIEWS[where] = (buf, {})
    view = entry[1].get(layout)
    if view is None:
        view = entry[1][layout] = make(buf)
    return view


class _Target:
    """Where one operand's copy goes: a view of rows padded to 32 bytes, over a buffer of
    the current stream (or a fresh one, above ``KEEP_BYTES``), in the operand's layout."""

    __slots__ = ("name", "rows", "cols", "stride", "lead", "trans", "dtype", "nbytes", "keep")

    def __init__(self, name: str, t: torch.Tensor):
        self.name = name
        self.rows, self.cols, self.stride, self.trans = _stored(t)  # stride: the operand's own row stride
        self.lead = _lead(self.cols, t)
        self.dtype = t.dtype
        self.nbytes = ((self.rows - 1) * self.lead + self.cols) * t.element_size()
        self.keep = self.nbytes <= KEEP_BYTES

    def __call__(self, t: torch.Tensor, stream: int) -> torch.Tensor:
        if not self.keep:
            return self._view(torch.empty(self.nbytes, dtype=torch.uint8, device=t.device))
        return _kept_view(self.name, self.nbytes, t.device, stream,
                          (self.rows, self.cols, self.lead, self.trans, self.dtype), self._view)

    def _view(self, buf: torch.Tensor) -> torch.Tensor:
        stored = buf[: self.nbytes].view(self.dtype).as_strided((self.rows, self.cols), (self.lead, 1))
        return stored.t() if self.trans else stored


class AlignedCopy:
    """Copies of A (if ``copy_a``) and B (if ``copy_b``), operands laid out like ``a`` and
    ``b``, into rows padded to 32 bytes, made by one launch: called as ``(a, b) -> (a', b')``
    with operands of that layout, it returns the copies (an operand not copied as it was).
    The copies are the same shape and layout as the operands; those kept in a stream's
    buffer are overwritten by the next call on that stream, after the launches queued
    before it have read them."""

    __slots__ = ("targets", "launch")

    def __init__(self, a: torch.Tensor, b: torch.Tensor, copy_a: bool, copy_b: bool, interpret: bool):
        if not (copy_a or copy_b):
            raise ValueError("AlignedCopy needs an operand to copy")
        for t in (a, b):
            if t.dtype.itemsize != 2:
                raise ValueError(f"AlignedCopy copies 16-bit operands, got {t.dtype}")
        self.targets = (_Target("aligned_a", a) if copy_a else None, _Target("aligned_b", b) if copy_b else None)
        shapes, tiles = [], []
        for target in self.targets:
            if target is None:
                shapes.append((0, 0, 0, 0))
                tiles.append(0)
            else:
                shapes.append((target.rows, target.cols, target.stride, target.lead))
                tiles.append(triton.cdiv(target.rows, _BLOCK_ROWS) * triton.cdiv(target.cols, _BLOCK_COLS))
        self.launch = KernelLaunch(
            _copy_rows_kernel, (tiles[0] + tiles[1],), (*shapes[0], *shapes[1], tiles[0]),
            dict(BLOCK_ROWS=_BLOCK_ROWS, BLOCK_COLS=_BLOCK_COLS), dict(num_warps=_WARPS),
            a.device, interpret)

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        stream = stream_handle(a.device)
        ta, tb = self.targets
        a2 = ta(a, stream) if ta is not None else a
        b2 = tb(b, stream) if tb is not None else b
        # The kernel reads every pointer: an operand not copied stands in for both of its own.
        sa, da = (a, a2) if ta is not None else (b, b2)
        sb, db = (b, b2) if tb is not None else (a, a2)
        self.launch(sa, da, sb, db)
        return a2, b2

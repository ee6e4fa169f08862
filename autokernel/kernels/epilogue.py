"""Activations and their derivatives as Triton helpers, selected at compile time.

``ACTIVATION`` is a constexpr string: one of ``ACTIVATIONS``. Everything is computed in
float32 on the accumulator, before the cast to the output dtype.
"""

import triton
import triton.language as tl

from autokernel import runtime
from autokernel.records import ACTIVATIONS  # the names, stated once with the records

# Compiled Triton reads a global only when it is a tl.constexpr instance (an annotation is
# not enough, and the interpreter doesn't check). Keep the tensor on the left of each
# product: the interpreter can't multiply a constexpr by a tensor.
_INV_SQRT2 = tl.constexpr(0.7071067811865476)
_INV_SQRT_2PI = tl.constexpr(0.3989422804014327)

# The forward gelu_tanh and silu take exactly two special-function (MUFU) instructions
# per element, ex2.approx.ftz and rcp.approx.ftz, as z / (1 + 2^x): the same two
# operations tl.sigmoid compiles to, without the range fix-ups Triton adds around exp and
# the IEEE division. gelu_tanh(z) = 0.5 z (1 + tanh u) = z sigmoid(2u), so both are
# z * sigmoid(.), relatively accurate everywhere: 0.5 z (1 + tanh u) by one tanh.approx
# is cheaper (+3.5 % over the plain GEMM against +6.2 % on the H100's fused shapes) but
# cancels where tanh u is near -1, up to ~2e-2 relative error in bf16 in the negative
# tail (docs/kernel-notes.md). The interpreter has no PTX: there each instruction is its
# exact formula, with the reciprocal 0 where 2^x would pass 2^127 (as ftz makes it on the
# GPU: z * 6e-39 is zero in the output dtype's terms, and -inf * 0 is NaN, as in torch).
_HW_MATH = tl.constexpr(not runtime.INTERPRETER)
"""Compiled for a GPU: PTX approximate instructions may be used (not in the interpreter)."""
_LOG2E = tl.constexpr(1.4426950408889634)
_EXP2_MAX = tl.constexpr(127.0)
# gelu_tanh(z) = z / (1 + 2^x), x = -2 log2(e) u, u = sqrt(2/pi) (z + 0.044715 z^3):
# x = z (X0 + X1 z^2).
_GELU_X0 = tl.constexpr(-2.0 * 1.4426950408889634 * 0.7978845608028654)
_GELU_X1 = tl.constexpr(-2.0 * 1.4426950408889634 * 0.7978845608028654 * 0.044715)
# d gelu_tanh / dz = s + z s (1 - s) (D0 + D1 z^2), s = sigmoid(2u), D = 2 du/dz.
_GELU_D0 = tl.constexpr(2.0 * 0.7978845608028654)
_GELU_D1 = tl.constexpr(2.0 * 0.7978845608028654 * 3.0 * 0.044715)


@triton.jit
def _ex2_approx(x):
    """2^x by one MUFU.EX2 (ex2.approx.ftz: GPU only)."""
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


@triton.jit
def _rcp_approx(x):
    """1 / x by one MUFU.RCP (rcp.approx.ftz: GPU only)."""
    return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


@triton.jit
def _times_sigmoid(z, x):
    """z / (1 + 2^x), i.e. z * sigmoid(-x ln 2): on the GPU one MUFU.EX2 and one MUFU.RCP
    (ftz: 2^x below 2^-126 is 0, above 2^128 inf, so z * 0 for large x)."""
    if _HW_MATH:
        r = _rcp_approx(1.0 + _ex2_approx(x))
    else:  # as the GPU's ftz instructions: 0 where 2^x overflows, so that act(-inf) is NaN as in torch
        r = tl.where(x > _EXP2_MAX, 0.0, 1.0 / (1.0 + tl.math.exp2(tl.minimum(x, _EXP2_MAX))))
    return z * r


@triton.jit
def _sigmoid_parts(x):
    """(s, 1 - s) for s = 1 / (1 + 2^x), each without cancellation: 1 - s = 2^x s; (0, 1)
    where 2^x overflows, so that act'(-inf) is NaN as in torch (-inf * 0)."""
    e = tl.math.exp2(tl.minimum(x, _EXP2_MAX))
    s = 1.0 / (1.0 + e)
    big = x > _EXP2_MAX
    return tl.where(big, 0.0, s), tl.where(big, 1.0, e * s)


# The normal CDF of the exact gelu, Phi(z) = erfc(-z / sqrt 2) / 2, by a fit of erfc in Numerical
# Recipes' form: erfc(a) = t exp(-a^2 + P(t)), t = 1 / (1 + T a), a = |z| / sqrt 2 >= 0, with P of
# degree 6 (minimax over a in [0, 9.5], where erfc is a normal float32; T chosen with it), within
# 1.1e-6 of erfc relatively everywhere: the negative tail keeps its relative accuracy (0.5 (1 + erf)
# loses it by cancellation), and so does gelu' where it crosses zero at z = -0.75. a^2 is taken as
# z^2 / 2, one rounding from z, for the exponent's accuracy at large |z|. One rcp and one ex2
# (MUFU) and thirteen FMAs or multiplies, where Numerical Recipes' degree 9 (1.2e-7) took fifteen:
# the epilogue runs after the main loop, its cost the gelu's over gelu_tanh. Spellings with fewer
# instructions (the 1/2 and log2(e) folded into the coefficients) ran slower on the 8-warp tiles
# on an H200 (docs/kernel-notes.md).
_PHI_T = tl.constexpr(0.38)
_PHI_P0 = tl.constexpr(-1.538625717165519)
_PHI_P1 = tl.constexpr(0.9786274597598343)
_PHI_P2 = tl.constexpr(0.5684596190201272)
_PHI_P3 = tl.constexpr(-0.2960231205963449)
_PHI_P4 = tl.constexpr(0.9738338093234622)
_PHI_P5 = tl.constexpr(-0.9643893260853748)
_PHI_P6 = tl.constexpr(0.2781180470309098)


@triton.jit
def _normal_cdf(z):
    """Phi(z) for a float32 tile: 0 at -inf, 1 at +inf, NaN stays NaN."""
    a = tl.abs(z) * _INV_SQRT2
    if _HW_MATH:
        t = _rcp_approx(1.0 + _PHI_T * a)
    else:
        t = 1.0 / (1.0 + _PHI_T * a)
    p = tl.fma(t, _PHI_P6, _PHI_P5)
    p = tl.fma(t, p, _PHI_P4)
    p = tl.fma(t, p, _PHI_P3)
    p = tl.fma(t, p, _PHI_P2)
    p = tl.fma(t, p, _PHI_P1)
    p = tl.fma(t, p, _PHI_P0)
    y = (p - 0.5 * (z * z)) * _LOG2E
    if _HW_MATH:
        e = _ex2_approx(y)
    else:
        e = tl.math.exp2(y)
    half_erfc = 0.5 * (t * e)  # erfc(|z| / sqrt 2) / 2: Phi(-|z|)
    return tl.where(z < 0.0, half_erfc, 1.0 - half_erfc)


@triton.jit
def apply_activation(z, slope, ACTIVATION: tl.constexpr):
    """act(z) for a float32 tile z; ``slope`` is leaky_relu's negative slope."""
    if ACTIVATION == "relu":
        z = tl.maximum(z, 0.0, propagate_nan=tl.PropagateNan.ALL)  # NaN stays NaN, as in torch.relu
    elif ACTIVATION == "leaky_relu":
        z = tl.where(z >= 0.0, z, z * slope)
    elif ACTIVATION == "gelu":
        z = z * _normal_cdf(z)
    elif ACTIVATION == "gelu_tanh":
        z = _times_sigmoid(z, z * tl.fma(z * z, _GELU_X1, _GELU_X0))
    elif ACTIVATION == "silu":
        z = _times_sigmoid(z, z * -_LOG2E)
    return z


@triton.jit
def activation_grad(z, slope, ACTIVATION: tl.constexpr):
    """d act(z) / dz for a float32 tile of pre-activations z. At z = 0 the kinked ones take
    the side below, as torch's backward does (relu 0, leaky_relu the slope): a layer whose
    input rows are zeros and have no bias has every z there exactly 0."""
    if ACTIVATION == "relu":
        g = tl.where(z > 0.0, 1.0, 0.0)
    elif ACTIVATION == "leaky_relu":
        g = tl.where(z > 0.0, 1.0, slope)
    elif ACTIVATION == "gelu":
        pdf = tl.exp(-0.5 * z * z) * _INV_SQRT_2PI
        g = _normal_cdf(z) + z * pdf
    elif ACTIVATION == "gelu_tanh":
        s, s_c = _sigmoid_parts(z * tl.fma(z * z, _GELU_X1, _GELU_X0))
        g = s + z * (s_c * s) * tl.fma(z * z, _GELU_D1, _GELU_D0)
    elif ACTIVATION == "silu":
        s, s_c = _sigmoid_parts(z * -_LOG2E)
        g = s * (1.0 + z * s_c)
    else:
        g = tl.full(z.shape, 1.0, tl.float32)
    return g


@triton.jit
def store_epilogue(
    acc, offs_m, offs_n, M, N,
    c_ptr, stride_cm, stride_cn, bias_ptr, stride_bias, z_ptr, stride_zm, stride_zn, slope,
    HAS_BIAS: tl.constexpr, STORE_Z: tl.constexpr, ACTIVATION: tl.constexpr, INDEX_64: tl.constexpr,
    row_from=0, col_from=0, FROM: tl.constexpr = False, BIAS_ROWS: tl.constexpr = False,
):
    """The GEMM epilogue on a float32 tile ``acc`` of rows ``offs_m`` and columns ``offs_n``:
    + bias (any stride), Z stored when STORE_Z (for a backward that needs act'(Z)), then
    C = act(.) in C's dtype; rows and columns past M and N are masked out, and with FROM
    those before ``row_from`` and ``col_from`` too (a tile that overlaps the one before it
    stores only its own). The bounds go in the mask, not the indices: indices that stay
    contiguous keep the stores vectorized. BIAS_ROWS: the bias runs along the rows (a tile
    of C^T)."""
    if HAS_BIAS and BIAS_ROWS:
        bias = tl.load(bias_ptr + offs_m.to(tl.int64) * stride_bias, mask=offs_m < M, other=0.0).to(tl.float32)
        acc = acc + bias[:, None]
    elif HAS_BIAS:
        # Any bias stride (a column of a matrix, a slice); int64: it may be large.
        bias = tl.load(bias_ptr + offs_n.to(tl.int64) * stride_bias, mask=offs_n < N, other=0.0).to(tl.float32)
        acc = acc + bias[None, :]
    if INDEX_64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if FROM:
        mask = mask & (offs_m[:, None] >= row_from) & (offs_n[None, :] >= col_from)
    if STORE_Z:
        z_ptrs = z_ptr + offs_m[:, None] * stride_zm + offs_n[None, :] * stride_zn
        tl.store(z_ptrs, acc.to(z_ptr.dtype.element_ty), mask=mask)
    acc = apply_activation(acc, slope, ACTIVATION)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)

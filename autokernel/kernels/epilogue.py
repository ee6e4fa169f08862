"""Activations and their derivatives as Triton helpers, selected at compile time.

``ACTIVATION`` is a constexpr string: one of ``ACTIVATIONS``, or (forward only) one of
the internal ``MATH_VARIANTS``. Everything is computed in float32 on the accumulator,
before the cast to the output dtype.
"""

import triton
import triton.language as tl

from autokernel import runtime

ACTIVATIONS = ("none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu")

# Other spellings of gelu_tanh and silu for the forward epilogue, with fewer SFU (MUFU)
# operations per element: the H100 issues 16 MUFU results per clock per SM against 128
# FMAs, and gelu_tanh/silu as written below take two (ex2, then a reciprocal inside the
# division), which made them cost +6-10 % over the plain GEMM
# (docs/runs/kernels/bias_early_h100.txt). Not public: ACTIVATIONS and the API refuse
# them; scripts/epilogue_math.py launches them (api.launch) to race them and measure
# their error. Each computes act(z) = z * sigmoid(x), x = 2u for gelu_tanh (u its tanh
# argument), x = z for silu, so that 1 + exp(-x) never cancels, except "mufu1". Per
# element (gelu_tanh/silu; sm_90 SASS counted by scripts/epilogue_sass.py, the shipped
# spellings: 2 MUFU + 18/10 FMA-pipe instructions):
#   mufu2   ex2.approx.ftz + rcp.approx.ftz, nothing else: 2 MUFU + 5/3 (the shipped
#           operations without Triton's range fix-ups around ex2 and the division)
#   mufu1   0.5 z (1 + tanh.approx(u)): 1 MUFU (MUFU.TANH) + 5/2; tanh.approx's error
#           (~2^-11 relative) becomes an absolute one in 1 + tanh where tanh(u) -> -1
#   newton  ex2.approx.ftz, then 1 / (1 + e) by two Newton steps from an integer guess:
#           1 MUFU + 11/9
#   poly    2^x by a degree-4 polynomial on the FMA pipe (exponent added as an integer),
#           then rcp.approx.ftz: 1 MUFU + 15/13
#   poly0   the polynomial and the Newton reciprocal: no MUFU, 20/18
# PTX can't run under Triton's interpreter: there each hardware instruction is replaced
# by its exact formula (``_HW_MATH``), while the polynomial and the Newton steps, plain
# arithmetic, run as written.
MATH_VARIANTS = {
    base: tuple(f"{base}_{kind}" for kind in ("mufu2", "mufu1", "newton", "poly", "poly0"))
    for base in ("gelu_tanh", "silu")
}

# Compiled Triton reads a global only when it is a tl.constexpr instance (an annotation is
# not enough, and the interpreter doesn't check). Keep the tensor on the left of each
# product: the interpreter can't multiply a constexpr by a tensor.
_SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
_GELU_CUBIC = tl.constexpr(0.044715)
_INV_SQRT2 = tl.constexpr(0.7071067811865476)
_INV_SQRT_2PI = tl.constexpr(0.3989422804014327)

_HW_MATH = tl.constexpr(not runtime.INTERPRETER)
"""Compiled for a GPU: PTX approximate instructions may be used (not in the interpreter)."""
_LOG2E = tl.constexpr(1.4426950408889634)
# gelu_tanh(z) = z * sigmoid(2u) = z / (1 + 2^x), x = z (A + B z^2), u = sqrt(2/pi) (z + 0.044715 z^3).
_GELU_X_A = tl.constexpr(-2.0 * 0.7978845608028654 * 1.4426950408889634)
_GELU_X_B = tl.constexpr(-2.0 * 0.7978845608028654 * 1.4426950408889634 * 0.044715)
_GELU_U_B = tl.constexpr(0.7978845608028654 * 0.044715)
# 2^f on [-0.5, 0.5], degree 4, minimax relative error 2.6e-6 (2^-18.6; fp16's half ulp is 2^-11).
_EXP2_C0 = tl.constexpr(0.9999992847442627)
_EXP2_C1 = tl.constexpr(0.6931217908859253)
_EXP2_C2 = tl.constexpr(0.240247443318367)
_EXP2_C3 = tl.constexpr(0.05591785907745361)
_EXP2_C4 = tl.constexpr(0.009570102207362652)
_ROUND_MAGIC = tl.constexpr(12582912.0)  # 1.5 * 2^23: x + it holds round(x) in its low mantissa bits
_EXP2_LIMIT = tl.constexpr(125.0)  # |x| <= 125 keeps the built exponent field within 1..254
# 1/d's first guess 0x7EF311C3 - bits(d) is within 5.1 %; two Newton steps: 6.6e-6.
_RCP_MAGIC = tl.constexpr(0x7EF311C3)


@triton.jit
def _tanh(x):
    # tanh through sigmoid: one exp, no libdevice dependency, and works in the interpreter.
    return 2.0 * tl.sigmoid(2.0 * x) - 1.0


@triton.jit
def _ex2_hw(x):
    """2^x by one MUFU.EX2 (ftz: below 2^-126 gives 0; above 2^128, inf)."""
    if _HW_MATH:
        y = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        y = tl.math.exp2(x)
    return y


@triton.jit
def _rcp_hw(x):
    """1/x by one MUFU.RCP (ftz; relative error ~2^-23)."""
    if _HW_MATH:
        y = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        y = 1.0 / x
    return y


@triton.jit
def _tanh_hw(x):
    """tanh(x) by one MUFU.TANH (relative error ~2^-11)."""
    if _HW_MATH:
        y = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        y = _tanh(x)
    return y


@triton.jit
def _exp2_poly(x):
    """2^x on the FMA pipe, relative error ~3e-6; x is clamped to [-125, 125]: 2 min/max,
    3 adds (round to nearest by the magic constant), 4 FMAs, a shift and an integer add."""
    x = tl.minimum(tl.maximum(x, -_EXP2_LIMIT), _EXP2_LIMIT)
    t = x + _ROUND_MAGIC
    f = x - (t - _ROUND_MAGIC)  # in [-0.5, 0.5]
    p = tl.fma(f, _EXP2_C4, _EXP2_C3)
    p = tl.fma(p, f, _EXP2_C2)
    p = tl.fma(p, f, _EXP2_C1)
    p = tl.fma(p, f, _EXP2_C0)
    # t's bits are 0x4B400000 + round(x): shifted left by 23, only round(x) << 23 is left,
    # which added to p's bits multiplies p by 2^round(x).
    bits = p.to(tl.int32, bitcast=True) + (t.to(tl.int32, bitcast=True) << 23)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _rcp_newton(d):
    """1/d for a finite normal d > 0 on the FMA pipe, relative error ~7e-6: an integer
    first guess and two Newton steps (4 FMAs)."""
    y = (-d.to(tl.int32, bitcast=True) + _RCP_MAGIC).to(tl.float32, bitcast=True)
    y = tl.fma(y, tl.fma(-d, y, 1.0), y)
    y = tl.fma(y, tl.fma(-d, y, 1.0), y)
    return y


@triton.jit
def _sigmoid_times(z, x, KIND: tl.constexpr):
    """z * sigmoid(-x * ln 2) = z / (1 + 2^x), the exp and the reciprocal as KIND says."""
    if KIND == "mufu2":
        r = z * _rcp_hw(1.0 + _ex2_hw(x))
    elif KIND == "newton":
        # min: 1 + 2^x must stay finite for the integer guess.
        r = z * _rcp_newton(1.0 + _ex2_hw(tl.minimum(x, _EXP2_LIMIT)))
    elif KIND == "poly":
        r = z * _rcp_hw(1.0 + _exp2_poly(x))
    else:  # "poly0"
        r = z * _rcp_newton(1.0 + _exp2_poly(x))
    return r


@triton.jit
def _math_variant(z, ACTIVATION: tl.constexpr):
    """An internal spelling of gelu_tanh or silu (MATH_VARIANTS) on a float32 tile z."""
    if ACTIVATION == "gelu_tanh_mufu1":
        h = 0.5 * z
        u = z * tl.fma(z * z, _GELU_U_B, _SQRT_2_OVER_PI)
        z = tl.fma(h, _tanh_hw(u), h)
    elif ACTIVATION == "silu_mufu1":
        h = 0.5 * z
        z = tl.fma(h, _tanh_hw(h), h)
    elif ACTIVATION == "gelu_tanh_mufu2":
        z = _sigmoid_times(z, z * tl.fma(z * z, _GELU_X_B, _GELU_X_A), "mufu2")
    elif ACTIVATION == "gelu_tanh_newton":
        z = _sigmoid_times(z, z * tl.fma(z * z, _GELU_X_B, _GELU_X_A), "newton")
    elif ACTIVATION == "gelu_tanh_poly":
        z = _sigmoid_times(z, z * tl.fma(z * z, _GELU_X_B, _GELU_X_A), "poly")
    elif ACTIVATION == "gelu_tanh_poly0":
        z = _sigmoid_times(z, z * tl.fma(z * z, _GELU_X_B, _GELU_X_A), "poly0")
    elif ACTIVATION == "silu_mufu2":
        z = _sigmoid_times(z, z * -_LOG2E, "mufu2")
    elif ACTIVATION == "silu_newton":
        z = _sigmoid_times(z, z * -_LOG2E, "newton")
    elif ACTIVATION == "silu_poly":
        z = _sigmoid_times(z, z * -_LOG2E, "poly")
    elif ACTIVATION == "silu_poly0":
        z = _sigmoid_times(z, z * -_LOG2E, "poly0")
    else:
        tl.static_assert(False, "unknown ACTIVATION")
    return z


@triton.jit
def apply_activation(z, slope, ACTIVATION: tl.constexpr):
    """act(z) for a float32 tile z; ``slope`` is leaky_relu's negative slope."""
    if ACTIVATION == "relu":
        z = tl.maximum(z, 0.0)
    elif ACTIVATION == "leaky_relu":
        z = tl.where(z >= 0.0, z, z * slope)
    elif ACTIVATION == "gelu":
        z = 0.5 * z * (1.0 + tl.math.erf(z * _INV_SQRT2))
    elif ACTIVATION == "gelu_tanh":
        z = 0.5 * z * (1.0 + _tanh((z + z * z * z * _GELU_CUBIC) * _SQRT_2_OVER_PI))
    elif ACTIVATION == "silu":
        z = z * tl.sigmoid(z)
    elif ACTIVATION != "none":
        z = _math_variant(z, ACTIVATION)
    return z


@triton.jit
def activation_grad(z, slope, ACTIVATION: tl.constexpr):
    """d act(z) / dz for a float32 tile of pre-activations z."""
    if ACTIVATION == "relu":
        g = tl.where(z > 0.0, 1.0, 0.0)
    elif ACTIVATION == "leaky_relu":
        g = tl.where(z >= 0.0, 1.0, slope)
    elif ACTIVATION == "gelu":
        cdf = 0.5 * (1.0 + tl.math.erf(z * _INV_SQRT2))
        pdf = tl.exp(-0.5 * z * z) * _INV_SQRT_2PI
        g = cdf + z * pdf
    elif ACTIVATION == "gelu_tanh":
        inner = (z + z * z * z * _GELU_CUBIC) * _SQRT_2_OVER_PI
        t = _tanh(inner)
        g = 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + z * z * (3.0 * _GELU_CUBIC))
    elif ACTIVATION == "silu":
        s = tl.sigmoid(z)
        g = s * (1.0 + z * (1.0 - s))
    else:
        g = tl.full(z.shape, 1.0, tl.float32)
    return g


@triton.jit
def store_epilogue(
    acc, offs_m, offs_n, M, N,
    c_ptr, stride_cm, stride_cn, bias_ptr, stride_bias, z_ptr, stride_zm, stride_zn, slope,
    HAS_BIAS: tl.constexpr, STORE_Z: tl.constexpr, ACTIVATION: tl.constexpr, INDEX_64: tl.constexpr,
):
    """The GEMM epilogue on a float32 tile ``acc`` of rows ``offs_m`` and columns ``offs_n``:
    + bias (any stride), Z stored when STORE_Z (for a backward that needs act'(Z)), then
    C = act(.) in C's dtype; rows and columns past M and N are masked out."""
    if HAS_BIAS:
        # Any bias stride (a column of a matrix, a slice); int64: it may be large.
        bias = tl.load(bias_ptr + offs_n.to(tl.int64) * stride_bias, mask=offs_n < N, other=0.0).to(tl.float32)
        acc = acc + bias[None, :]
    if INDEX_64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if STORE_Z:
        z_ptrs = z_ptr + offs_m[:, None] * stride_zm + offs_n[None, :] * stride_zn
        tl.store(z_ptrs, acc.to(z_ptr.dtype.element_ty), mask=mask)
    acc = apply_activation(acc, slope, ACTIVATION)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)

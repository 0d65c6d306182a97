"""The certified bound for an fp16 pass in place of the TF32 one (issue 50), derived and checked
here before any kernel is written. NOTES.md, "An fp16 pass", has the derivation in words and the
re-check fraction it predicts. Pure NumPy, like bound.py, whose TF32 bound this one extends.

fp16 keeps TF32's 10-bit significand; only its exponent range is narrow (largest 65504, smallest
normal 2^-14). So the pass scales the centred points and the centroids by one power of two,
sigma (`fp16_scale` of the largest row norm, which the kernel uses; the derivation below holds
for any power of two under which no input overflows): multiplying by a power of two is exact,
the largest row norm lands in [2^14, 2^15), so no coordinate of a row overflows, nor of a
centroid whose norm is at most 65504 / sigma (Lloyd's means are; the kernel certifies nothing
where the largest centroid norm passes it). With x' = sigma x, c' = sigma c,
each input rounded to fp16 (or, below the smallest normal, rounded or flushed to zero) moves by

    |x~_i - x'_i| <= u |x'_i| + t,        u = 2^-11, t = 2^-14 (FLUSH_UNIT),

the products of two fp16 values are exact in FP32 (11 x 11 bits, at least 2^-48), and the FP32
accumulation is TF32's (d additions, each within 2^-22 of the running magnitude). Summed over i
with Cauchy-Schwarz (sum |x_i| <= sqrt(d) |x|) and scaled back by sigma^-2 (exact):

    |D^ - x.c| <= eps(d) |x| |c| + alpha(d) (|x| + |c|) / sigma + beta(d) / sigma^2,

eps(d) being bound.dot_eps(d), alpha(d) = t (1 + u) (1 + d 2^-22) sqrt(d) and
beta(d) = d t^2 (1 + d 2^-22), each with bound.SAFETY. The score s = h - x.c adds h's rounding as
in bound.py, so

    E16(x) = eps |x| C + eta H + alpha (|x| + C) / sigma + beta / sigma^2,

plus bound.underflow_floor(d) for FP32 results below the smallest normal, and the
certification, the limit and the floor are bound.py's with E16 for E. Since sigma >= 2^14 / M
(M the largest row norm), the alpha term is at most (alpha / eps) (M / 2^14) (1/C + 1/|x|)
of the first: below 1e-4 of it at d = 128 wherever |x| and C are near M. So the pass certifies
what TF32's certifies, but for points far nearer the data's mean than the farthest row. bf16 (7 bits: u = 2^-8, a wide range) is the comparison:
`bf16_eps` is about eight times TF32's eps, so about eight times as many points come near
enough a tie to be re-checked, where their margins are spread evenly near zero.
"""

from __future__ import annotations

import math

import numpy as np

from impls.gpu.kmbench_gpu.bound import ACCUMULATE_UNIT, HALF_NORM_UNIT, SAFETY, error_terms, underflow_floor

FP16_UNIT = 2.0 ** -11  # half an fp16 unit in the last place, relative: TF32's
FLUSH_UNIT = 2.0 ** -14  # fp16's smallest normal: what rounding or flushing a smaller input may move it
LARGEST_EXPONENT = 14  # the largest scaled input lies in [2^14, 2^15): fp16 holds up to 65504
BF16_UNIT = 2.0 ** -8  # bf16 keeps 7 significand bits


def fp16_scale(largest: float) -> float:
    """sigma: the power of two that puts `largest` (the largest row norm, or any bound on the
    inputs' magnitude) in [2^14, 2^15)."""
    if not largest > 0 or not math.isfinite(largest):
        return 1.0
    return 2.0 ** (LARGEST_EXPONENT - math.floor(math.log2(largest)))


def error_terms16(d: int) -> tuple[float, float, float, float]:
    """(eps, eta, alpha, beta) with E16 = eps |x| C + eta H + alpha (|x| + C) / sigma + beta / sigma^2."""
    eps, eta = error_terms(d)
    t, u, grow = FLUSH_UNIT, FP16_UNIT, 1 + d * ACCUMULATE_UNIT
    return eps, eta, SAFETY * t * (1 + u) * grow * math.sqrt(d), SAFETY * d * t * t * grow


def score_error16(d: int, x_norm, c_max: float, h_max: float, scale: float):
    """E16(x): the bound on |s^_j - s_j| of an fp16 pass for points of norm x_norm, inputs scaled by
    `scale`; with bound.underflow_floor, as the TF32 pass adds it, for FP32 results below the
    smallest normal (a dot product scaled back, or h - D, of data near 1e-20)."""
    eps, eta, alpha, beta = error_terms16(d)
    x_norm = np.asarray(x_norm, dtype=np.float64)
    return (eps * x_norm * c_max + eta * h_max + alpha * (x_norm + c_max) / scale + beta / scale ** 2
            + underflow_floor(d))


def bf16_eps(d: int) -> float:
    """eps(d) of a bf16 pass: bound.dot_eps's sum with bf16's unit for TF32's (the comparison the
    issue asks for; about eight times TF32's)."""
    u = BF16_UNIT
    return SAFETY * (2 * u + u * u + d * ACCUMULATE_UNIT * (1 + u) ** 2 + HALF_NORM_UNIT)


# ---------------------------------------------------------------- an emulation, for tests

def to_fp16(values, scale: float, flush: bool = False) -> np.ndarray:
    """FP32 values times `scale`, rounded to fp16 (to nearest, subnormals kept; flush: inputs
    below the smallest normal made zero, as hardware that flushes would)."""
    scaled = np.asarray(values, np.float32).astype(np.float64) * scale
    half = scaled.astype(np.float16)
    if flush:
        half = np.where(np.abs(half) < np.float16(FLUSH_UNIT), np.float16(0), half)
    return half


def fp16_scores(x: np.ndarray, centroids: np.ndarray, scale: float, flush: bool = False) -> np.ndarray:
    """What an fp16 pass computes: s^ = fl(h^ - D^ / scale^2), D^ the FP32 sum of the exact
    products of the scaled fp16 inputs, added one at a time in FP32 (an order the hardware may use)."""
    c32 = np.asarray(centroids, np.float32)
    products = (to_fp16(x, scale, flush)[:, None, :].astype(np.float64)
                * to_fp16(c32, scale, flush)[None, :, :].astype(np.float64))
    dots = np.zeros(products.shape[:2], dtype=np.float32)
    for i in range(products.shape[2]):  # exact products (22 bits), summed in FP32
        dots = (dots + products[:, :, i].astype(np.float32)).astype(np.float32)
    dots = (dots.astype(np.float64) / scale ** 2).astype(np.float32)  # a power of two: exact
    half = (0.5 * (c32.astype(np.float64) ** 2).sum(axis=1)).astype(np.float32)
    return (half[None, :] - dots).astype(np.float32)

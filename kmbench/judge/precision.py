"""What a declared precision promises, as the three unit roundoffs the judge's bounds use.

A row declares the precision it computes in (`Implementation.dtype`, else the data's dtype).
Each name maps to:
- `input`: the relative error of one value as the arithmetic sees it (a float32 value rounded
  to TF32 or float16 before a tensor core multiplies it);
- `accumulate`: the unit roundoff of the additions and multiplications that follow (FP32
  accumulation inside a tensor core may truncate: 2^-22, as impls/gpu/kmbench_gpu/bound.py says);
- `store`: the unit roundoff of a centroid as the row keeps it.
`gamma(m, u)` is Higham's gamma_m = m u / (1 - m u), the bound on m roundings in a row.
NOTES.md beside this file derives every bound from these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kmbench.errors import UsageError


@dataclass(frozen=True)
class Precision:
    name: str
    input: float
    accumulate: float
    store: float
    exact_below: float  # integers below this are exact in the arithmetic (2^(mantissa bits + 1))


FLOAT64 = Precision("float64", 2.0 ** -53, 2.0 ** -53, 2.0 ** -53, 2.0 ** 53)
FLOAT32 = Precision("float32", 2.0 ** -24, 2.0 ** -24, 2.0 ** -24, 2.0 ** 24)
PRECISIONS = {
    "float64": FLOAT64,
    "float32": FLOAT32,
    "tf32": Precision("tf32", 2.0 ** -11, 2.0 ** -22, 2.0 ** -24, 2.0 ** 11),
    "float16": Precision("float16", 2.0 ** -11, 2.0 ** -22, 2.0 ** -11, 2.0 ** 11),
    "bfloat16": Precision("bfloat16", 2.0 ** -8, 2.0 ** -22, 2.0 ** -8, 2.0 ** 8),
}


def declared(name: str) -> Precision:
    """The precision a row declares, by name; an unknown name is the row's error, said plainly."""
    try:
        return PRECISIONS[name]
    except KeyError:
        raise UsageError(f"unknown precision {name!r}; kmbench knows {', '.join(PRECISIONS)}") from None


def narrower(computed: str | None, data: str) -> bool:
    """Does a row compute in less precision than its data hold (float32 on float64 data, say)?"""
    return computed in PRECISIONS and data in PRECISIONS and PRECISIONS[computed].input > PRECISIONS[data].input


def gamma(m, u: float):
    """gamma_m: |prod (1 + delta_i)^(+-1) - 1| <= gamma_m for m roundings of unit u each (m a
    number, or an array of them: one gamma each)."""
    mu = np.asarray(m, dtype=np.float64) * u
    with np.errstate(divide="ignore", invalid="ignore"):
        # Where m u >= 1/2 there is no useful bound: inf, and the caller's check allows anything.
        out = np.where(mu >= 0.5, np.inf, mu / (1.0 - mu))
    return float(out) if out.ndim == 0 else out


def distance_factor(p: Precision, d: int) -> float:
    """K with |computed - exact| <= K (|x - a| + |c - a|)^2 for one squared distance in d
    dimensions, for any anchor a the row centres on (the origin included), in any of the forms
    a row may use: direct sum of (x - c)^2, or expanded |x|^2 - 2 x.c + |c|^2 (or the score
    |c|^2/2 - x.c, the same comparison halved). NOTES.md, "Distances"."""
    return 2 * p.input + p.input ** 2 + gamma(d + 8, p.accumulate) + 2 * p.store


def sum_factor(p: Precision, count):
    """G with |computed mean - exact mean| <= G * sum |x_i - a| / count + 3 store |mean|, for a
    mean of `count` values summed in any order, after subtracting any anchor a (the origin, the
    old centroid or the data's mean), each value first rounded to the input precision. NOTES.md,
    "Means"."""
    return gamma(count + 2, p.accumulate) + p.input

"""What every scan and sum of one problem shares: the data's mean (the judge's anchor), each
point's two norms (|x| and |x - mean|), and, where they fit, the points in float64 and centred.
A trajectory of 300 steps would otherwise make them 300 times over (at 1e5 points, most of what
a step costs); at 1e7 x 128 on a GPU only the norms fit, and the rows stay as stored (float32),
made float64 only where a computation needs them (the few points a scan scores, say)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kmbench.protocol import reference

CACHE_BYTES = 1 << 30  # host memory for the cached copies (a GPU: an eighth of its free memory)
PICK_DENSITY = 1 / 64  # chosen rows of host data this dense in their span are picked from streamed blocks


@dataclass
class Points:
    """A run of points as the judge computes on them (on xp): the rows as stored, their norms
    (float64), and their float64 and centred copies where cached."""

    x: object  # (m, d) as stored: float32 or float64
    norm: object  # |x|
    centred_norm: object  # |x - mean|
    mean: object
    x64: object = None  # x in float64, where cached
    centred64: object = None  # x - mean in float64, where cached

    def float64(self, index=None):
        """The rows (all, or the chosen ones) in float64."""
        if self.x64 is not None:
            return self.x64 if index is None else self.x64[index]
        rows = self.x if index is None else self.x[index]
        return rows.astype(np.float64)

    def centred(self, index=None):
        """The rows (all, or the chosen ones) less the data's mean, in float64."""
        if self.centred64 is not None:
            return self.centred64 if index is None else self.centred64[index]
        return self.float64(index) - self.mean


@dataclass
class Geometry:
    """The data's mean, and what of the points fits the cache: everything (`full`), the norms
    (`norms`), or nothing."""

    mean: object  # (d,) float64 on xp
    full: Points | None = None
    norms: tuple | None = None  # (|x|, |x - mean|) of every point

    @classmethod
    def of(cls, data, xp=np) -> "Geometry":
        geometry = cls(reference.mean(data, xp))
        if not reference._computes_in_place(data, xp):
            return geometry  # streamed from the host a block at a time: nothing is kept
        budget = CACHE_BYTES if xp is np else reference._free_bytes(xp) // 8
        n, d = data.shape
        if 2 * n * (d + 1) * 8 <= budget:
            geometry.full = geometry._made(data, xp, keep=True)
        elif 2 * n * 8 <= budget:
            # Filled a chunk at a time: a chunk's float64 and centred rows go before the next's
            # (kept for every chunk until joined, they would be 8 (d + 2) bytes a point more).
            step = max(1, reference.chunk_elements(xp) // max(d, 1))
            geometry.norms = (xp.empty(n, dtype=xp.float64), xp.empty(n, dtype=xp.float64))
            for start in range(0, n, step):
                part = geometry._made(data[start : start + step], xp)
                geometry.norms[0][start : start + step] = part.norm
                geometry.norms[1][start : start + step] = part.centred_norm
        return geometry

    def spread(self, data, xp) -> float:
        """The RMS distance of the points from their mean (reference.spread), from the norms kept
        where they are (one reduction, not a pass over the data)."""
        norms = self.full.centred_norm if self.full is not None else (self.norms[1] if self.norms else None)
        if norms is None:
            return reference.spread(data, xp)
        return float(xp.sqrt((norms * norms).sum() / norms.shape[0]))

    def _made(self, x, xp, keep: bool = False) -> Points:
        x64 = xp.asarray(x, dtype=xp.float64)
        centred = x64 - self.mean
        norm, centred_norm = xp.sqrt(reference.row_squares(x64, xp)), xp.sqrt(reference.row_squares(centred, xp))
        return Points(x, norm, centred_norm, self.mean, x64, centred) if keep else Points(
            x, norm, centred_norm, self.mean, x64 if x.dtype == np.float64 else None, centred)

    def rows(self, block, first: int, start: int, stop: int, xp) -> Points:
        """Rows start:stop of `block` (the data's rows from `first` on, on xp)."""
        lo, hi = first + start, first + stop
        if self.full is not None:
            held = self.full
            return Points(held.x[lo:hi], held.norm[lo:hi], held.centred_norm[lo:hi], self.mean, held.x64[lo:hi],
                          held.centred64[lo:hi])
        rows = block[start:stop]  # blocks are on xp already (reference.blocks)
        if self.norms is not None:
            return Points(rows, self.norms[0][lo:hi], self.norms[1][lo:hi], self.mean)
        return self._made(rows, xp)

    def chosen(self, data, index, xp) -> Points:
        """The chosen rows of the data (`index` on xp)."""
        if self.full is not None:
            held = self.full
            return Points(held.x[index], held.norm[index], held.centred_norm[index], self.mean, held.x64[index],
                          held.centred64[index])
        if self.norms is not None:
            return Points(data[index], self.norms[0][index], self.norms[1][index], self.mean)
        return self._made(rows_of(data, index, xp), xp)


def rows_of(data, index, xp):
    """Chosen rows of the data as float64 on xp, wherever the data live. From host data, rows
    chosen densely (PICK_DENSITY of the rows they span, or more) are picked on the GPU from
    blocks streamed there: gathered row by row in host memory, they cost a judge's step 90 s
    where most of 1e9 points were near ties."""
    if reference._computes_in_place(data, xp):
        return xp.asarray(data[index], dtype=xp.float64)
    if index.size:
        lo, hi = int(index.min()), int(index.max()) + 1
        if index.size >= PICK_DENSITY * (hi - lo):
            return picked(reference.blocks(data[lo:hi], xp), xp.asarray(index) - lo, data.shape[1], xp)
    return xp.asarray(np.asarray(data)[reference.to_numpy(index)], dtype=xp.float64)


def picked(blocks, index, d: int, xp):
    """The rows `index` names (any order, repeats allowed), in float64, from (first row, rows)
    blocks on xp that cover them all."""
    out = xp.empty((index.shape[0], d), dtype=xp.float64)
    for first, block in blocks:
        inside = xp.nonzero((index >= first) & (index < first + block.shape[0]))[0]
        out[inside] = block[index[inside] - first]
    return out

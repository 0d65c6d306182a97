"""The tensor path's renumbering of the centroids (TensorPath's methods, on the buffers its
__init__ makes): before the first iteration of a run, near centroids are put in the same
tiles (renumber.cu), so a re-checked point's candidates fall in one or two tiles; the
harness's numbering stays in order_of, and centroids_in_order undoes the renumbering.
Where every tile's best two are kept it is done only where the centroids are crowded
(crowded_fraction; strategies/tensor.py decides)."""

from __future__ import annotations

import numpy as np

GROUP = 32  # centroids per neighbourhood when they are renumbered (a quarter of a re-check tile)


class Renumbering:
    """TensorPath's methods that renumber its centroids and give them back in the harness's order."""

    def order_by_neighbourhood(self) -> None:
        """Renumber the centroids so that near ones sit in the same tiles: each goes with the
        nearest of every GROUP-th centroid (float32 products; only the order depends on them),
        and the groups are laid out one after another, each by distance to its pivot. A
        re-checked point's candidates are the centroids near its winner, so they then fall in
        one or two tiles instead of anywhere in k. Part of the run (inside its timed region),
        hence renumber.cu's few launches; ties still go to the lower index of the harness's
        numbering (order_of), and centroids_in_order() undoes it."""
        import cupy

        if self.k <= GROUP:
            return
        k, d = np.int32(self.k), np.int32(self.d)
        keys = cupy.empty(self.k, dtype=cupy.uint64)
        self._renumber["neighbourhood_keys"]((-(-self.k // 8),), (256,),
                                             (self.centroids, self.half_norms, k, d, np.int32(GROUP), keys))
        order = cupy.argsort(keys)
        buffers = (self.centroids64, self.centroids, self.centroids_tf32, self.half_norms, self.order_of)
        scratch = tuple(cupy.empty_like(buffer) for buffer in buffers)
        blocks = (max(1, min(-(-self.k * self.d // 256), self._stream_blocks)),)
        gather = self._renumber["gather_centroids"]
        gather(blocks, (256,), (order, k, d) + buffers + scratch)
        gather(blocks, (256,), (np.uint64(0), k, d) + scratch + buffers)  # back where the graph reads them

    def crowded_fraction(self, sample: int = 1024) -> float:
        """The share of the centroids that, taken as points, the TF32 pass could not certify:
        their two nearest other centroids score within 2 E(c) (bound.score_error) of each other.
        High where many centroids sit on one blob (5,000 centroids on 50 blobs: 98.5%). There a
        point's candidates are its blob's centroids; unless near centroids are renumbered into
        the same tiles, they spread over every tile, and each tile is then scored whole.
        Estimated from every (k / sample)-th centroid: one FP32 product of sample x k, inside
        the run's timed region."""
        import cupy

        taken = cupy.arange(0, self.k, -(-self.k // sample))
        points = self.centroids[taken]
        norms = cupy.sqrt((points.astype(cupy.float64) ** 2).sum(axis=1))
        c_max, h_max = self.bound_max[0].astype(cupy.float64), self.bound_max[1].astype(cupy.float64)
        scores = self.half_norms[None, :] - points @ self.centroids.T
        rows = cupy.arange(taken.shape[0])
        scores[rows, taken] = cupy.inf  # not itself
        nearest = scores.argmin(axis=1)
        best = scores[rows, nearest]
        scores[rows, nearest] = cupy.inf
        error = self.eps * norms * c_max + self.eta * h_max
        return int(cupy.count_nonzero(scores.min(axis=1) - best <= 2 * error)) / taken.shape[0]

    def centroids_in_order(self):
        """The float64 centroids in the harness's numbering."""
        import cupy

        back = cupy.empty_like(self.centroids64)
        back[self.order_of] = self.centroids64
        return back

"""tensor (d > 32 where Triton runs): TF32 tensor-core scores fused with a best/second-best
argmin, exact by a certified margin (bound.py) and an FP32 re-check of the uncertain points;
centroids renumbered by neighbourhood at the start of each run, so a point's candidates share
tiles; float64 sums over points sorted by cluster. The buffers and launches are TensorPath's
(tensor_path.py and the stage modules it names); this module is what the adapter asks of them."""

from __future__ import annotations

from impls.gpu.kmbench_gpu.strategies.base import Strategy
from kmbench.errors import ImplementationError
from kmbench.protocol import Problem


# Where every tile's best two are kept, the centroids are renumbered by neighbourhood only when
# more than this share of them is crowded (TensorPath.crowded_fraction): 98.5% on 50 blobs of 100
# centroids each, against 25% and 30% at the embeddings suite's 300k x 408 and 1e6 x 768 (NOTES.md).
CROWDED = 0.5


class Tensor(Strategy):
    name = "tensor"
    distance = "expanded, certified by a bound"
    precision = "tf32 or fp16 certified by a bound, fp32 re-check, float64 sums"  # allocate says which

    @classmethod
    def arithmetic(cls, problem: Problem) -> tuple[str, float]:
        """Its floor is the TF32 pass over every (point, centroid): 2 d FLOPs each. The FP32
        re-check of the uncertain points comes on top; the floor does not count it. Where the
        pass runs in fp16, which only a prepared path knows, KmbenchGpu.arithmetic says so."""
        return "tf32", 2.0 * problem.d

    @classmethod
    def memory(cls, problem: Problem) -> int:
        """The path's own buffers; it refuses where Triton cannot run or n passes int32."""
        from impls.gpu.kmbench_gpu.tensor_settings import MAX_POINTS, device_bytes, tensor_status

        ready, why = tensor_status()
        if not ready:
            raise ImplementationError(f"strategy tensor cannot run here: {why}")
        if problem.n > MAX_POINTS:
            raise ImplementationError(f"strategy tensor handles n <= {MAX_POINTS}; got n = {problem.n}")
        return device_bytes(problem.n, problem.d, problem.k)

    def allocate(self, x, changed, labels: bool = True) -> None:
        from impls.gpu.kmbench_gpu.tensor_path import TensorPath

        super().allocate(x, changed, labels)
        self.path = TensorPath(x, self.k, changed)
        self.precision = f"{self.path.pass_input} certified by a bound, fp32 re-check, float64 sums"
        self.centroids64 = self.path.centroids64
        # Renumbering puts near centroids in one tile. That helps the scan of tiles and the
        # slots (near centroids take different slots), but where every tile's best two are kept
        # it makes a point's candidates share a tile, which is then scored whole: at
        # 1e6 x 768, k = 4,096, 47.5 ms per iteration against 34 ms without (NOTES.md). Unless
        # the centroids are crowded: then a point's candidates are many, in every tile, unless
        # renumbered (300k x 408, 5,000 centroids on 50 blobs: 249 ms per iteration as given).
        self.order_when_crowded = self.order and bool(self.path.kept_tiles)
        self.order = self.order and not self.path.kept_tiles
        self.crowded: float | None = None  # the last run's crowded_fraction, where it was asked

    def warm_up(self, start) -> None:
        """NVRTC and Triton compile on first use: an iteration under each stop rule, once, after
        what each run does first (the crowding probe, the renumbering: CuPy compiles those)."""
        import cupy

        self.path.start(start)
        self.before_iterations()
        for track in (False, True):
            self.path.iterate(track)
        cupy.cuda.Device().synchronize()

    def info(self) -> dict:
        import triton

        path = self.path
        lists = "slots" if path.candidates else "tiles" if path.kept_tiles else "none"
        return {"triton": triton.__version__, "tiling": list(path.tiling), "centroid_loads": path.centroid_loads,
                "tf32_pass": path.tf32_pass, "pass_input": path.pass_input,
                "recheck": path.recheck,
                "candidate_lists": lists,
                "centroid_order": ("by neighbourhood" if self.order else
                                   "by neighbourhood where crowded" if self.order_when_crowded else "as given"),
                "exact_tiling": list(path.exact_tiling), "bound_eps": path.eps,
                "sums": ("from the moved rows where few moved (a shard's: sorted)" if path.sums_from_moved
                         else "sorted")}

    def start(self, start, track: bool) -> None:
        self.path.start(start)

    def before_iterations(self) -> None:
        if self.order_when_crowded:
            self.crowded = self.path.crowded_fraction()
        if self.order or (self.crowded or 0.0) > CROWDED:
            self.path.order_by_neighbourhood()

    def iterate(self, track: bool, combine=None) -> None:
        path = self.path
        self.path.iterate(track, None if combine is None else lambda: combine(path.sums, path.counts, self.changed))

    def last_labels(self):
        return self.path.labels

    def final_centroids(self):
        return self.path.centroids_in_order()

    def after_run(self, problem: Problem, done: int) -> tuple[list[str], dict]:
        rechecked = self.path.rechecked()
        assignments = problem.n * done
        margin = {"tf32": "TF32", "fp16": "fp16"}[self.path.pass_input]
        note = (f"points re-checked in FP32 ({margin} margin inside the bound): {rechecked} of {assignments} "
                f"assignments ({rechecked / max(1, assignments):.2%})")
        fields = {"rechecked_points": rechecked, "rechecked_fraction": rechecked / max(1, assignments)}
        if self.path.sums_from_moved:
            moved_steps = self.path.moved_sum_steps()
            note += f"; sums from the moved rows in {moved_steps} of {done} iterations"
            fields["moved_sum_iterations"] = moved_steps
        if self.crowded is not None:
            ordered = self.crowded > CROWDED
            note += (f"; {self.crowded:.0%} of the centroids crowded, so they were "
                     f"{'renumbered by neighbourhood' if ordered else 'left as given'}")
            fields.update(crowded_centroids=self.crowded, centroid_order="by neighbourhood" if ordered else "as given")
        return [note], fields

    # ------------------------------------------------------------------ a pass in chunks

    def pass_info(self) -> dict:
        return self.info()

    def load_chunk(self, raw, shift) -> None:
        self.path.load_chunk(raw, shift)

    def add_chunk(self, m: int, track: bool, previous) -> None:
        self.path.assign()
        self.path.accumulate(track, previous)

    def finish_pass(self) -> None:
        self.path.finish_streamed()

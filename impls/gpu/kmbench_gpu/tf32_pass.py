"""The tensor path's TF32 pass (TensorPath.certify, on the buffers its __init__ makes): every
point's TF32 winner and best two scores, the points whose margin is inside the bound of
bound.py listed for the re-check (recheck.py). Triton's certified_assign (tensor_kernels.py),
or where it applies the hand-written Hopper pass (hopper_pass.py) with the same results.
The Triton kernels take the CuPy buffers through DLPack (the same memory) and launch on the
CuPy stream in use, the capture stream included (triton_on_cupy_stream)."""

from __future__ import annotations

from impls.gpu.kmbench_gpu import bound


class TF32Pass:
    """TensorPath's TF32 pass."""

    def certify(self) -> None:
        """Every point's TF32 winner; the points whose margin is inside the bound listed."""
        if self._hopper is not None:
            self._hopper.certify(self)
            return
        t = self._torch
        with triton_on_cupy_stream():
            block_m, block_n, block_d, warps, stages = self.tiling[:5]
            self._certified[((self.n + block_m - 1) // block_m,)](
                t["x_tf32"], t["x_norm"], t["centroids_tf32"] if self._centroid_tiles is None else self._centroid_tiles,
                t["half_norms"], t["bound_max"], t["labels"],
                t["flagged"], t["limits"], t["flagged_count"], t["floor"], t["candidate_rows"], t["candidate_sizes"],
                t["candidate_index"], t["candidate_count"], t["tile_best"], t["tile_second"], t["tile_labels"],
                self.n, self.k,
                self.eps, self.eta, self.margin, bound.packing_unit(-(-self.k // self.slots)), bound.PACKING_FLOOR,
                DIM=self.d, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, KEEP_FLOOR=self.keep_floor,
                PACK_BITS=self.pack_bits, CANDIDATES=self.candidates, COLUMNS=self.columns,
                KEEP_TILES=self.kept_tiles > 0, SLOTS=self.slots, TMA=self._centroid_tiles is not None,
                num_warps=warps, num_stages=stages)


def centroid_descriptor(centroids, tiling):
    """A TMA descriptor of the TF32 centroids in tiles of BLOCK_N x BLOCK_D (rows 16-byte aligned:
    d a multiple of 4), for the TF32 pass's copy engine loads."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor.from_tensor(centroids, [tiling[1], tiling[2]])


def triton_on_cupy_stream():
    """Triton launches on PyTorch's current stream: make that CuPy's current stream (the
    capture stream too). CuPy's null stream (0) is the legacy default stream, PyTorch's too."""
    import cupy
    import torch

    ptr = cupy.cuda.get_current_stream().ptr
    return torch.cuda.stream(torch.cuda.ExternalStream(ptr) if ptr else torch.cuda.default_stream())

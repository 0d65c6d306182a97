"""What the harness and the rows both need to know of a GPU: whether CuPy can run kernels here
(and if not, why, in one sentence) and host memory page-locked for fast copies. (Where the
multi-GPU rows run reaches them in their Problem's options.)

It lives in protocol, beside timing's CUDA events, because both sides reach it from there: the
plans (which pin the data they make in memory) may not import an implementation, and every row already imports the protocol.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np

from kmbench.errors import ImplementationError


def nvidia_gpu_present() -> bool:
    """An NVIDIA GPU on this machine, whatever software can use it (the driver's device file)."""
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia/gpus").is_dir()


def cuda_status() -> tuple[bool, str]:
    """Whether CuPy can run kernels here, and if not, why (one sentence)."""
    try:
        import cupy
    except ImportError:
        # Without a GPU the missing GPU is the reason to give: installing CuPy would not help.
        if not nvidia_gpu_present():
            return False, "no NVIDIA GPU here (and CuPy, which the GPU rows need, is not installed)"
        return False, "CuPy is not installed (pip install 'kmbench[cuda12]' or 'kmbench[cuda13]')"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError when no driver or no device
        return False, f"no usable NVIDIA GPU ({str(exc).strip() or type(exc).__name__})"
    if count < 1:
        return False, "no NVIDIA GPU visible"
    return True, ""


def pinnable(array: np.ndarray) -> np.ndarray:
    """The array itself where cudaHostRegister can pin it in place, else a copy in this process's
    own memory. A read-only or file-mapped array cannot be pinned (cudaErrorInvalidValue): a
    cached dataset is such a map (np.load's mmap_mode="r"), and `kmbench run`'s streamed row
    failed on it."""
    if array.flags.writeable and not _file_mapped(array):
        return array
    return np.array(array, order="C")


def _file_mapped(array: np.ndarray) -> bool:
    """Whether the array's memory is a mapped file (np.memmap, or a view of one)."""
    base = array
    while base is not None:
        if isinstance(base, (np.memmap, mmap.mmap)):
            return True
        base = getattr(base, "base", None)
    return False


class PinnedHost:
    """A host array's own memory, page-locked so the copy engine reads it at the link's full
    rate (pageable memory went at 8 GB/s on the H100 machine, pinned at 50); release() unpins
    it. Memory someone already pinned is used as it is and left pinned."""

    def __init__(self, array: np.ndarray):
        import cupy

        if not array.flags.c_contiguous:
            raise ImplementationError("streamed points must be one C-contiguous block of host memory")
        self.array = array
        self._pinned_here = not is_pinned(array)
        if self._pinned_here:
            try:
                cupy.cuda.runtime.hostRegister(array.ctypes.data, array.nbytes, 0)
            except cupy.cuda.runtime.CUDARuntimeError as exc:
                raise ImplementationError(f"cannot pin the {array.nbytes / 2**30:.1f} GiB of points in host "
                                          f"memory for streaming ({exc})") from None

    def release(self) -> None:
        import cupy

        if self._pinned_here:
            self._pinned_here = False
            cupy.cuda.runtime.hostUnregister(self.array.ctypes.data)


def is_pinned(array: np.ndarray) -> bool:
    import cupy

    try:  # cudaMemoryTypeHost: page-locked host memory the runtime knows of
        return cupy.cuda.runtime.pointerGetAttributes(array.ctypes.data).type == 1
    except cupy.cuda.runtime.CUDARuntimeError:
        return False

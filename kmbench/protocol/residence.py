"""Where the float64 oracle's arrays live, and how they move: host data judged on a GPU go there
whole when they fit in a share of its free memory, else a block at a time through a page-locked
buffer; the chunks of elementwise work are small on a CPU (cache) and large on a GPU (launches).
`kmbench.protocol.reference` computes; this module only places and moves its data.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

CHUNK_ELEMENTS = 1 << 23  # points x clusters per distance chunk (64 MiB of float64)
BLOCK_BYTES = 1 << 30  # host data go to the GPU in blocks of about this many bytes
RESIDENT_SHARE = 0.5  # data up to this share of the GPU's free memory are copied there whole


GPU_ELEMENTS = 1 << 27  # a GPU's chunks of elementwise work: 1 GiB of float64 (each chunk costs launches)
STAGE_BYTES = 1 << 28  # host data go to a GPU through a page-locked buffer of this size


_ON_HOST = [False]  # while set (judge_from_host), host data stay on the host


@contextmanager
def judge_from_host():
    """While it lasts, the judge keeps host data on the host and streams them to the GPU a block at
    a time (it holds no copy there): for cells whose rows hold the GPUs themselves (Dask workers)."""
    _ON_HOST[0] = True
    try:
        yield
    finally:
        _ON_HOST[0] = False


def from_host() -> bool:
    return _ON_HOST[0]


def resident(data, xp=np):
    """The data where xp computes: whole on the GPU when they fit in RESIDENT_SHARE of its free
    memory (and `judge_from_host` is not in force), else left in host memory for `blocks` to move
    a block at a time."""
    if _computes_in_place(data, xp):
        return data
    if not from_host() and data.nbytes <= RESIDENT_SHARE * _free_bytes(xp):
        return to_device(data, xp)
    return data


def to_device(data, xp):
    """A host array on the GPU. Large pageable arrays go through a page-locked buffer a slice at
    a time: CUDA copies pageable memory several times slower (1 GB/s, measured on an H200)."""
    if data.nbytes <= STAGE_BYTES or _pinned(data):
        return xp.asarray(data)
    import cupyx

    out = xp.empty(data.shape, dtype=data.dtype)
    rows = max(1, STAGE_BYTES // max(1, data.itemsize * int(np.prod(data.shape[1:]))))
    stage = cupyx.empty_pinned((rows,) + data.shape[1:], dtype=data.dtype)
    for first in range(0, data.shape[0], rows):
        part = data[first : first + rows]
        np.copyto(stage[: part.shape[0]], part)
        out[first : first + part.shape[0]].set(stage[: part.shape[0]])
    return out


def _pinned(data) -> bool:
    """Is this host array page-locked (CUDA copies it at full speed)?"""
    try:
        import cupy

        return cupy.cuda.runtime.pointerGetAttributes(data.ctypes.data).type == cupy.cuda.runtime.memoryTypeHost
    except Exception:
        return False


def _computes_in_place(data, xp) -> bool:
    """Whether xp works on `data` as they are: NumPy on any host array, CuPy on its own."""
    return xp is np or isinstance(data, xp.ndarray)


def _free_bytes(xp) -> int:
    return xp.cuda.runtime.memGetInfo()[0]


def blocks(data, xp=np, multiple: int = 1):
    """(first row, rows on xp) over the data: all at once where xp computes on them in place,
    else blocks of about BLOCK_BYTES, a whole number of `multiple` rows each (so chunking
    inside a block is the same as chunking the whole)."""
    if _computes_in_place(data, xp):
        yield 0, xp.asarray(data)
        return
    rows = max(1, BLOCK_BYTES // max(1, data.shape[1] * data.itemsize))
    rows = max(multiple, rows // multiple * multiple)
    for first in range(0, data.shape[0], rows):
        yield first, xp.asarray(data[first : first + rows])


def chunk_elements(xp=np) -> int:
    """Elements of one chunk of float64 work: small on the CPU (cache), large on a GPU (launches)."""
    return CHUNK_ELEMENTS if xp is np else GPU_ELEMENTS


def device_module():
    """CuPy when it is installed and sees a GPU, else NumPy."""
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        return cupy
    except Exception:
        return np


GPU_FROM_BYTES = 16 << 20  # data from this size are judged on the GPU, where there is one
GPU_FROM_WORK = 1e8  # so are problems of this many distances (n k iterations): a GPU step costs launches, not work


def array_module(n: int, k: int, iterations: int, nbytes: int = 0):
    """CuPy when a GPU is there and the data are large in bytes, or the work large enough to
    matter; else NumPy."""
    return np if nbytes < GPU_FROM_BYTES and n * k * iterations < GPU_FROM_WORK else device_module()


def judge_module(data, k: int, iterations: int):
    """Where the judge computes on `data`: where they already are if that is a GPU, else by
    `array_module`."""
    if not isinstance(data, np.ndarray):
        return device_module()
    return array_module(data.shape[0], k, iterations, data.nbytes)


def release(xp) -> None:
    """Give the blocks CuPy's pools keep back to the GPU (another process may need them: a Dask
    worker on the same GPU, say)."""
    if xp is np:
        return
    xp.get_default_memory_pool().free_all_blocks()
    xp.get_default_pinned_memory_pool().free_all_blocks()


def row_squares(a, xp=np):
    """Each row's sum of squares (float64 rows): NumPy's einsum, many times faster than a sum over
    an axis of a few elements; on a GPU a matrix-vector product (cuBLAS), where CuPy's reduction
    over a short axis leaves most of its threads idle."""
    if xp is np:
        return np.einsum("ij,ij->i", a, a)
    return (a * a) @ xp.ones(a.shape[1], dtype=a.dtype)


def to_numpy(array) -> np.ndarray:
    return array.get() if hasattr(array, "get") else np.asarray(array)

"""Arrays on a GPU, as kmbench.KMeans takes them: which kind an input is (a torch CUDA tensor, or
anything else on a CUDA device: CuPy's, or with `__cuda_array_interface__` or a CUDA DLPack
device), the CuPy view of it (no copy), a CuPy result as the caller's kind, and the host copy of
one. No CuPy or torch is imported until an array of theirs is handed over.
"""

from __future__ import annotations

DLPACK_CUDA = (2, 13)  # DLPack device types kDLCUDA and kDLCUDAManaged (3, kDLCUDAHost, is host memory)


def kind_of(X) -> str | None:
    """"torch" for a torch tensor on a CUDA device, "cupy" for any other array on a CUDA device
    (CuPy's, or one with __cuda_array_interface__ or a CUDA DLPack device), None otherwise."""
    if type(X).__module__.split(".")[0] == "torch":
        return "torch" if getattr(getattr(X, "device", None), "type", None) == "cuda" else None
    if hasattr(X, "__cuda_array_interface__"):
        return "cupy"
    device = getattr(X, "__dlpack_device__", None)
    if device is not None:
        try:
            return "cupy" if int(device()[0]) in DLPACK_CUDA else None
        except (AttributeError, BufferError, TypeError, ValueError):  # an array that cannot say
            return None
    return None


def as_cupy(X):
    """A device array as a CuPy array over the same memory (no copy)."""
    import cupy

    if type(X).__module__.split(".")[0] == "torch":
        return cupy.from_dlpack(X.detach())
    if isinstance(X, cupy.ndarray):
        return X
    return cupy.asarray(X) if hasattr(X, "__cuda_array_interface__") else cupy.from_dlpack(X)


def as_kind(array, kind: str | None):
    """A CuPy result as the caller's kind: torch (by DLPack, same device), CuPy, or NumPy (None)."""
    if kind is None:
        return array.get() if hasattr(array, "get") else array
    if kind == "torch":
        import torch

        return torch.from_dlpack(array)
    return array


def host(array):
    """A device array (the fitted centres of a GPU fit, say) as a NumPy array; others as they are."""
    kind = kind_of(array)
    if kind is None:
        return array
    if kind == "torch":
        return array.detach().cpu().numpy()
    return as_cupy(array).get()

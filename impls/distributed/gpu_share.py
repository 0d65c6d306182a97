"""What a Dask GPU worker says of its GPU: when its share of the data does not fit, how many
bytes it needed and how many were free (issue 49: a worker on a GPU another process still held
failed with CuPy's "Out of memory allocating 4,000,000,000 bytes (allocated so far: ...)", which
says neither what was free nor whose memory it was); and how the host's GPUs are linked
(`nvidia-smi topo -m`: NVLink, PCIe switch or host bridge), which a scaling record names.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from contextlib import contextmanager

from kmbench.errors import ImplementationError


def gpu_label() -> str:
    """This process's GPU as the machine numbers it: dask-cuda hands each worker a rotated
    CUDA_VISIBLE_DEVICES ("1,0" for the second), whose first entry is its GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return f"GPU {visible or 0} of {platform.node()}"


def out_of_memory(message: str, what: str, free: int, total: int) -> str:
    """One sentence from CuPy's out-of-memory message and the device's free and total bytes."""
    asked = re.search(r"allocating ([\d,]+) bytes", message)
    held = re.search(r"allocated so far: ([\d,]+) bytes", message)
    needed = f"{int(asked.group(1).replace(',', '')):,} bytes more" if asked else "more memory"
    own = f", {int(held.group(1).replace(',', '')):,} already its own" if held else ""
    return f"{what} cannot hold its share: it needed {needed}, with {free:,} of the GPU's {total:,} bytes free{own}"


@contextmanager
def share_must_fit(who: str, rows: int):
    """Around a worker's upload and runs of its share (`who`: "rank 0", "a chunk"): CuPy's
    OutOfMemoryError as one sentence that says whose share, on which GPU of which host, and
    the bytes needed and free."""
    import cupy

    try:
        yield
    except cupy.cuda.memory.OutOfMemoryError as exc:
        free, total = cupy.cuda.runtime.memGetInfo()
        what = f"{who} ({gpu_label()}, {rows:,} points)"
        raise ImplementationError(out_of_memory(str(exc), what, free, total)) from None


def gpu_links() -> tuple[str, str | None]:
    """(this host's name, `nvidia-smi topo -m` as it prints it, or None where it cannot)."""
    try:
        shown = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return platform.node(), None
    return platform.node(), shown.stdout.strip() if shown.returncode == 0 else None

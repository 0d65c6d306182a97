"""Which implementation runs a kmbench.KMeans fit, learned once per process.

The first fit looks up only the rows it names (registry.find imports the modules that declare
them, where discover() imports about 30) and checks that they can run here; what it learns (the
row's class) is kept, so a later fit chooses in microseconds. Each fit gets an instance of its
own, so two fits never share a row's prepared state.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np

from kmbench import registry
from kmbench.estimator import inprocess
from kmbench.errors import UsageError
from kmbench.protocol import usable
from kmbench.protocol.device import cuda_status

# impl="auto" on the CPU: the first of these that can run here and computes in the data's
# precision, fastest first, exact rows only (kmbench-cpu computes in the data's precision and
# needs a C++ compiler; numpy runs anywhere the estimator can). Whether a fit goes to the GPU
# instead (GPU input, or work large enough to pay for the copy) is on_gpu.wanted's choice, made
# before: a small float32 fit would spend its time there copying and compiling (on_gpu.py).
AUTO = ("kmbench-cpu", "numpy")
ON_GPU = ("kmbench-gpu",)  # rows that run only where CuPy sees a GPU: not even imported elsewhere
# Where this cannot run, "auto" says so once a process: the numpy row after it is several times
# slower, and a user whose compiler is missing (or whose $CXX is wrong) would not otherwise know.
EXPECTED = "kmbench-cpu"
# Run in process by the compiled extension wherever it is built (inprocess.py), compiler or not.
IN_PROCESS = "kmbench-cpu"
_WARNED: set = set()


def choose(impl: str, dtype, weighted: bool = False):
    """A new instance of the row that runs a fit of `impl` ("auto" or a row's name) on data of
    `dtype`; weighted: "auto" takes only rows that take sample weights. An unknown name, or one
    of another task, is a ValueError; a row that cannot run here a RuntimeError."""
    return _row_class(impl, np.dtype(dtype).name, weighted)()


@lru_cache(maxsize=None)  # errors are raised, never kept: a fixed environment is asked again
def _row_class(impl: str, dtype: str, weighted: bool = False) -> type:
    if impl == "auto":
        names = [name for name in AUTO if name not in ON_GPU or cuda_status()[0]]
        rows = registry.find(names)
        for name in names:
            row = rows.get(name)
            if row is None or row.dtype not in (None, dtype) or (weighted and not row.takes_weights):
                continue
            if name == IN_PROCESS and inprocess.available():
                return inprocess.InProcessRow
            ready, why = usable(row)
            if ready:
                return type(row)
            if name == EXPECTED and name not in _WARNED:
                _WARNED.add(name)  # once a process, whatever the dtype or weights (a weighted miss is not cached)
                warnings.warn(f"{name} cannot run here ({why}); kmbench.KMeans fits run without it, several "
                              f"times slower (on the numpy row, or with sample weights on the estimator's own "
                              f"NumPy Lloyd).", UserWarning, stacklevel=5)
        raise RuntimeError(f"No implementation of {', '.join(AUTO)} can run here.")
    row = registry.find([impl]).get(impl)
    if row is None or "lloyd" not in row.tasks:
        try:
            registry.select(impl)  # its sentence, which lists the choices
        except UsageError as exc:
            raise ValueError(str(exc)) from None
    if impl == IN_PROCESS and inprocess.available():
        return inprocess.InProcessRow
    ready, why = usable(row)
    if not ready:
        raise RuntimeError(f"Implementation {impl!r} cannot run here: {why}.")
    return type(row)

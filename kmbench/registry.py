"""Find implementations: the built-ins, and third parties' through the entry-point group
`kmbench.impls` (each entry point names an `Implementation` subclass)."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from kmbench.errors import UsageError
from kmbench.protocol import Implementation

ENTRY_POINT_GROUP = "kmbench.impls"

# module:class, in the order of document 000's table where the row exists there.
BUILTINS = [
    "impls.numpy_blog:NumpyBlog",
    "impls.numpy_fast:NumpyFast",
    "impls.cpp:CppPlain",
    "impls.cpp:CppEigen",
    "impls.cpu_fast:KmbenchCpu",
    "impls.cuda:CudaV1",
    "impls.cuda:CudaV2",
    "impls.cuda:CudaV3",
    "impls.cuda.doc002:Cuda002",
    "impls.fast:KmbenchGpu",
    "impls.fast:KmbenchGpuTf32",
    "impls.fast.stream:KmbenchGpuStream",
    "impls.yinyang:YinyangGpu",
    "impls.triton_lloyd:TritonFused",
    "impls.kmcuda:Kmcuda",
    "impls.kmcuda:KmcudaYinyang",
    "impls.torch_impl:TorchLloyd",
    "impls.gpu_peers:FastPytorchKMeans",
    "impls.gpu_peers:FlashKMeans",
    "impls.gpu_peers:FlashKMeansHalf",
    "impls.keops_impl:PykeopsKMeans",
    "impls.gpu_peers:CumlKMeans",
    "impls.dask_impl:DaskLloyd",
    "impls.dask_impl:DaskCudaLloyd",
    "impls.dask_nccl:DaskNcclLloyd",
    "impls.sklearn_impl:SklearnKMeans",
    "impls.sklearnex_impl:SklearnexKMeans",
    "impls.faiss_impl:FaissKMeans",
    "impls.scipy_impl:ScipyKMeans2",
    "impls.batched_numpy:BatchedNumpy",
    "impls.batched_sklearn:BatchedSklearn",
    "impls.batched_gpu:BatchedNumba",
    "impls.batched_gpu:BatchedCudaC",
    "impls.batched_gpu:BatchedKmbench",
    "impls.assign_numpy:AssignNumpy",
    "impls.assign_ladder:AssignV1",
    "impls.assign_ladder:AssignV2",
    "impls.assign_ladder:AssignV3",
    "impls.assign_ladder:AssignV4",
    "impls.assign_ladder:AssignV5",
    "impls.assign_ladder:AssignV6",
    "impls.assign_ladder:AssignFastest",
]


class Broken(Implementation):
    """Stands in for an implementation whose module failed to import."""

    def __init__(self, name: str, reason: str):
        self.name, self.label, self._reason = name, name, reason
        self.description = "could not be loaded"

    def available(self):
        return False, self._reason


def _load(target: str) -> type[Implementation]:
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def discover() -> dict[str, Implementation]:
    """Every implementation by name, available or not."""
    found: dict[str, Implementation] = {}
    for target in BUILTINS:
        try:
            impl = _load(target)()
        except ModuleNotFoundError as exc:
            if exc.name and target.startswith(exc.name):
                continue  # a family not present in this checkout
            impl = Broken(target, f"import failed: {exc}")
        except Exception as exc:  # a broken module must not take the others down
            impl = Broken(target, f"import failed: {exc}")
        found[impl.name] = impl
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            impl = entry.load()()
        except Exception as exc:
            impl = Broken(entry.name, f"entry point failed to load: {exc}")
        found.setdefault(impl.name, impl)
    return found


def select(names: str | None, everything: dict[str, Implementation] | None = None,
           task: str = "lloyd") -> list[Implementation]:
    """Parse `--impl a,b` for one task; no names: every implementation of that task. An
    unknown name, or one that serves another task, is a usage error that lists the choices."""
    everything = everything if everything is not None else discover()
    serving = {name: impl for name, impl in everything.items() if task in impl.tasks}
    if not names:
        return list(serving.values())
    chosen = []
    for name in (part.strip() for part in names.split(",")):
        if not name:
            continue
        if name not in everything:
            raise UsageError(f"Unknown implementation {name!r}; known: {', '.join(serving)}.")
        if name not in serving:
            raise UsageError(f"Implementation {name!r} serves the {', '.join(everything[name].tasks)} task, "
                             f"not {task}; {task} implementations: {', '.join(serving)}.")
        chosen.append(serving[name])
    if not chosen:
        raise UsageError("--impl names no implementation.")
    return chosen

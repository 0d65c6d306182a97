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
    "impls.cpu.numpy_blog:NumpyBlog",
    "impls.cpu.numpy_fast:NumpyFast",
    "impls.cpu.cpp:CppPlain",
    "impls.cpu.cpp:CppEigen",
    "impls.cpu.kmbench_cpu:KmbenchCpu",
    "impls.gpu.cuda:CudaV1",
    "impls.gpu.cuda:CudaV2",
    "impls.gpu.cuda:CudaV3",
    "impls.gpu.cuda.doc002:Cuda002",
    "impls.gpu.kmbench_gpu:KmbenchGpu",
    "impls.gpu.kmbench_gpu:KmbenchGpuTf32",
    "impls.gpu.kmbench_gpu.stream:KmbenchGpuStream",
    "impls.gpu.yinyang:YinyangGpu",
    "impls.gpu.triton_fused:TritonFused",
    "impls.peers.kmcuda:Kmcuda",
    "impls.peers.kmcuda:KmcudaYinyang",
    "impls.peers.torch_lloyd:TorchLloyd",
    "impls.peers.gpu_libraries:FastPytorchKMeans",
    "impls.peers.gpu_libraries:FlashKMeans",
    "impls.peers.gpu_libraries:FlashKMeansHalf",
    "impls.peers.keops_kmeans:PykeopsKMeans",
    "impls.peers.gpu_libraries:CumlKMeans",
    "impls.distributed.dask_lloyd:DaskLloyd",
    "impls.distributed.dask_lloyd:DaskCudaLloyd",
    "impls.distributed.kmbench_gpu_dask:DaskNcclLloyd",
    "impls.peers.sklearn_kmeans:SklearnKMeans",
    "impls.peers.sklearnex_kmeans:SklearnexKMeans",
    "impls.peers.faiss_kmeans:FaissKMeans",
    "impls.peers.scipy_kmeans2:ScipyKMeans2",
    "impls.cpu.batched_numpy:BatchedNumpy",
    "impls.peers.batched_sklearn:BatchedSklearn",
    "impls.gpu.batched:BatchedNumba",
    "impls.gpu.batched:BatchedCudaC",
    "impls.gpu.batched:BatchedKmbench",
    "impls.cpu.assign_numpy:AssignNumpy",
    "impls.gpu.assign_ladder:AssignV1",
    "impls.gpu.assign_ladder:AssignV2",
    "impls.gpu.assign_ladder:AssignV3",
    "impls.gpu.assign_ladder:AssignV4",
    "impls.gpu.assign_ladder:AssignV5",
    "impls.gpu.assign_ladder:AssignV6",
    "impls.gpu.assign_ladder:AssignFastest",
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

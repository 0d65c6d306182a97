"""flashlib's rows wired to the library, on the CPU (impls/peers/flashlib_kmeans.py): stand-ins for
PyTorch and for flashlib's dispatcher, which decides as flashlib's does (its router, the demotion
where the CuTe DSL cannot be used, the per-step gate that hands float32 input to Triton through
the watched function), so that what each row hands it, times, counts and records is checked
without a GPU. tests/test_flashlib_peer.py runs the rows on one."""

import sys
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

import impls.peers.flashlib_kmeans as adapter
from kmbench.protocol import Problem


class Tensor:
    """As much of a torch tensor as the rows use, over a NumPy array."""

    def __init__(self, array):
        self.a = np.asarray(array)

    dtype = property(lambda self: self.a.dtype)
    ndim = property(lambda self: self.a.ndim)

    def to(self, dtype):
        return Tensor(self.a.astype(dtype))

    def half(self):
        return Tensor(self.a.astype(np.float16))

    def double(self):
        return Tensor(self.a.astype(np.float64))

    def cpu(self):
        return self

    def numpy(self):
        return self.a


def lloyd(x, centroids, iterations):
    for _ in range(iterations):
        labels = ((x[:, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
        for j in range(len(centroids)):
            if (labels == j).any():
                centroids[j] = x[labels == j].mean(0)
    return centroids


@pytest.fixture
def flashlib(monkeypatch):
    """The stand-in library: `state` sets its router's answer and the CuTe DSL's problem, and
    holds what each call was given."""
    state = SimpleNamespace(route=("cutedsl", "fa3"), problem=None, calls=[])
    torch = ModuleType("torch")
    torch.__version__ = "stand-in"
    torch.tensor = torch.as_tensor = lambda array, device=None: Tensor(np.array(array))
    torch.cuda = SimpleNamespace(synchronize=lambda: None, is_available=lambda: True)
    assign = ModuleType(adapter.FALLBACK_MODULE)
    assign.euclid_assign_triton = lambda *args, **kwargs: None

    def flash_kmeans(x, k, max_iters, tol, init_centroids):
        state.calls.append({"dtype": x.dtype, "k": k, "iters": max_iters, "tol": tol, "start": init_centroids.a.copy()})
        backend, _ = state.route
        cutedsl = backend == "cutedsl" and state.problem is None
        for _ in range(max_iters):  # the CuTe DSL loop's gate, looked up at each step as flashlib's is
            if cutedsl and x.dtype != np.float16:
                sys.modules[adapter.FALLBACK_MODULE].euclid_assign_triton(x)
        start = init_centroids.a.astype(np.float64)
        return None, Tensor(lloyd(x.a.astype(np.float64), start, max_iters).astype(x.dtype)), max_iters

    modules = {"torch": torch, "flashlib": ModuleType("flashlib"), "flashlib._optional": ModuleType("o"),
               "flashlib.primitives": ModuleType("p"), "flashlib.primitives.kmeans": ModuleType("k"),
               "flashlib.primitives.kmeans.impl": ModuleType("i"),
               "flashlib.primitives.kmeans.cutedsl": ModuleType("c"), adapter.FALLBACK_MODULE: assign}
    modules["flashlib"].flash_kmeans = flash_kmeans
    modules["flashlib._optional"]._cutedsl_problem = lambda: state.problem
    modules["flashlib.primitives.kmeans.impl"]._route = lambda **shape: state.route
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(adapter, "CudaEventRegion", HostRegion)
    import importlib.metadata

    def version(name):
        if name == "flashlib":
            return "0.4.0"
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", version)
    state.assign = assign
    return state


class HostRegion:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def seconds(self):
        return 0.001


def problem(rng, n=300, d=4, k=3, iterations=4):
    data = rng.standard_normal((n, d)).astype(np.float32)
    return Problem(data=data, initial_centroids=data[:k].astype(np.float64), iterations=iterations)


def test_a_float32_run_on_the_cute_dsl_route_is_recorded_as_triton_with_every_step_counted(flashlib, rng):
    row, task = adapter.Flashlib(), problem(rng)
    original = flashlib.assign.euclid_assign_triton
    row.prepare(task)
    result = row.run(task)
    first, timed = flashlib.calls
    assert first["iters"] == 1 and "compile" in row.setup_phases()  # the first call is prepare's, untimed
    assert (timed["iters"], timed["tol"], timed["k"], timed["dtype"]) == (4, -1.0, 3, np.float32)
    assert np.array_equal(timed["start"], task.initial_centroids.astype(np.float32))
    assert result.iterations == 4 and result.notes == [] and result.phases == {"iterate": 0.001}
    np.testing.assert_allclose(result.centroids, lloyd(task.data.astype(np.float64), task.initial_centroids.copy(), 4),
                               rtol=1e-5)
    assert flashlib.assign.euclid_assign_triton is original
    build = row.build_info()
    assert build["route"] == "cutedsl/fa3" and build["cutedsl"] == "nvidia-cutlass-dsl not installed: usable"
    assert build["path"] == ("triton (routed to cutedsl-fa3; its assignment fell back to Triton in every step: "
                             "its kernel takes fp16/bf16 input, not float32)")


def test_an_fp16_run_the_kernel_takes_is_recorded_as_the_cute_dsl_path(flashlib, rng):
    row, task = adapter.FlashlibHalf(), problem(rng)
    row.prepare(task)
    row.run(task)
    assert {call["dtype"] for call in flashlib.calls} == {np.dtype(np.float16)}
    assert row.build_info()["path"] == "cutedsl-fa3 assign, triton update"


def test_where_the_cute_dsl_cannot_be_used_the_run_says_so_and_counts_nothing(flashlib, rng):
    flashlib.problem = "importing cutlass failed: ModuleNotFoundError: No module named 'cutlass'"
    row, task = adapter.FlashlibHalf(), problem(rng)
    row.prepare(task)
    result = row.run(task)
    assert "CuTe DSL cannot be used here (importing cutlass failed" in result.notes[0]
    build = row.build_info()
    assert build["route"] == "triton" and build["path"] == "triton"
    assert build["cutedsl"].endswith("not usable (importing cutlass failed: ModuleNotFoundError: No module named "
                                     "'cutlass')")


def test_the_triton_route_is_recorded_as_such(flashlib, rng):
    flashlib.route = ("triton", None)
    row, task = adapter.Flashlib(), problem(rng)
    row.prepare(task)
    result = row.run(task)
    assert result.notes == [] and row.build_info()["path"] == "triton"


def test_before_prepare_the_record_says_nothing_was_checked(flashlib):
    build = adapter.Flashlib().build_info()
    assert build["cutedsl"].endswith("not checked (prepare did not get that far)") and build["path"] == "not run"

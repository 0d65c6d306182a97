"""A GPU cell's clocks on record (issue 59, build 4): NVML's reading of the GPUs a row ran on,
before and after its counted runs, and the flags every table shows for a cell timed throttled
or shared. NVML is a fake pynvml module here (no GPU on the CPU machines); the GPU test at the
end reads the real driver."""

import os
import subprocess
import sys
import types

import numpy as np
import pytest

from impls.cpu.numpy_fast import NumpyFast
from kmbench.data.datasets import Dataset
from kmbench.protocol import gpu_state, runner
from rich.console import Console

from kmbench.cli.output import summary_table
from kmbench.report import csv as csv_export
from kmbench.report import html, markdown, report
from kmbench.report import json as json_export
from kmbench.report.contents import Contents
from kmbench.tasks import lloyd
from tests.conftest import blob_data

FOREIGN_PID = 4_000_000  # above Linux's largest PID (2^22): never a process of this run's


class Process:
    def __init__(self, pid, memory):
        self.pid, self.usedGpuMemory = pid, memory


def fake_nvml(reasons=0x4, pids=(FOREIGN_PID,), gpus=1, fail_init=False):
    """A pynvml module with `gpus` GPUs at known clocks, `reasons` as their clocks-event mask and
    `pids` (and this process) holding each."""
    nvml = types.ModuleType("pynvml")
    nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM, nvml.NVML_TEMPERATURE_GPU = 1, 2, 0
    nvml.calls = []

    def init():
        if fail_init:
            raise RuntimeError("Driver Not Loaded")

    nvml.nvmlInit = init
    nvml.nvmlDeviceGetCount = lambda: gpus
    nvml.nvmlDeviceGetHandleByIndex = lambda index: ("gpu", index)
    nvml.nvmlDeviceGetIndex = lambda handle: handle[1]
    nvml.nvmlDeviceGetName = lambda handle: b"Fake H200"
    nvml.nvmlDeviceGetMinorNumber = lambda handle: handle[1]
    nvml.nvmlDeviceGetClockInfo = lambda handle, kind: {1: 1155, 2: 2619}[kind]
    nvml.nvmlDeviceGetPowerUsage = lambda handle: 699_500
    nvml.nvmlDeviceGetEnforcedPowerLimit = lambda handle: 700_000
    nvml.nvmlDeviceGetTemperature = lambda handle, sensor: 71

    def reasons_of(handle):
        nvml.calls.append("reasons")
        return reasons

    nvml.nvmlDeviceGetCurrentClocksEventReasons = reasons_of
    nvml.nvmlDeviceGetComputeRunningProcesses = lambda handle: [Process(os.getpid(), 2**30)] + [
        Process(pid, 3 * 2**30) for pid in pids]

    def not_supported(handle):
        raise RuntimeError("Not Supported")

    nvml.nvmlDeviceGetGraphicsRunningProcesses = not_supported  # a refused read is None, not a failure
    return nvml


@pytest.fixture
def no_cuda_libraries(monkeypatch):
    """As where neither CuPy nor PyTorch can name the row's CUDA device: the GPUs are those NVML
    sees (the fake's, on any machine, the GPU machine's too)."""
    monkeypatch.setattr(gpu_state, "_cuda_bus_ids", lambda ordinals: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


class FakeGpuRow(NumpyFast):
    """A correct row that says it runs on one GPU (computing with NumPy): its cells read NVML."""

    name = label = "fake-gpu"
    on_gpus = "one"


class FakeMultiGpuRow(FakeGpuRow):
    name = label = "fake-multi-gpu"
    on_gpus = "several"


def _run(impls, tmp_path):
    data = Dataset("unit", blob_data(np.random.default_rng(5), n=400), None, {"generator": "test"})
    settings = runner.Settings(k=4, iterations=5, warmup=1, repeats=2)
    return lloyd.run(impls, [data], settings, store=tmp_path / "r.jsonl")


def test_a_gpu_cell_records_clocks_before_and_after_and_is_flagged_throttled_and_shared(
        monkeypatch, tmp_path, no_cuda_libraries):
    nvml = fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    gpu_record, cpu_record = _run([FakeGpuRow(), NumpyFast()], tmp_path)

    assert gpu_record["status"] == "ok"
    state = gpu_record["gpu_state"]
    (gpu,) = state["gpus"]
    for when in ("before", "after"):
        look = gpu[when]
        assert (look["sm_clock_mhz"], look["memory_clock_mhz"], look["temperature_c"]) == (1155, 2619, 71)
        assert (look["power_w"], look["power_limit_w"]) == (699.5, 700.0)
        assert look["clocks_event_reasons"] == ["SW power cap"]
        assert {process["pid"] for process in look["processes"]} == {os.getpid(), FOREIGN_PID}
    assert nvml.calls == ["reasons", "reasons"]  # read once before and once after, not per run
    assert state["throttled"] and "SW power cap" in state["throttled"][0]
    # This process is the run's own; only the other one shares the GPU.
    assert len(state["shared"]) == 1 and str(FOREIGN_PID) in state["shared"][0]
    assert str(os.getpid()) not in state["shared"][0]
    warnings = " ".join(gpu_record["warnings"])
    assert "timed throttled: GPU 0" in warnings and "timed shared" in warnings

    assert state["found_by"] == "every GPU visible (which one the row used is not known here)"
    assert "gpu_state" not in cpu_record  # a CPU row's cell has no GPU to speak of

    # Every table marks it, its note says why: the console's, the markdown's, the CSV's and JSON's columns.
    page = markdown.render(Contents([gpu_record, cpu_record], "test"))
    assert "ok (throttled, shared)" in page and "timed throttled: GPU 0" in page
    table = csv_export.render(Contents([gpu_record, cpu_record], "test"))
    assert "gpu_flags" in table.splitlines()[0] and '"throttled, shared"' in table
    assert '"gpu_flags": "throttled, shared"' in json_export.render(Contents([gpu_record], "test"))
    console = Console(width=200, record=True)
    console.print(summary_table([gpu_record, cpu_record]))
    assert "ok (throttled, shared)" in console.export_text()


def test_idle_and_applications_clocks_are_no_throttling_and_the_run_alone_is_no_sharing(
        monkeypatch, tmp_path, no_cuda_libraries):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(reasons=0x1 | 0x2, pids=()))
    (record,) = _run([FakeGpuRow()], tmp_path)
    state = record["gpu_state"]
    assert state["gpus"][0]["after"]["clocks_event_reasons"] == ["GPU idle", "applications clocks setting"]
    assert state["throttled"] == [] and state["shared"] == []
    assert not any(warning.startswith(gpu_state.NOTE_PREFIXES) for warning in record["warnings"])
    assert report.cells_frame([record])["gpu_flags"].tolist() == [""]
    assert "ok (" not in markdown.render(Contents([record], "test"))


def test_a_multi_gpu_row_records_every_gpu_it_was_given(monkeypatch, tmp_path, no_cuda_libraries):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(reasons=0x0, pids=(), gpus=4))
    (every,) = _run([FakeMultiGpuRow()], tmp_path)
    assert [gpu["index"] for gpu in every["gpu_state"]["gpus"]] == [0, 1, 2, 3]
    assert every["gpu_state"]["found_by"] == "every GPU visible (the row uses them all)"

    data = Dataset("unit", blob_data(np.random.default_rng(5), n=400), None, {"generator": "test"})
    settings = runner.Settings(k=4, iterations=5, warmup=0, repeats=1)
    (asked,) = lloyd.run([FakeMultiGpuRow()], [data], settings, store=tmp_path / "r.jsonl",
                         options=runner.Options(gpus="1,3"))
    assert [gpu["index"] for gpu in asked["gpu_state"]["gpus"]] == [1, 3]
    assert asked["gpu_state"]["found_by"] == "the GPUs asked for (--gpus), as NVML numbers them"


def test_a_one_gpu_row_records_its_own_cuda_device_found_by_bus_id(monkeypatch, tmp_path):
    """On a four-GPU machine, a row on CUDA's current device (here the third GPU, as a Dask
    worker's CUDA_VISIBLE_DEVICES would make it) records that GPU alone."""
    nvml = fake_nvml(reasons=0x0, pids=(), gpus=4)
    nvml.nvmlDeviceGetHandleByPciBusId = {"0000:43:00.0": ("gpu", 2)}.__getitem__
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(gpu_state, "_cuda_bus_ids", lambda ordinals: ["0000:43:00.0"] if ordinals is None else None)
    (record,) = _run([FakeGpuRow()], tmp_path)
    assert [gpu["index"] for gpu in record["gpu_state"]["gpus"]] == [2]
    assert record["gpu_state"]["found_by"] == "the row's CUDA device, by PCI bus ID"


def test_without_pynvml_or_a_driver_the_record_says_not_recorded_and_why(monkeypatch, tmp_path, no_cuda_libraries):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    (record,) = _run([FakeGpuRow()], tmp_path)
    assert record["status"] == "ok"
    assert record["gpu_state"] == {"not_recorded": gpu_state.INSTALL_HINT}
    assert report.cells_frame([record])["gpu_flags"].tolist() == [""]

    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(fail_init=True))
    (record,) = _run([FakeGpuRow()], tmp_path)
    assert record["status"] == "ok"
    assert record["gpu_state"]["not_recorded"] == "NVML could not start (Driver Not Loaded)"


def test_the_html_page_marks_the_cell_and_says_why(monkeypatch, tmp_path, no_cuda_libraries):
    pytest.importorskip("plotly")
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(reasons=0x40, pids=()))
    records = _run([FakeGpuRow()], tmp_path)
    page = html.render(Contents(records, "test"))
    assert "ok (throttled)" in page and "HW thermal slowdown" in page and "timed shared" not in page


def test_own_processes_are_this_one_its_children_and_its_parents_not_its_siblings():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    sibling = None
    try:
        own = gpu_state.own_processes()
        assert {os.getpid(), os.getppid(), child.pid} <= own
        # A process the parent started that is not ours: another program beside this one.
        sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        assert sibling.pid not in gpu_state.own_processes(child.pid)
    finally:
        for process in (child, sibling):
            if process is not None:
                process.kill()
                process.wait()


def test_in_another_pid_namespace_only_the_count_of_processes_tells(monkeypatch):
    gpus = [{"index": 0, "minor": 0, "after": {"processes": [{"pid": 11, "memory_bytes": 1}, {"pid": 12, "memory_bytes": 1}]}}]
    monkeypatch.setattr(gpu_state, "_holding", lambda pids, minor: 1)  # ours holds it, under a PID NVML does not list
    (line,) = gpu_state.shared(gpus, own={999})
    assert "2 processes, 1 of them this run's" in line
    monkeypatch.setattr(gpu_state, "_holding", lambda pids, minor: 2)
    assert gpu_state.shared(gpus, own={999}) == []
    # A namespace that hides every process: not flagged, but said to be unknown.
    blind = [{"index": 0, "minor": 0, "before": {"processes": []}, "after": {"processes": []}}]
    assert gpu_state.shared(blind, own={999}) == []
    (line,) = gpu_state.hidden(blind, own={999})
    assert "whether another program shared it is not known" in line
    assert gpu_state.hidden(gpus, own={999}) == []


@pytest.mark.gpu
def test_on_the_gpu_machine_a_gpu_cell_records_the_real_clocks(tmp_path):
    pytest.importorskip("pynvml")
    from impls.gpu.cuda import CudaV1

    data = Dataset("unit", blob_data(np.random.default_rng(5), n=20_000), None, {"generator": "test"})
    settings = runner.Settings(k=5, iterations=10, warmup=1, repeats=2)
    (record,) = lloyd.run([CudaV1()], [data], settings, store=tmp_path / "r.jsonl")
    assert record["status"] == "ok", record.get("detail")
    (gpu,) = record["gpu_state"]["gpus"]
    for when in ("before", "after"):
        assert gpu[when]["sm_clock_mhz"] > 0 and gpu[when]["memory_clock_mhz"] > 0
        assert isinstance(gpu[when]["clocks_event_reasons"], list)
    assert record["gpu_state"]["found_by"] == "the row's CUDA device, by PCI bus ID"

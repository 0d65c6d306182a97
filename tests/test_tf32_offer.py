"""A row not offered for a problem (Implementation.unsuited): kmbench-gpu-tf32 below d = 33,
where TF32 tensor cores cannot help (its GEMM path took 5.3 ms an iteration at d = 2, where
kmbench-gpu took 2.6 us). The run skips the cell with the reason, `kmbench list` says where the
row is offered, and neither needs a GPU to say so."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from impls.cpu.numpy_fast import NumpyFast
from impls.gpu.kmbench_gpu import TF32_FROM_DIM, KmbenchGpu, KmbenchGpuTf32
from kmbench.cli.app import app
from kmbench.data.datasets import Dataset
from kmbench.protocol import Problem, runner
from kmbench.tasks import lloyd
from tests.conftest import blob_data


def _problem(d):
    data = np.zeros((10, d), np.float32)
    return Problem(data=data, initial_centroids=data[:2], iterations=3)


@pytest.mark.parametrize("d", [1, 2, 16, TF32_FROM_DIM - 1])
def test_tf32_is_not_offered_where_tensor_cores_cannot_help(d):
    why = KmbenchGpuTf32().unsuited(_problem(d))
    assert why.startswith(f"not offered at d = {d}: ") and f"cannot help below d = {TF32_FROM_DIM}" in why
    assert "kmbench-gpu's exact pass" in why
    assert KmbenchGpu().unsuited(_problem(d)) == ""  # its sibling is offered everywhere


@pytest.mark.parametrize("d", [TF32_FROM_DIM, 128, 768])
def test_tf32_is_offered_above_it_only_where_kmbench_gpus_tensor_pass_cannot_run(d, monkeypatch):
    """Where kmbench-gpu's certified tensor pass runs, the TF32 GEMM row trailed it 20-40x (one
    H200), so it is offered only where that pass cannot run and kmbench-gpu falls back to FP32 GEMM."""
    from impls.gpu.kmbench_gpu import tensor_settings

    monkeypatch.setattr(tensor_settings, "tensor_status", lambda: (False, "no Triton here"))
    assert KmbenchGpu().strategy_for(_problem(d)) == "gemm"
    assert KmbenchGpuTf32().unsuited(_problem(d)) == ""
    monkeypatch.setattr(tensor_settings, "tensor_status", lambda: (True, ""))
    assert KmbenchGpu().strategy_for(_problem(d)) == "tensor"
    why = KmbenchGpuTf32().unsuited(_problem(d))
    assert why.startswith(f"not offered at d = {d}: ") and "tensor-core pass runs here" in why


class NotHere(NumpyFast):
    """A row that could run but is not offered at small d: it must never be prepared or run."""

    name = label = "not-here"

    def unsuited(self, problem):
        return "Not offered below d = 3." if problem.d < 3 else ""

    def prepare(self, problem):
        raise AssertionError("prepared a cell it is not offered for")

    def run(self, problem):
        raise AssertionError("ran a cell it is not offered for")


def test_a_run_skips_a_cell_the_row_is_not_offered_for_with_its_reason(tmp_path):
    dataset = Dataset("unit", blob_data(np.random.default_rng(5), n=300), None, {"generator": "test"})
    records = lloyd.run([NotHere(), NumpyFast()], [dataset], runner.Settings(k=3, iterations=3, repeats=1),
                        store=tmp_path / "r.jsonl")
    assert [(r["impl"], r["status"]) for r in records] == [("not-here", "skipped"), ("numpy", "ok")]
    assert records[0]["detail"] == "Not offered below d = 3."


def test_list_says_where_the_tf32_row_is_offered():
    result = CliRunner().invoke(app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = [row for row in json.loads(result.output) if row["name"] == "kmbench-gpu-tf32"]
    assert f"not offered where TF32 tensor cores cannot help below d = {TF32_FROM_DIM}" in row["description"]

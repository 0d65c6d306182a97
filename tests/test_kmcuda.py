"""kmcuda rows (impls/peers/kmcuda). Without a GPU: what the adapter refuses, how it reads kmcuda's
iteration count, where it looks for the library. With a GPU and the library built (`make
kmcuda`): both rows against the oracle under the tolerance rule."""

from dataclasses import replace

import numpy as np
import pytest

from impls.peers.kmcuda import ITERATION_LINE, Kmcuda, KmcudaYinyang
from impls.peers.kmcuda.build import library_path
from kmbench.protocol import runner, validate
from kmbench.data.datasets import Dataset
from kmbench.errors import ImplementationError


def _problem(tol):
    data = np.random.default_rng(0).standard_normal((500, 4)).astype(np.float32)
    problem = runner.make_problem(Dataset("t", data, None, {}), runner.Settings(k=8, iterations=50))
    return replace(problem, tol=tol)


def test_a_fixed_iteration_count_is_refused_with_the_reason():
    with pytest.raises(ImplementationError, match="cannot run a fixed number of iterations"):
        Kmcuda().check(_problem(None))
    Kmcuda().check(_problem(0.01))  # the tolerance rule is kmcuda's own


def test_the_iteration_count_is_the_last_line_of_its_output():
    output = ("reassignments threshold: 3000\niteration 1: 300000 reassignments\n"
              "iteration 2: 51234 reassignments\niteration 1: 500 reassignments\n"  # Yinyang's grouping
              "iteration 3: 2900 reassignments\n")
    lines = ITERATION_LINE.findall(output)
    assert int(lines[-1][0]) == 3 and lines[-1][1] == "2900"


def test_the_library_path_can_be_named(monkeypatch, tmp_path):
    monkeypatch.setenv("KMBENCH_KMCUDA_LIB", str(tmp_path / "lib.so"))
    assert library_path() == tmp_path / "lib.so"


@pytest.mark.gpu
@pytest.mark.parametrize("impl", [Kmcuda(), KmcudaYinyang()], ids=["lloyd", "yinyang"])
def test_kmcuda_rows_against_the_oracle(impl):
    if not library_path().exists():
        pytest.skip("kmcuda is not built here: run `make kmcuda` first")
    rng = np.random.default_rng(1)
    middle = rng.uniform(-10, 10, (40, 32))
    data = (middle[rng.integers(0, 40, 30_000)] + rng.standard_normal((30_000, 32))).astype(np.float32)
    dataset = Dataset("gpu", data, None, {"generator": "test"})
    settings = runner.Settings(k=200, iterations=300, stop="tolerance", tol=0.01, warmup=0, repeats=1)
    problem = runner.make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, 300, tol=0.01)
    record = runner.run_cell(impl, problem, oracle, dataset, settings, "gpu")
    assert record["status"] in ("ok", "mismatch"), record.get("detail")  # ran; the verdict is kmcuda's
    assert record["iterations_executed"] >= 1


@pytest.mark.parametrize("content", [b"", b"\x7fELF truncated", b"not a library"])
def test_a_damaged_library_is_one_sentence_not_a_traceback(tmp_path, content):
    from impls.peers.kmcuda import _load

    damaged = tmp_path / "libKMCUDA.so"
    damaged.write_bytes(content)
    with pytest.raises(ImplementationError, match="cannot be loaded.*make kmcuda"):
        _load(damaged)

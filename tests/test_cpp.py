"""The C++ implementations: build on demand, cache, agreement with the oracle, and faults.
These need a C++ compiler (the CI machine has g++)."""

import os
import shutil
import stat

import numpy as np
import pytest

from impls.cpu.cpp import HERE, CppEigen, CppPlain, build
from kmbench.protocol import runner, validate
from kmbench.data.datasets import Dataset, blobs
from tests.conftest import blob_data

needs_compiler = pytest.mark.skipif(build.find_compiler()[0] is None, reason="no C++ compiler on PATH")


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def test_cache(shared_cache, monkeypatch):
    """One binary cache for the session (compiling Eigen is slow), never the user's.
    Tests that need a fresh build compile a private copy of the sources, a new key."""
    monkeypatch.setenv("KMBENCH_CACHE", str(shared_cache))


def _cell(impl, dataset, k=5, iterations=25, repeats=2):
    settings = runner.Settings(k=k, iterations=iterations, warmup=1, repeats=repeats)
    problem = runner.make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations)
    return runner.run_cell(impl, problem, oracle, dataset, settings, "t")


@needs_compiler
@pytest.mark.parametrize("impl_class", [CppPlain, CppEigen])
@pytest.mark.parametrize("d", [2, 5])
def test_builds_runs_and_agrees_with_reference(impl_class, d):
    dataset = blobs(3000, d=d, centers=5, seed=d)
    record = _cell(impl_class(), dataset)
    assert record["status"] == "ok", record.get("detail")
    assert record["repeats_done"] == 2 and len(record["times"]["iterate_values"]) == 2
    assert record["build"]["flags"][:2] == ["-O3", "-std=c++17"]
    assert record["build"]["compiler_version"]
    assert "process_overhead" in record["times"]["phases"]
    assert "build" in record["times"]["setup_phases"]


@needs_compiler
def test_in_memory_data_and_empty_cluster():
    data = blob_data(np.random.default_rng(2), n=400, k=3).astype(np.float64)
    data[0] = [300.0, 300.0]  # a lone far point: its cluster stays, another goes empty
    dataset = Dataset("mem", data, None, {"generator": "test"})
    settings = runner.Settings(k=4, iterations=10, warmup=0, repeats=1)
    problem = runner.make_problem(dataset, settings)
    from dataclasses import replace

    start = np.vstack([data[1:4], [[-500.0, -500.0]]])
    problem = replace(problem, initial_centroids=start)
    oracle = validate.Oracle.compute(data, start, 10)
    for impl in (CppPlain(), CppEigen()):
        record = runner.run_cell(impl, problem, oracle, dataset, settings, "t")
        assert record["status"] == "ok", (impl.name, record.get("detail"))


def _copy_sources(tmp_path):
    target = tmp_path / "src"
    shutil.copytree(HERE, target, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return target


@needs_compiler
def test_cache_hit_then_rebuild_after_source_change(tmp_path):
    source = _copy_sources(tmp_path)
    with open(source / "kmeans.cpp", "a") as handle:  # a key no other test has built
        handle.write(f"\n// {tmp_path.name}\n")
    dataset = blobs(200, seed=1)
    first = _cell(CppPlain(source), dataset, iterations=3, repeats=1)
    second = _cell(CppPlain(source), dataset, iterations=3, repeats=1)
    assert first["build"]["built_now"] and not second["build"]["built_now"]
    assert first["build"]["binary"] == second["build"]["binary"]
    with open(source / "kmeans.cpp", "a") as handle:
        handle.write("\n// a change that must trigger a rebuild\n")
    third = _cell(CppPlain(source), dataset, iterations=3, repeats=1)
    assert third["build"]["built_now"] and third["build"]["cache_key"] != first["build"]["cache_key"]
    assert third["status"] == "ok"


@needs_compiler
@pytest.mark.parametrize("damage", ["truncated", "empty", "digest-missing"])
def test_a_damaged_cached_binary_is_built_again(tmp_path, damage):
    source = _copy_sources(tmp_path)
    with open(source / "kmeans.cpp", "a") as handle:  # a key no other test has built
        handle.write(f"\n// {tmp_path.name}\n")
    dataset = blobs(200, seed=1)
    first = _cell(CppPlain(source), dataset, iterations=3, repeats=1)
    binary = first["build"]["binary"]
    if damage == "digest-missing":
        os.remove(binary + ".sha256")
    else:
        with open(binary, "r+b") as handle:
            handle.truncate(0 if damage == "empty" else 100)
    again = _cell(CppPlain(source), dataset, iterations=3, repeats=1)
    assert again["build"]["built_now"] and again["build"]["binary"] == binary
    assert again["status"] == "ok", again.get("detail")


@needs_compiler
def test_flags_are_part_of_the_key(monkeypatch):
    dataset = blobs(200, seed=1)
    plain = _cell(CppPlain(), dataset, iterations=2, repeats=1)
    monkeypatch.setenv("KMBENCH_NATIVE", "1")
    native = _cell(CppPlain(), dataset, iterations=2, repeats=1)
    assert "-march=native" in native["build"]["flags"]
    assert native["build"]["cache_key"] != plain["build"]["cache_key"]


def test_missing_compiler_is_a_skip_with_reason(monkeypatch, tmp_path):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing executable here
    record = _cell(CppPlain(), blobs(100, seed=0), iterations=2, repeats=1)
    assert record["status"] == "skipped" and "no C++ compiler" in record["detail"]
    monkeypatch.setenv("CXX", "no-such-compiler++")
    assert CppPlain().available() == (False, "CXX=no-such-compiler++ is not an executable on PATH")


@needs_compiler
def test_compile_error_shows_the_compilers_message(tmp_path):
    source = _copy_sources(tmp_path)
    (source / "kmeans.cpp").write_text('#include "harness.hpp"\nint main() { return undeclared_thing; }\n')
    record = _cell(CppPlain(source), blobs(100, seed=0), iterations=2, repeats=1)
    assert record["status"] == "error"
    assert "compiling kmeans.cpp failed" in record["detail"] and "undeclared_thing" in record["detail"]


def _fake_binary(tmp_path, script):
    path = tmp_path / "fake"
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


class Faked(CppPlain):
    """The real build, then a stand-in program: a crash, garbage or a hang."""

    def __init__(self, program, timeout=30):
        super().__init__(timeout=timeout)
        self.program = program

    def prepare(self, problem):
        super().prepare(problem)
        self._binary.path = self.program


@pytest.mark.parametrize("script,needle", [
    ("kill -SEGV $$", "killed by signal 11"),
    ("echo 'not json'", "not kmbench's JSON"),
    ('echo \'{"centroids": [[1, 2]], "iterations": 3, "times": [0.1]}\'', "shape"),
])
@needs_compiler
def test_crashes_and_bad_output_become_errors(tmp_path, script, needle):
    record = _cell(Faked(_fake_binary(tmp_path, script)), blobs(100, seed=0), iterations=2, repeats=1)
    assert record["status"] == "error" and needle in record["detail"], record["detail"]


@needs_compiler
def test_timeout_becomes_an_error(tmp_path):
    record = _cell(Faked(_fake_binary(tmp_path, "sleep 5"), timeout=0.5), blobs(100, seed=0),
                   iterations=2, repeats=1)
    assert record["status"] == "error" and "did not finish within 0.5 s" in record["detail"]


@needs_compiler
def test_bad_input_makes_the_real_binary_fail_cleanly(tmp_path):
    impl = CppPlain()
    dataset = blobs(100, seed=0)
    settings = runner.Settings(k=3, iterations=2, warmup=0, repeats=1)
    problem = runner.make_problem(dataset, settings)
    impl.prepare(problem)
    impl._data_path.parent.mkdir(exist_ok=True)
    impl._data_path = tmp_path / "truncated.npy"
    impl._data_path.write_bytes(b"\x93NUMPY\x01\x00")
    with pytest.raises(Exception, match="exited with status 1"):
        impl.run(problem)
    impl.release()


@needs_compiler
def test_concurrent_builds_build_once(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    source = _copy_sources(tmp_path)
    with open(source / "kmeans.cpp", "a") as handle:
        handle.write(f"\n// {tmp_path.name}\n")
    flags = list(build.BASE_FLAGS)
    with ThreadPoolExecutor(3) as pool:
        binaries = list(pool.map(lambda _: build.build("race", [source / "kmeans.cpp", source / "harness.hpp"], flags), range(3)))
    assert sum(b.built_now for b in binaries) == 1
    assert len({b.path for b in binaries}) == 1 and os.access(binaries[0].path, os.X_OK)


@needs_compiler
def test_float32_on_request(monkeypatch):
    monkeypatch.setenv("KMBENCH_CPP_PRECISION", "float32")
    record = _cell(CppPlain(), blobs(2000, seed=5))
    assert record["status"] == "ok", record.get("detail")
    assert record["validation"]["dtype"] == "float32" and record["build"]["precision"] == "float32"


def test_eigen_include_overrides_the_wheel(monkeypatch, tmp_path):
    from impls.cpu.cpp import eigen_include

    found, _ = eigen_include()
    monkeypatch.setenv("EIGEN_INCLUDE", str(tmp_path))
    assert CppEigen().available() == (False, f"EIGEN_INCLUDE={tmp_path} has no Eigen/Dense")
    if found is not None:
        monkeypatch.setenv("EIGEN_INCLUDE", str(found))
        assert eigen_include() == (found, "")

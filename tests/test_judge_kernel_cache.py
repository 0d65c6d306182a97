"""The judge's GPU kernels are compiled once per machine, not once per process: every kernel a
judgement compiles (its own RawKernels, and CuPy's elementwise, reduction and CUB kernels) lands
in CuPy's on-disk cache, and a second process judging the same kinds of problem finds each of
them there and compiles nothing. A kernel whose source changed with the problem (a size baked
in as a #define, say) would add files in the second process, which judges other sizes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# One judgement of each shape the judge takes different paths for: the fused float64 kernel
# (d <= 8), the float32 products with the scored kernel (d > 8), a traced row with its labels at
# the end, a stepped row with labels at every step, the direct form. argv[1] changes n and the
# iteration count (0 in both processes here).
CHILD = r"""
import sys, time
import cupy, numpy as np
from dataclasses import replace
from impls.cpu.numpy_blog import NumpyBlog
from impls.cpu.numpy_fast import NumpyFast
from kmbench.judge import trajectory
from kmbench.protocol import Problem

class Direct(NumpyBlog):
    traces = False  # stepped: labels at every step
    def distance_form(self, problem):
        return "direct"  # it sums (x - c)^2 itself

more = int(sys.argv[1])
start = time.perf_counter()
for row, d, k in ((NumpyFast(), 2, 5), (Direct(), 2, 5), (NumpyFast(), 40, 7)):
    data = np.random.default_rng(d).standard_normal((3000 + 2000 * more, d)).astype(np.float32)
    problem = Problem(data=data, initial_centroids=data[:k].copy(), iterations=3 + more)
    row.prepare(problem)
    timed = row.run(problem)
    certificate = trajectory.certify(row, problem, [timed], "float32", xp=cupy)
    row.release()
    assert certificate.steps == problem.iterations, certificate.as_dict()
cupy.cuda.Device().synchronize()
print(f"judged in {time.perf_counter() - start:.2f} s")
"""


def _judge_in_a_process(cache: Path, more: int) -> str:
    env = dict(os.environ, CUPY_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("CUPY_CACHE_IN_MEMORY", None)
    done = subprocess.run([sys.executable, "-c", CHILD, str(more)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def _cached(cache: Path) -> set[str]:
    return {str(path.relative_to(cache)) for path in cache.rglob("*") if path.is_file()}


@pytest.mark.gpu
def test_a_second_process_finds_every_judge_kernel_compiled(tmp_path):
    cache = tmp_path / "kernel_cache"
    first = _judge_in_a_process(cache, 0)
    compiled = _cached(cache)
    assert compiled, "the judgement compiled nothing into CUPY_CACHE_DIR"
    second = _judge_in_a_process(cache, 0)
    added = _cached(cache) - compiled
    assert not added, f"a second process compiled {len(added)} kernels again: {sorted(added)[:5]}"
    # Another n or k may compile a few of CuPy's own reduction kernels once more, for a new block
    # size (an H200 compiled 3 for k + 1 and 4 for another n); those land in the same cache, so the
    # next process of that shape compiles none. The judge's own kernels take n, d and k as arguments.
    print(f"\n{len(compiled)} kernels cached; first process {first}, second {second}")

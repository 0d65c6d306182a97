"""scikit-learn's own KMeans tests, run against kmbench.KMeans: how much of a drop-in it is.

Copies `sklearn/cluster/tests/test_k_means.py` of the installed scikit-learn into a scratch
folder (never into this repository), puts `from kmbench import KMeans` in place of
scikit-learn's KMeans (MiniBatchKMeans and the private helpers stay scikit-learn's), runs it
with MiniBatchKMeans's tests deselected and prints the counts and every failing test.
docs/usage.md lists each remaining failure with its reason.

    .venv/bin/python bench/sklearn_conformance.py [-- extra pytest arguments]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import sklearn

SOURCE = Path(sklearn.__file__).parent / "cluster" / "tests" / "test_k_means.py"
IMPORT = "from sklearn.cluster import KMeans, MiniBatchKMeans, k_means, kmeans_plusplus"


def substituted(text: str) -> str:
    """The test file with kmbench's KMeans in place of scikit-learn's."""
    if IMPORT not in text:
        raise SystemExit(f"{SOURCE} no longer imports KMeans as `{IMPORT}`; update this script.")
    return text.replace(IMPORT, IMPORT + "\nfrom kmbench import KMeans")


def main(extra: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="kmbench-sklearn-tests-") as scratch:
        test_file = Path(scratch) / "test_k_means_kmbench.py"
        test_file.write_text(substituted(SOURCE.read_text()))
        # sklearn's conftest gives the global_random_seed and global_dtype fixtures; -c names no
        # configuration, so this repository's pytest settings stay out of it.
        command = [sys.executable, "-m", "pytest", str(test_file), "-p", "sklearn.conftest", "-c", "/dev/null",
                   "--rootdir", scratch, "-q", "-p", "no:cacheprovider", "-k", "not MiniBatch", "-rf", *extra]
        # SKLEARN_RUN_FLOAT32_TESTS: the float32 cases of the global_dtype tests, skipped otherwise.
        environment = {**os.environ, "SKLEARN_RUN_FLOAT32_TESTS": "1"}
        done = subprocess.run(command, capture_output=True, text=True, cwd=scratch, env=environment)
    output = done.stdout + done.stderr
    failed = sorted(set(re.findall(r"^FAILED \S+::(\S+)", output, re.MULTILINE)))
    counts = dict((word, int(number)) for number, word in re.findall(r"(\d+) (passed|failed|skipped|error|errors)", output))
    passed, total = counts.get("passed", 0), sum(counts.values())
    print(f"scikit-learn {sklearn.__version__}'s {SOURCE.name} against kmbench.KMeans: {passed} of {total} pass")
    for name in failed:
        print(f"  failed: {name}")
    if not total:
        print(output[-3000:])
    return 0 if total else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[2:] if sys.argv[1:2] == ["--"] else sys.argv[1:]))

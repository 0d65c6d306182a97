"""`kmbench --help` took 1.3 s and `kmbench list` 5.5 s on a fresh clone (issue 59), importing
pandas, scikit-learn and Dask before printing a line. Each is imported where it is used: asked
in a fresh interpreter, which heavy modules the command loaded (behaviour, not timing)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "sklearn", "scipy", "matplotlib", "plotly", "dask", "distributed")


def _loaded_by(args: list[str], blocked: tuple[str, ...] = ()) -> list[str]:
    """The heavy modules a fresh interpreter holds after the command (`blocked`: modules made
    uninstalled first, as in an install without them)."""
    code = ("import json, sys\n"
            f"for name in {list(blocked)!r}: sys.modules[name] = None\n"
            "from typer.testing import CliRunner\n"
            "from kmbench.cli import app\n"
            f"out = CliRunner().invoke(app, {args!r})\n"
            "assert out.exit_code == 0, out.output\n"
            f"print(json.dumps([name for name in {list(HEAVY)!r} if sys.modules.get(name) is not None]))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["report", "--help"], ["compare", "--help"]])
def test_help_imports_no_heavy_module(args):
    assert _loaded_by(args) == []


def test_list_imports_no_heavy_module_to_say_what_is_installed():
    from tests.conftest import _gpu_reason

    if _gpu_reason() is None:  # seen on an H200: CuPy pulls in SciPy, dask-cuda's check Dask
        pytest.skip("a GPU is usable here: the GPU rows' checks import their libraries to say they run")
    # scikit-learn-intelex (in the dev extra, not in `make run`'s install) is scikit-learn when
    # imported, and its check must import it: a library that fails to load is its reason.
    assert _loaded_by(["list"], blocked=("sklearnex",)) == []

"""Capture the machine and software a result was measured on."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from kmbench.protocol import ceilings

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "KMBENCH_THREADS")
LIBRARIES = ("numpy", "scipy", "scikit-learn", "pandas", "threadpoolctl", "cupy-cuda12x",
             "cupy-cuda13x", "cmeel-eigen", "nvidia-ml-py")


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what the platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def git_commit() -> str | None:
    """The checkout's commit (with -dirty for uncommitted changes), or None outside git."""
    root = Path(__file__).resolve().parents[2]  # the checkout: kmbench/protocol/ is two below
    try:
        head = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=5)
        if head.returncode != 0:
            return None  # a copy without .git (as on the device machine) has no commit to name
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    commit = head.stdout.strip()
    return f"{commit}{'-dirty' if dirty else ''}" if commit else None


def _libraries() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def threads() -> dict:
    """Thread settings: the environment variables and what threadpoolctl sees."""
    info = {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ}
    try:
        from threadpoolctl import threadpool_info

        info["threadpools"] = [
            {"api": pool.get("internal_api"), "num_threads": pool.get("num_threads")}
            for pool in threadpool_info()
        ]
    except Exception as exc:  # threadpoolctl is optional at this depth
        info["threadpools_error"] = str(exc)
    return info


def gpu() -> dict | None:
    """GPU name, driver and CUDA runtime when CuPy can see a device, else None."""
    try:
        import cupy

        runtime = cupy.cuda.runtime
        if runtime.getDeviceCount() < 1:
            return None
        props = runtime.getDeviceProperties(0)
        name = props["name"]
        return {
            "name": name.decode() if isinstance(name, bytes) else name,
            "compute_capability": f"{props['major']}.{props['minor']}",
            "multiprocessors": props["multiProcessorCount"],
            "memory_bytes": props["totalGlobalMem"],
            "driver_version": runtime.driverGetVersion(),
            "runtime_version": runtime.runtimeGetVersion(),
            "copy_bandwidth_Bps": ceilings.copy_bandwidth(cupy),
            "fp32_issue_rate": ceilings.fp32_issue_rate(cupy),
            **ceilings.tensor_rates(cupy),
        }
    except Exception:
        return None


CODE_SUFFIXES = (".py", ".json", ".toml", ".cu", ".cuh", ".cpp", ".hpp")


@lru_cache(maxsize=1)
def code_hash() -> str:
    """A hash of every source file of the harness and the implementations: what decides
    whether two records were measured with the same code (git's commit does not see
    uncommitted edits, and the device machine has no .git)."""
    import hashlib

    root = Path(__file__).resolve().parents[2]  # the checkout: kmbench/protocol/ is two below
    digest = hashlib.sha256()
    for folder in ("kmbench", "impls"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in CODE_SUFFIXES and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def identity(env: dict | None = None) -> tuple:
    """Code and machine of a record's environment (or of this process): equal identities
    measure the same thing, so a finished cell need not run again."""
    env = env if env is not None else capture()
    gpu = env.get("gpu") or {}
    return (env.get("code_hash"), env.get("cpu"), env.get("cores"), gpu.get("name"))


BUSY_LOOK_S = 0.25  # how long busy_cores watches the CPUs


def _cpu_ticks(cpus: set[int]) -> tuple[int, int] | None:
    """(busy, total) jiffies of these CPUs since boot (Linux's /proc/stat), or None elsewhere."""
    busy = total = 0
    try:
        with open("/proc/stat") as stat:
            for line in stat:
                name, *fields = line.split()
                if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
                    continue
                ticks = [int(value) for value in fields[:8]]  # user nice system idle iowait irq softirq steal
                total += sum(ticks)
                busy += sum(ticks) - ticks[3] - ticks[4]
    except (OSError, ValueError):
        return None
    return busy, total


def busy_cores(look_s: float = BUSY_LOOK_S) -> float | None:
    """How many of the cores this process may use other programs keep busy, watched for
    `look_s` while this process sleeps (what pyperf checks before it times): 0 on an idle
    machine, 1.6 where another program holds most of two cores. Where /proc/stat is missing,
    the 1-minute load average (which counts this process too, while it ran); None if neither."""
    try:
        cpus = os.sched_getaffinity(0)
    except AttributeError:
        cpus = set(range(os.cpu_count() or 1))
    before = _cpu_ticks(cpus)
    if before is None:
        try:
            return min(float(os.getloadavg()[0]), float(len(cpus)))
        except (AttributeError, OSError):
            return None
    time.sleep(look_s)
    after = _cpu_ticks(cpus)
    spent = after[1] - before[1] if after else 0
    return len(cpus) * (after[0] - before[0]) / spent if spent > 0 else None


@lru_cache(maxsize=1)
def capture() -> dict:
    """The environment of this process, once per run."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        # Before any cell is timed (the first capture starts every run): a busy machine is said.
        "busy_cores": busy_cores(),
        "ram_bytes": _ram_bytes(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "libraries": _libraries(),
        "threads": threads(),
        "gpu": gpu(),
        "cpu_ceilings": {"copy_bandwidth_Bps": ceilings.cpu_copy_bandwidth(),
                         "fp32_issue_rate": ceilings.cpu_fp32_rate()},
        "git_commit": git_commit(),
        "code_hash": code_hash(),
        "command": shlex.join([Path(sys.argv[0]).name] + sys.argv[1:]),
        "hostname": platform.node(),
    }


def describe_machine(env: dict | None) -> str:
    """One line for the machine a record was measured on: CPU and cores, and the GPU if any."""
    env = env or {}
    gpu = (env.get("gpu") or {}).get("name")
    cpu = f"{env.get('cpu', '?')} ({env.get('cores', '?')} cores)"
    return f"{cpu} + {gpu}" if gpu else f"{cpu}, no GPU"

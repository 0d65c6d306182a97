"""Build native sources on demand, once, into a cache keyed by what decides the binary.

The key hashes the sources, the flags, the compiler's path and its version, so a change to
any of them rebuilds and nothing else does. Builds take a file lock and land by atomic
rename, so concurrent runs build once and never see half a binary. Each binary has its
sha256 beside it; a cached binary that no longer matches (truncated, overwritten) or has
no digest is built again.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kmbench.data import files
from kmbench.errors import ImplementationError

BASE_FLAGS = ("-O3", "-std=c++17")  # document 000's flags (it used -std=c++11)


def cache_dir() -> Path:
    root = os.environ.get("KMBENCH_CACHE") or os.environ.get("XDG_CACHE_HOME")
    return Path(root) / "kmbench" if root else Path.home() / ".cache" / "kmbench"


def find_compiler() -> tuple[str | None, str]:
    """The C++ compiler: $CXX, else the first of c++, g++, clang++ on PATH; or a reason."""
    wanted = os.environ.get("CXX")
    if wanted:
        found = shutil.which(wanted)
        return (found, "") if found else (None, f"CXX={wanted} is not an executable on PATH")
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found:
            return found, ""
    return None, "no C++ compiler found (install g++ or clang++, or set CXX)"


@lru_cache(maxsize=8)
def compiler_version(compiler: str) -> str:
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ImplementationError(f"cannot run the C++ compiler {compiler}: {exc}") from None
    return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else "unknown"


def extra_flags() -> list[str]:
    """`KMBENCH_NATIVE=1` adds -march=native (off by default, so binaries stay portable)."""
    return ["-march=native"] if os.environ.get("KMBENCH_NATIVE") == "1" else []


@dataclass
class Binary:
    path: Path
    compiler: str
    version: str
    flags: list[str]
    key: str
    built_now: bool
    build_seconds: float

    def info(self) -> dict:
        return {"compiler": self.compiler, "compiler_version": self.version, "flags": self.flags,
                "binary": str(self.path), "cache_key": self.key, "built_now": self.built_now,
                "build_seconds": self.build_seconds}


def build(name: str, sources: list[Path], flags: list[str]) -> Binary:
    """Compile `sources` (the first is the translation unit; the rest are headers it includes)."""
    compiler, why = find_compiler()
    if compiler is None:
        raise ImplementationError(why)
    version = compiler_version(compiler)
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    digest.update("\0".join([compiler, version, *flags]).encode())
    key = digest.hexdigest()[:16]
    target = cache_dir() / "cpp" / f"{name}-{key}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits, then finds the binary
        digest_file = target.with_name(target.name + ".sha256")
        if target.exists() and digest_file.exists() and digest_file.read_text().strip() == _file_digest(target):
            return Binary(target, compiler, version, flags, key, False, 0.0)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        command = [compiler, *flags, "-o", str(tmp), str(sources[0])]
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise ImplementationError(f"compiling {sources[0].name} took more than 600 s") from None
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            message = " ".join(line.strip() for line in done.stderr.splitlines() if "error" in line)
            raise ImplementationError(
                f"compiling {sources[0].name} failed: {(message or done.stderr.strip())[:400]}")
        os.replace(tmp, target)
        files.write_text_atomically(digest_file, _file_digest(target) + "\n")
        return Binary(target, compiler, version, flags, key, True, time.perf_counter() - start)


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()

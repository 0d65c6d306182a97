"""Our CUDA sources reach CuPy with their local headers pasted in (impls/gpu/cuda/sources.py), so
CuPy's kernel cache, keyed on the code string, sees an edited header. Runs without a GPU; the
pasted text is compiled with nvcc where it is on PATH."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from impls.gpu.cuda.sources import with_local_includes

IMPLS = Path(__file__).resolve().parents[1] / "impls"
WITH_HEADERS = sorted(p for p in IMPLS.rglob("*.cu") if '#include "' in p.read_text())


def test_some_sources_include_a_local_header():
    assert {p.parent.name for p in WITH_HEADERS} >= {"cuda", "assign_ladder"}


@pytest.mark.parametrize("source", WITH_HEADERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_local_header_is_pasted(source):
    text = with_local_includes(source)
    assert '#include "' not in text
    assert "#pragma once" not in text
    for name in re.findall(r'#include "([^"]+)"', source.read_text()):
        header = (source.parent / name).read_text().replace("#pragma once", "").strip()
        assert header.splitlines()[-1] in text


def _options(source: Path, half: bool) -> list[str]:
    """How each source is compiled: the Hopper passes for sm_90a at one d of theirs (in TF32 or
    fp16; 408 pads to 416 in fp16), the rest for sm_90."""
    if source.name.startswith("hopper_"):
        from impls.gpu.kmbench_gpu.hopper_pass import build_options

        return build_options(408 if source.name == "hopper_wide.cu" else 128, half=half)
    return ["-arch=sm_90", "-std=c++17"]


# Every source once; the Hopper passes, which have an fp16 form, twice.
BUILDS = [(p, False) for p in WITH_HEADERS] + [(p, True) for p in WITH_HEADERS if p.name.startswith("hopper_")]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("source, half", BUILDS,
                         ids=[f"{p.parent.name}/{p.name}{'-fp16' if half else ''}" for p, half in BUILDS])
def test_the_pasted_text_compiles_without_an_include_path(source, half, tmp_path):
    pasted = tmp_path / source.name
    pasted.write_text(with_local_includes(source))
    done = subprocess.run(["nvcc", "-cubin", *_options(source, half), "-o", str(tmp_path / "k.cubin"), str(pasted)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_an_edited_header_changes_the_text_nested_headers_come_once(tmp_path):
    (tmp_path / "inner.cuh").write_text("#pragma once\n#define INNER 1\n")
    (tmp_path / "common.cuh").write_text('#pragma once\n#include "inner.cuh"\n#define VALUE 1\n')
    (tmp_path / "k.cu").write_text('#include <cstdint>\n#include "common.cuh"\n#include "inner.cuh"\nint x = VALUE;\n')
    before = with_local_includes(tmp_path / "k.cu")
    assert before.count("#define INNER 1") == 1 and "#include <cstdint>" in before
    (tmp_path / "common.cuh").write_text('#pragma once\n#include "inner.cuh"\n#define VALUE 2\n')
    after = with_local_includes(tmp_path / "k.cu")
    assert before != after and "#define VALUE 2" in after


def test_a_missing_header_is_named(tmp_path):
    (tmp_path / "k.cu").write_text('#include "gone.cuh"\n')
    with pytest.raises(FileNotFoundError, match="k.cu includes gone.cuh"):
        with_local_includes(tmp_path / "k.cu")

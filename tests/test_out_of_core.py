"""The out-of-core benchmark's sizing (kmbench/plans/out_of_core.py) and its command's help and
refusals (`kmbench out-of-core`); its table is a report view (tests/test_report_views.py). The
run itself needs a GPU and is a benchmark (`make out-of-core`), not a test."""

import pytest
from typer.testing import CliRunner

from kmbench.cli import app
from kmbench.plans import out_of_core


def out_of_core_cli(*args):
    return CliRunner().invoke(app, ["out-of-core", *(str(a) for a in args)])


def test_points_take_the_share_of_gpu_memory():
    n = out_of_core.points_for(1.2, 128, 85_017_493_504)
    assert n * 128 * 4 <= 1.2 * 85_017_493_504 < (n + 1) * 128 * 4


def test_help_says_what_it_measures_and_names_every_option():
    shown = out_of_core_cli("--help")
    assert shown.exit_code == 0
    text = " ".join(shown.output.split())
    assert "Lloyd on data larger than the GPU's memory" in text and "copy floor" in text
    for option in ("--share", "--d", "--k", "--centers", "--impl", "--iters", "--warmup", "--repeats", "--seed",
                   "--store", "--out"):
        assert option in text


@pytest.mark.parametrize("args, sentence", [
    (["--share", "abc"], "Error: --share takes positive numbers, comma-separated (e.g. 1.2,0.3); got 'abc'."),
    (["--share", "1.2,0"], "Error: --share takes positive numbers, comma-separated (e.g. 1.2,0.3); got '1.2,0'."),
    (["--k", "0"], "Error: --k must be at least 1; got 0."),
    (["--impl", "no-such-row"], "Error: Unknown implementation 'no-such-row'; known: "),
])
def test_a_bad_argument_is_one_sentence_and_exit_2_before_the_gpu_is_asked_for(tmp_path, args, sentence):
    ran = out_of_core_cli(*args, "--store", tmp_path / "r.jsonl")
    assert ran.exit_code == 2
    text = " ".join(ran.output.split())
    assert text.startswith(sentence) and text.count("Error:") == 1 and "Traceback" not in text
    assert not (tmp_path / "r.jsonl").exists()


def test_without_a_gpu_it_says_why_in_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setattr(out_of_core, "cuda_status", lambda: (False, "no NVIDIA GPU visible"))
    ran = out_of_core_cli("--share", "0.01", "--store", tmp_path / "r.jsonl")
    assert ran.exit_code == 2
    assert " ".join(ran.output.split()) == "Error: kmbench out-of-core makes its data on a GPU: no NVIDIA GPU visible."


def test_a_run_with_the_gpu_stood_in_judges_each_share_and_writes_its_table(tmp_path, monkeypatch):
    """The command's wiring on the CPU: the GPU's memory, its check and its blob generator stood
    in, the numpy row measured on each share's data and judged."""
    import numpy as np

    from kmbench.data import results

    monkeypatch.setattr(out_of_core, "cuda_status", lambda: (True, ""))
    monkeypatch.setattr(out_of_core, "gpu_memory_bytes", lambda: 4_000 * 8 * 4)  # 4,000 points of d = 8

    def blobs(n, d, centers, seed, out, **parameters):
        out[:] = np.random.default_rng(seed).standard_normal((n, d)) + 10 * (np.arange(n) % centers)[:, None]
        return f"stand-in-n{n}", {"generator": "stand-in", "checksum": None, "parameters": {"n": n, **parameters}}

    monkeypatch.setattr(out_of_core, "gpu_blobs", blobs)
    store, out = tmp_path / "r.jsonl", tmp_path / "table.md"
    ran = out_of_core_cli("--share", "0.5,0.25", "--d", 8, "--k", 4, "--impl", "numpy", "--repeats", 1,
                          "--store", store, "--out", out)
    assert ran.exit_code == 0, ran.output
    stored = results.load(store)
    assert [(r["dataset"]["n"], r["gpu_memory_share"], r["status"]) for r in stored] == [(2000, 0.5, "ok"),
                                                                                        (1000, 0.25, "ok")]
    assert ran.output.endswith(out.read_text()) and "| numpy | 2,000 | 8 | 4 |" in out.read_text()

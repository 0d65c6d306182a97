"""The hand-written slips of `make mutate-judge` (tools/mutate_judge.py) each name a line that is in
its file exactly once: when code moves (scan.py's split moved two of them to error_bounds.py), a
slip whose line is gone would plant nothing and prove nothing."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mutants():
    spec = importlib.util.spec_from_file_location("mutate_judge", ROOT / "tools" / "mutate_judge.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MUTANTS


def test_every_hand_written_slip_names_a_line_found_once_in_its_file():
    missing = [(path, line) for path, line, *_ in _mutants() if (ROOT / path).read_text().count(line) != 1]
    assert not missing, missing

"""Two stores of records, cell by cell (kmbench/data/cells.py): B's time per iteration over A's,
with a confidence interval from the counted repeats, and a label a CI can act on.

Each Lloyd record keeps the seconds of every counted repeat (`times.iterate_values`); over the
iterations the repeat ran, they are seconds per iteration. The ratio is B's mean over A's (the
mean is the report's statistic), and its interval a percentile bootstrap: each side's repeats
resampled with replacement, independently, RESAMPLES times, from a fixed seed so that the same
two stores always print the same table. With 3 to 5 repeats a side the bootstrap sees only the
spread those repeats show; it is a guard against reading noise as a change, not a proof.

A label says where the whole interval lies against a band of `noise` around 1 (the report's
tie threshold): above it `slower`, below it `faster`, inside it `same`, across an edge of it
`unclear`. A side with fewer than two repeats has no spread to resample: `unclear`.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kmbench.data import cells, results
from kmbench.errors import UsageError
from kmbench.report.report import NOISE_FRACTION

CONFIDENCE = 0.95
RESAMPLES = 10_000
SEED = 0
FASTER, SLOWER, SAME, UNCLEAR = "faster", "slower", "same", "unclear"


@dataclass
class CellComparison:
    cell: cells.Cell
    a_status: str
    b_status: str
    a_per_iter_s: float | None = None  # mean of the repeats, seconds per iteration
    b_per_iter_s: float | None = None
    ratio: float | None = None  # B over A: above 1, B is slower
    low: float | None = None  # the interval of the ratio, where both sides have repeats to resample
    high: float | None = None
    label: str = UNCLEAR

    @property
    def lost_its_verdict(self) -> bool:
        """A was certified and B is not: a change that made the row wrong (or stopped it running)."""
        return self.a_status == "ok" and self.b_status != "ok"

    def regresses(self, fail_above: float) -> bool:
        """B is slower than A by more than `fail_above` with the interval's confidence (the
        ratio itself where there is no interval), or B lost A's `ok` verdict."""
        worst_case_fast = self.low if self.low is not None else self.ratio
        return self.lost_its_verdict or (worst_case_fast is not None and worst_case_fast > fail_above)


@dataclass
class StoreComparison:
    cells: list[CellComparison]
    only_a: list[cells.Cell]
    only_b: list[cells.Cell]
    skipped: list[dict] = field(default_factory=list)  # cells no side measured: their records (B's where both)

    def regressions(self, fail_above: float) -> list[CellComparison]:
        return [one for one in self.cells if one.regresses(fail_above)]

    def counts(self) -> dict[str, int]:
        return {label: sum(one.label == label for one in self.cells) for label in (FASTER, SLOWER, SAME, UNCLEAR)}


def repeat_times(record: dict) -> np.ndarray | None:
    """Seconds per iteration of each counted repeat, or None where the record kept none."""
    values = (record.get("times") or {}).get("iterate_values")
    iterations = record.get("iterations_executed")
    if not values or not iterations:
        return None
    return np.asarray(values, dtype=float) / iterations


def ratio_interval(a: np.ndarray, b: np.ndarray, rng: np.random.Generator,
                   confidence: float = CONFIDENCE, resamples: int = RESAMPLES):
    """mean(b) / mean(a) and its percentile-bootstrap interval (None, None with fewer than
    two repeats on a side)."""
    ratio = float(b.mean() / a.mean())
    if len(a) < 2 or len(b) < 2:
        return ratio, None, None
    a_means = a[rng.integers(0, len(a), (resamples, len(a)))].mean(axis=1)
    b_means = b[rng.integers(0, len(b), (resamples, len(b)))].mean(axis=1)
    tail = 50 * (1 - confidence)
    low, high = np.percentile(b_means / a_means, [tail, 100 - tail])
    return ratio, float(low), float(high)


def label_of(low: float | None, high: float | None, noise: float = NOISE_FRACTION) -> str:
    if low is None or high is None:
        return UNCLEAR
    band_low, band_high = 1 / (1 + noise), 1 + noise
    if low > band_high:
        return SLOWER
    if high < band_low:
        return FASTER
    if low >= band_low and high <= band_high:
        return SAME
    return UNCLEAR


def compare(a_records: list[dict], b_records: list[dict], noise: float = NOISE_FRACTION) -> StoreComparison:
    """Every cell of A and B, the newest record of each on each side; cells on one side only
    are listed apart, and so are the cells that no side measured (skipped where they are: a
    store of a machine without a GPU holds twenty), to be summed by reason, not compared."""
    a_cells = {cells.cell_of(record): record for record in cells.newest(a_records)}
    b_cells = {cells.cell_of(record): record for record in cells.newest(b_records)}
    unmeasured = {cell for cell in a_cells | b_cells
                  if all(side[cell]["status"] == "skipped" for side in (a_cells, b_cells) if cell in side)}
    skipped = [b_cells.get(cell) or a_cells[cell] for cell in unmeasured]
    a_cells = {cell: record for cell, record in a_cells.items() if cell not in unmeasured}
    b_cells = {cell: record for cell, record in b_cells.items() if cell not in unmeasured}
    rng = np.random.default_rng(SEED)
    compared = []
    for cell, a in a_cells.items():
        if cell not in b_cells:
            continue
        b = b_cells[cell]
        one = CellComparison(cell, a["status"], b["status"])
        a_times, b_times = repeat_times(a), repeat_times(b)
        if a_times is not None and b_times is not None:
            one.a_per_iter_s, one.b_per_iter_s = float(a_times.mean()), float(b_times.mean())
            one.ratio, one.low, one.high = ratio_interval(a_times, b_times, rng)
            one.label = label_of(one.low, one.high, noise)
        compared.append(one)
    return StoreComparison(compared, [cell for cell in a_cells if cell not in b_cells],
                           [cell for cell in b_cells if cell not in a_cells], skipped)


def load_side(spec: str, option: str) -> list[dict]:
    """The Lloyd records of a store file, or of `REV:path` as git shows it (the store of a
    commit, e.g. HEAD~1:results/records.jsonl). One sentence and a UsageError otherwise."""
    path = Path(spec)
    if path.is_file():
        records = results.load(path)
    elif ":" in spec:
        try:
            shown = subprocess.run(["git", "show", spec], capture_output=True)
            reason = shown.stderr.decode(errors="replace").strip().splitlines()
        except OSError:  # no git on this machine
            shown, reason = None, ["git is not installed"]
        if shown is None or shown.returncode != 0:
            raise UsageError(f"{option} {spec!r} is no file, and git cannot show it as REV:path "
                             f"({reason[0] if reason else 'git failed'}).")
        with tempfile.TemporaryDirectory() as folder:
            copy = Path(folder) / "records.jsonl"
            copy.write_bytes(shown.stdout)
            records = results.load(copy)
    else:
        raise UsageError(f"{option} {spec!r} is neither a record store file nor a REV:path of git.")
    if not records:
        raise UsageError(f"{option} {spec!r} holds no Lloyd record to compare.")
    return records

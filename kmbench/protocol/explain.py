"""Why a cell is `mismatch`: each record's detail ends with the causes the oracle and the row
can name, so no mismatch is left unexplained. A cause is named only when the problem shows it
(the oracle measured it) or the row declares it; the last resort says that none is known,
which on a row of ours means a bug to find."""

from __future__ import annotations

from kmbench.protocol.validate import SENSITIVITY_FACTOR, TOLERANCES, Oracle

FAR_FROM_ORIGIN = 100.0  # spreads: beyond, float32 programs that do not centre lose digits


def causes(oracle: Oracle, dtype: str, notes: list[str], relocates_empty: bool,
           iterations: int | None) -> list[str]:
    """The known causes of a mismatch of one row on one problem, most specific first."""
    found = []
    if oracle.emptied and relocates_empty:
        found.append(f"the reference left {oracle.emptied} cluster(s) empty during the run and kept their "
                     "centroids; this row moves an empty cluster's centroid instead")
    elif any("empty" in note for note in notes):
        found.append("the row refilled an empty cluster (its notes), where the reference keeps its centroid")
    if iterations is not None and iterations != oracle.iterations:
        found.append(f"it ran {iterations} iterations, the reference {oracle.iterations}")
    if dtype == "float32" and oracle.offset > FAR_FROM_ORIGIN:
        found.append(f"the data's mean lies {oracle.offset:.3g} spreads from the origin, where float32 "
                     "keeps about 7 digits of |x|: a float32 program that neither centres the data nor "
                     "computes |x - c| directly (|x|^2 - 2 x.c + |c|^2, raw coordinate sums) loses the "
                     "difference")
    widened = oracle.tolerances("float32") != TOLERANCES["float32"]
    if dtype == "float32" and (oracle.near_ties or widened):
        found.append(f"float32 near-ties ({oracle.near_ties} in the last assignment) flip and carry over; the "
                     f"allowance is {SENSITIVITY_FACTOR:g}x what a careful float32 run of the reference "
                     "diverges, and this row diverges more")
    return found or ["no known cause: the difference is beyond what float32 rounding explains on this problem"]


def detail(verdict_detail: str, reasons: list[str]) -> str:
    """The verdict's measures, then why."""
    return f"{verdict_detail}. Likely cause: {'; '.join(reasons)}"


def empty_cluster_note(oracle: Oracle, relocates_empty: bool) -> list[str]:
    """A note for the record of a row that moves empty clusters, where the problem has them:
    its result may then differ from the reference's however correct its arithmetic."""
    if not (oracle.emptied and relocates_empty):
        return []
    return [f"the reference left {oracle.emptied} cluster(s) empty during the run and kept their centroids; "
            "this row moves an empty cluster's centroid instead"]

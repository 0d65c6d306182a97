"""Why a cell is `mismatch`: the certificate names the first step that fails (iteration,
check, worst point or centroid, by how much); the detail then adds the causes the oracle and
the row can name, where the problem shows them (the oracle measured it) or the row declares it."""

from __future__ import annotations

from kmbench.protocol.validate import Oracle


def causes(oracle: Oracle, dtype: str, notes: list[str], relocates_empty: bool,
           iterations: int | None, known=()) -> list[str]:
    """The known causes of a mismatch of one row on one problem, most specific first; `known`:
    causes found of the problem beforehand (values its precision cannot hold), None where none."""
    found = [cause for cause in known if cause]
    if oracle.emptied and relocates_empty:
        found.append(f"the reference left {oracle.emptied} cluster(s) empty during the run and kept their "
                     "centroids; this row moves an empty cluster's centroid instead")
    elif any("empty" in note for note in notes):
        found.append("the row refilled an empty cluster (its notes), where the reference keeps its centroid")
    if iterations is not None and iterations != oracle.iterations:
        found.append(f"it ran {iterations} iterations, the reference {oracle.iterations}")
    return found or ["no known cause: the step is beyond what rounding in the declared precision explains"]


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

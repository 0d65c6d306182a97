"""Lloyd's algorithm as a task: a workload is a dataset, the settings (k, iterations, stop rule,
start) are the same for every row. The measuring and judging are the protocol's runner
(run_cell, judgement); this is the task that puts them to work through the one runner,
run_cells, and draws its tables with report's pieces, which is why it sits here, above report,
and not in the protocol (tests/test_import_graph.py holds the layering)."""

from __future__ import annotations

from dataclasses import asdict

from kmbench.data.datasets import Dataset, verified
from kmbench.protocol import Implementation, Problem, Result, oracles, validate
from kmbench.protocol.runner import (Settings, check_settings, describe_dataset, gemm_floor, judgement, make_problem,
                                     run_cell)
from kmbench.protocol.task import Task, run_cells


def run(impls: list[Implementation], datasets: list[Dataset], settings: Settings,
        store=None, reporter=None, data_dir=None) -> list[dict]:
    """Every implementation on every dataset; each record is stored as soon as it exists.
    The oracle comes from the cache under `data_dir` where an earlier run left it."""
    check_settings(settings)
    datasets = [verified(dataset) for dataset in datasets]  # before any cell: a stale cache is refused
    return run_cells(LloydTask(settings, data_dir), datasets, impls, store, reporter=reporter)


class LloydTask(Task):
    """Lloyd's algorithm under the fair protocol: a workload is a dataset; the settings (k,
    iterations, stop rule, start) are the same for every row."""

    name = "lloyd"

    def __init__(self, settings: Settings | None = None, data_dir=None, comparisons=("seconds",),
                 title="kmbench report"):
        """settings: what every cell runs (not needed to render records)."""
        self.settings, self.data_dir = settings, data_dir
        self.comparisons, self.title = comparisons, title

    def describe(self, dataset: Dataset) -> dict:
        return {"dataset": describe_dataset(dataset), "params": asdict(self.settings)}

    def problem(self, dataset: Dataset) -> Problem:
        return make_problem(dataset, self.settings)

    def oracle(self, dataset: Dataset, problem: Problem, progress=None) -> validate.Oracle:
        if progress:
            progress("float64 reference")
        oracle = oracles.get(dataset, problem, self.data_dir, progress=progress)[0]
        if progress:  # the stage it is in now, not the reference's last iteration (issue 34)
            progress("timed runs")
        return oracle

    def judge(self, result: Result, oracle: validate.Oracle, problem: Problem, impl: Implementation):
        verdict = judgement([result], oracle, problem, impl)
        return verdict.status, verdict.detail

    def measure(self, impl, problem, oracle, dataset, run_id: str) -> dict:
        return run_cell(impl, problem, oracle, dataset, self.settings, run_id, self.progress)

    def floor(self, impls, problem: Problem, env: dict) -> dict:
        floor = gemm_floor(problem, env)
        return {"gemm_floor_s": floor} if floor else {}

    def render(self, records: list[dict], suite=None, source: str = "") -> str:
        # Imported here as before: running cells never loads pandas, only drawing the tables does.
        from kmbench.report import export, report

        return export.markdown(report.cells_frame(records), source, self.comparisons, title=self.title)

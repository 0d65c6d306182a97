"""Lloyd's algorithm as a task: a workload is a dataset, the settings (k, iterations, stop rule,
start) are the same for every row. Its measuring and judging are the protocol's LloydProtocol,
measured by the one loop through the one runner, run_cells; this adds the tables, drawn with
report's pieces, which is why it sits here, above report, and not in the protocol
(tests/test_import_graph.py holds the layering)."""

from __future__ import annotations

from kmbench.data.datasets import Dataset, verified
from kmbench.protocol import Implementation, Options
from kmbench.protocol.runner import LloydProtocol, Settings, check_settings
from kmbench.protocol.task import run_cells


def run(impls: list[Implementation], datasets: list[Dataset], settings: Settings,
        store=None, reporter=None, data_dir=None, options: Options = Options(), cluster=None) -> list[dict]:
    """Every implementation on every dataset; each record is stored as soon as it exists.
    The oracle comes from the cache under `data_dir` where an earlier run left it; the cells are
    measured here, or by the workers of `cluster` (kmbench.protocol.placement)."""
    check_settings(settings)
    datasets = [verified(dataset) for dataset in datasets]  # before any cell: a stale cache is refused
    return run_cells(LloydTask(settings, data_dir, options), datasets, impls, store, reporter=reporter,
                     cluster=cluster)


class LloydTask(LloydProtocol):
    """Lloyd's algorithm under the fair protocol, with its tables."""

    def __init__(self, settings: Settings | None = None, data_dir=None, options: Options = Options(),
                 comparisons=("seconds",), title="kmbench report"):
        """settings: what every cell runs (not needed to render records)."""
        super().__init__(settings, data_dir, options)
        self.comparisons, self.title = comparisons, title

    def render(self, records: list[dict], suite=None, source: str = "") -> str:
        # Imported here as before: running cells never loads pandas, only drawing the tables does.
        from kmbench.report import markdown
        from kmbench.report.contents import Contents

        return markdown.render(Contents(records, source, self.title, self.comparisons))

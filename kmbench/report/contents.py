"""What every exporter renders (kmbench.report.exporters): the typed records of every task, where
they came from, and how the markdown page is headed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from kmbench.data.records import Record, typed

VIEWS = ("cells", "scaling", "out-of-core")


@dataclass
class Contents:
    """The records an exporter renders, typed (objects a run just built are typed on the way in),
    where they came from, and how the markdown page is headed: its title, the published
    comparisons under the Lloyd tables, the view of the Lloyd records (VIEWS), and the task
    suites by name, whose titles and published keys head the assign and batched tables."""

    records: list[Record]
    source: str = ""
    title: str = "kmbench report"
    comparisons: tuple = ("seconds",)
    view: str = "cells"
    suites: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self):
        if self.view not in VIEWS:
            raise ValueError(f"no view {self.view!r}; the views are {', '.join(VIEWS)}")
        self.records = [typed(record) for record in self.records]

    def of(self, task: str) -> list[Record]:
        """The records of one task, in store order."""
        return [record for record in self.records if record.task == task]

    def by_suite(self) -> dict[str, list[Record]]:
        """The task suites' records (assign, batched), by suite, in the order first stored."""
        grouped: dict[str, list[Record]] = {}
        for record in self.records:
            if record.task != "lloyd":
                grouped.setdefault(record.suite, []).append(record)
        return grouped

"""The markdown exporter: every task's tables. Lloyd's records as the view asks (the cells
tables with their published comparisons, or the scaling or out-of-core plan's table), then
each task suite's page (assign, batched). A store with no record at all says so."""

from __future__ import annotations

from types import SimpleNamespace

from kmbench.report import lloyd_markdown, out_of_core, report, scaling, task_markdown
from kmbench.report.contents import Contents


def _suite(contents: Contents, name: str, task: str):
    """The suite a task's records are of; a suite the caller did not name (no longer shipped,
    or read from a bare store) is headed by its name, with no published figures."""
    return contents.suites.get(name) or SimpleNamespace(name=name, title=name, task=task, published=None)


def _lloyd(contents: Contents) -> str:
    lloyd = contents.of("lloyd")
    if contents.view == "scaling":
        return scaling.markdown(lloyd)
    if contents.view == "out-of-core":
        return out_of_core.markdown(lloyd)
    return lloyd_markdown.page(report.cells_frame(lloyd), contents.source, contents.comparisons, contents.title)


def render(contents: Contents) -> str:
    suites = contents.by_suite()
    pages = [_lloyd(contents)] if contents.of("lloyd") or not suites else []
    pages += [task_markdown.page(_suite(contents, name, records[0].task), records)
              for name, records in suites.items()]
    return "\n".join(pages)

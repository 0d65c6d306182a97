"""What a run shows while it works. On a terminal: one bar over the cells, the cell in progress
named beside it with the stage it is in. Off one (a log file, CI): a line when a cell starts and
ends, and one at least every HEARTBEAT_S seconds while a cell runs, so a nine-minute cell is
never silent; a row that cannot run here makes no line (the summary below the table counts
them). Both take the same calls from the one runner (kmbench.protocol.task.run_cells), whatever
the task: start (a row and the workload's name), note, done, skip; and `say`, a line of its own
for what a plan does between cells (making a dataset, a new GPU set)."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from kmbench.protocol.task import usable
from kmbench.report.formatting import seconds_text

HEARTBEAT_S = 30.0


class BarReporter:
    """A rich progress bar (transient: the summary table replaces it)."""

    def __init__(self, progress: Progress, total: int):
        self.progress = progress
        self.task = progress.add_task("starting", total=total)
        self.cell = ""

    def start(self, impl, where: str):
        self.cell = f"{impl.name} on {where}"
        self.progress.update(self.task, description=self.cell)

    def note(self, text):
        self.progress.update(self.task, description=f"{self.cell}: {text}")

    def done(self, record):
        self.progress.advance(self.task)

    def skip(self, count):
        self.progress.advance(self.task, count)

    def say(self, text: str):
        self.progress.console.print(escape(text), highlight=False)


LONG_CELL_S = 10.0  # a cell whose runs and judgement took this long says what each cost


def judge_text(record: dict) -> str:
    """", judged in 3.1 s beside 1.2 s of its runs" for a long cell; "" for a short one."""
    times = record.get("times") or {}
    judge, runs = times.get("judge"), times.get("row_calls")
    if judge is None or runs is None or judge + runs < LONG_CELL_S:
        return ""
    return f", judged in {judge:.1f} s beside {runs:.1f} s of its runs"


def cell_of(record: dict) -> tuple[str, str]:
    """(row, workload name) of a record, as the runner named its cell when it started it."""
    where = record.get("workload") or (record.get("dataset") or {}).get("name", "")
    return record.get("impl", ""), where


class LineReporter:
    """Plain lines for logs: start and end of each cell, and a heartbeat while cells run (on a
    cluster several run at once, each line names its own cell and, there, its host)."""

    def __init__(self, console: Console, total: int, heartbeat_s: float = HEARTBEAT_S):
        self.console, self.total, self.heartbeat_s = console, total, heartbeat_s
        self.finished = 0
        self.running: dict[tuple[str, str], tuple[float, bool]] = {}  # cell -> (started, quiet)
        self.latest_note = ""
        self.last_line = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kmbench-heartbeat", daemon=True)
        self._thread.start()

    def _say(self, text: str) -> None:
        with self._lock:
            self.last_line = time.monotonic()
            self.console.print(f"{time.strftime('%H:%M:%S')} {escape(text)}", highlight=False, soft_wrap=True)

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.heartbeat_s)):
            running = dict(self.running)
            if running and time.monotonic() - self.last_line >= self.heartbeat_s:
                (impl, where), (started, _) = min(running.items(), key=lambda item: item[1][0])
                names = f"{impl} on {where}" + (f" and {len(running) - 1} more" if len(running) > 1 else "")
                note = f"; {self.latest_note}" if self.latest_note else ""
                self._say(f"[{self.finished}/{self.total}] still running {names} "
                          f"({time.monotonic() - started:.0f} s){note}")

    def start(self, impl, where: str):
        quiet = not usable(impl)[0]  # skipped at once: counted, not said
        self.running[(impl.name, where)] = (time.monotonic(), quiet)
        self.latest_note = ""
        if not quiet:
            self._say(f"[{self.finished}/{self.total}] {impl.name} on {where}: started")

    def note(self, text):
        self.latest_note = text  # oracle progress comes per iteration: the heartbeat shows the latest

    def done(self, record):
        self.finished += 1
        cell = cell_of(record)
        if cell not in self.running and len(self.running) == 1:
            cell = next(iter(self.running))  # a record that names no cell is the one running
        impl, where = cell
        _, quiet = self.running.pop(cell, (0.0, False))
        if quiet and record.get("status") == "skipped":
            return
        per_iteration = record.get("per_iteration_s")
        timing = f", {seconds_text(per_iteration)} per iteration" if per_iteration else ""
        host = f" ({(record.get('env') or {}).get('hostname')})" if record.get("worker") else ""
        self._say(f"[{self.finished}/{self.total}] {impl} on {where}{host}: {record.get('status')}{timing}"
                  f"{judge_text(record)}")

    def skip(self, count):
        self.finished += count
        self._say(f"[{self.finished}/{self.total}] {count} cells measured before, not run again")

    def say(self, text: str):
        self._say(f"[{self.finished}/{self.total}] {text}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def reporting(console: Console, total: int):
    """The reporter that suits where the output goes."""
    if console.is_terminal:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                      TextColumn("{task.completed}/{task.total} cells"), TimeElapsedColumn(),
                      console=console, transient=True) as progress:
            yield BarReporter(progress, total)
        return
    reporter = LineReporter(console, total)
    try:
        yield reporter
    finally:
        reporter.close()

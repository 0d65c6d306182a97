"""What a run shows while it works. On a terminal: one bar over the cells, the cell in progress
named beside it with the stage it is in. Off one (a log file, CI): a line when a cell ends, and a
heartbeat while it runs, HEARTBEAT_S seconds after the last line and then at twice the gap each
time (30 s, 60, 120... at most HEARTBEAT_MAX_S), the first naming the cell in full; so a
nine-minute cell is never silent, yet a slow machine's `make run` stays a screen long (a line
at each start, and one every 30 s, made it 60 lines). A row that cannot run here makes no line
and is not counted (the summary below the table counts them), so the counter climbs one cell at
a time. Both take the same calls from
the one runner (kmbench.protocol.task.run_cells), whatever the task: start (a row and the
workload's name), note, expect (how long the cell's timed runs will take, once its warm-up has
shown), done, skip; and `say`, a line of its own for what a plan does between cells (making a
dataset, a new GPU set). Each reporter keeps the records it was given, so an interrupted run can
show the cells that finished."""

from __future__ import annotations

import textwrap
import threading
import time
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from kmbench.protocol.task import usable
from kmbench.report.formatting import rough_duration, seconds_text

HEARTBEAT_S = 30.0
HEARTBEAT_MAX_S = 480.0
LONG_S = 60.0  # a step, or a cell's timed runs, expected to take longer is announced with its estimate
TEXT_WIDTH = 100  # lines of prose wrap here, or at the terminal's width where it is narrower


def wrapped(line: str, width: int = TEXT_WIDTH) -> str:
    """A line wrapped at `width` columns, its rest indented: a log's lines are otherwise as long
    as their sentences (a dataset's name, a row's reason)."""
    return textwrap.fill(line, max(40, width), subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


def runnable(impls) -> int:
    """The rows that can run here: the cells a reporter counts (the others are summed below the table)."""
    return sum(usable(impl)[0] for impl in impls)


class Reporter:
    """What both reporters share: the cells in progress (on a cluster several run at once), whether
    each can run here at all (`quiet`: skipped at once, neither said nor counted), and the records
    they were given."""

    def __init__(self, total: int):
        self.total, self.finished = total, 0
        self.cell, self.name = "", ""  # the cell started last: what the bar and `expect` speak of
        self.running: dict[tuple[str, str], tuple[float, bool]] = {}  # (row, workload) -> (started, quiet)
        self.ended: tuple[str, str] = ("", "")  # the cell `done` heard of last
        self.records: list[dict] = []

    def start(self, impl, where: str):
        self.cell, self.name = f"{impl.name} on {where}", impl.name
        self.running[(impl.name, where)] = (time.monotonic(), not usable(impl)[0])

    @property
    def quiet(self) -> bool:
        """Whether the cell started last cannot run here."""
        return any(quiet for (name, _), (_, quiet) in self.running.items() if name == self.name)

    def done(self, record) -> bool:
        """Keeps the record; whether the cell counts (it could run here)."""
        self.records.append(record)
        cell = cell_of(record)
        if cell not in self.running and len(self.running) == 1:
            cell = next(iter(self.running))  # a record that names no cell is the one running
        _, quiet = self.running.pop(cell, (0.0, False))
        self.ended = cell
        counts = not (quiet and record.get("status") == "skipped")
        self.finished += counts
        return counts

    def expect(self, seconds: float, warmup: float):
        """The cell's timed runs should take `seconds` more, its warm-up having taken `warmup`:
        a line where that is long (the float64 yardstick of kmbench.plans.estimate cannot know
        a row ten times slower than it)."""
        if seconds >= LONG_S:
            self.say(f"{self.name}: timed runs about {rough_duration(seconds)} more "
                     f"(warm-up {rough_duration(warmup)}), then validation")


def cell_of(record: dict) -> tuple[str, str]:
    """(row, workload name) of a record, as the runner named its cell when it started it."""
    where = record.get("workload") or (record.get("dataset") or {}).get("name", "")
    return record.get("impl", ""), where


LONG_CELL_S = 10.0  # a cell whose runs and judgement took this long says what each cost


def judge_text(record: dict) -> str:
    """", judged in 3.1 s beside 1.2 s of its runs" for a long cell; "" for a short one."""
    times = record.get("times") or {}
    judge, runs = times.get("judge"), times.get("row_calls")
    if judge is None or runs is None or judge + runs < LONG_CELL_S:
        return ""
    return f", judged in {judge:.1f} s beside {runs:.1f} s of its runs"


class BarReporter(Reporter):
    """A rich progress bar (transient: the summary table replaces it)."""

    def __init__(self, progress: Progress, total: int):
        super().__init__(total)
        self.progress = progress
        self.task = progress.add_task("starting", total=total)

    def start(self, impl, where: str):
        super().start(impl, where)
        if not self.quiet:
            self.progress.update(self.task, description=self.cell)

    def note(self, text):
        self.progress.update(self.task, description=f"{self.cell}: {text}")

    def done(self, record):
        if super().done(record):
            self.progress.advance(self.task)

    def skip(self, count):
        self.finished += count
        self.progress.advance(self.task, count)

    def say(self, text: str):
        self.progress.console.print(escape(text), highlight=False)


class LineReporter(Reporter):
    """Plain lines for logs: the end of each cell (with its host, on a cluster), and a heartbeat
    while cells run."""

    def __init__(self, console: Console, total: int, heartbeat_s: float = HEARTBEAT_S):
        super().__init__(total)
        self.console, self.heartbeat_s = console, heartbeat_s
        self.gap = heartbeat_s  # before the next heartbeat: doubles after each, until a cell starts or ends
        self.named: set = set()  # the cells a heartbeat has named in full
        self.latest_note = ""
        self.last_line = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kmbench-heartbeat", daemon=True)
        self._thread.start()

    def _say(self, text: str) -> None:
        with self._lock:
            self.last_line = time.monotonic()
            line = wrapped(f"{time.strftime('%H:%M:%S')} {text}", min(self.console.width, TEXT_WIDTH))
            self.console.print(escape(line), highlight=False, soft_wrap=True)

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.heartbeat_s)):
            running = {cell: started for cell, (started, quiet) in dict(self.running).items() if not quiet}
            if running and time.monotonic() - self.last_line >= self.gap:
                self.gap = min(2 * self.gap, max(HEARTBEAT_MAX_S, self.heartbeat_s))
                (name, where), started = min(running.items(), key=lambda item: item[1])
                # The cell in full the first time; then the row alone, so a log's lines stay short.
                who = name if (name, where) in self.named else f"{name} on {where}"
                self.named.add((name, where))
                more = f" and {len(running) - 1} more" if len(running) > 1 else ""
                note = f"; {self.latest_note}" if self.latest_note else ""
                self._say(f"[{self.finished}/{self.total}] {who}{more}: still running "
                          f"({time.monotonic() - started:.0f} s){note}")

    def start(self, impl, where: str):
        super().start(impl, where)
        self.latest_note, self.gap = "", self.heartbeat_s
        self.last_line = time.monotonic()

    def note(self, text):
        self.latest_note = text  # oracle progress comes per iteration: the heartbeat shows the latest

    def done(self, record):
        self.gap = self.heartbeat_s
        if not super().done(record):
            return
        name, where = self.ended
        per_iteration = record.get("per_iteration_s")
        timing = f", {seconds_text(per_iteration)} per iteration" if per_iteration else ""
        host = f" ({(record.get('env') or {}).get('hostname')})" if record.get("worker") else ""
        self._say(f"[{self.finished}/{self.total}] {name} on {where}{host}: {record.get('status')}{timing}"
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

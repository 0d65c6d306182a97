"""Suites: one declarative TOML file per reproduction under kmbench/plans/suites/, naming its
datasets, parameters, implementations, the published figures it compares against and the
plots it draws. Adding a reproduction is adding one file. (Suites of the other tasks, with
`task = "assign"` or `"batched"`, are described in kmbench.tasks.tasks; `parse` below checks
both kinds.)

    title, source, published (key in published.json),
    comparison ("seconds" | "peak-rates" | "best-peer" | "whole-run"),
    plots (["per-iteration"] and/or ["sweep"]), impls (optional list)
    [protocol]   k (list), stop, tol, iterations, repeats, warmup, max_time
    [[datasets]] generator and its parameters; a list expands; optional impls, k, iterations,
                 stop, tol, repeats, warmup and max_time of its own
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib.resources import files

from kmbench.plans import plan
from kmbench.protocol import runner
from kmbench.tasks import tasks
from kmbench.errors import UsageError

COMPARISONS = ("seconds", "peak-rates", "best-peer", "whole-run", "none")
PLOTS = ("per-iteration", "sweep")
PROTOCOL_KEYS = {"k", "stop", "tol", "iterations", "repeats", "warmup", "max_time", "init", "seed"}


@dataclass
class Suite:
    name: str
    title: str
    source: str
    protocol: dict
    datasets: list
    published: str | None = None
    comparison: str = "none"
    plots: list = field(default_factory=list)
    impls: list | None = None

    def settings(self) -> runner.Settings:
        p = self.protocol
        return runner.Settings(k=int(p["k"][0]), iterations=int(p.get("iterations", 300)),
                               stop=p.get("stop", "iterations"), tol=float(p.get("tol", 0.0)),
                               init=p.get("init", "random"), seed=int(p.get("seed", 0)),
                               warmup=int(p.get("warmup", 1)), repeats=int(p.get("repeats", 5)),
                               max_time=p.get("max_time"))

    def cell_count(self) -> int:
        return sum(len(step.impls) for step in self.steps())

    def steps(self, impl_names: str | None = None) -> list[plan.Step]:
        specs = [spec if impl_names or self.impls is None or "impls" in spec
                 else {**spec, "impls": self.impls} for spec in self.datasets]
        return plan.expand(specs, self.settings(), [int(k) for k in self.protocol["k"]],
                           impl_names=impl_names)


def _folder():
    return files("kmbench.plans").joinpath("suites")


def names() -> list[str]:
    return sorted(entry.name[:-5] for entry in _folder().iterdir() if entry.name.endswith(".toml"))


def load(name: str) -> Suite:
    if name not in names():
        raise UsageError(f"Unknown suite {name!r}; known: {', '.join(names())} (kmbench reproduce --list).")
    try:
        raw = tomllib.loads(_folder().joinpath(f"{name}.toml").read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"Suite file {name}.toml is not valid TOML: {exc}.") from None
    except OSError as exc:
        raise UsageError(f"Suite file {name}.toml cannot be read: {exc.strerror or exc}.") from None
    return parse(name, raw)


def parse(name: str, raw: dict):
    """Check a suite's fields, so a broken file is one sentence, not a traceback mid-run: a
    Lloyd suite (Suite), or with a `task` other than lloyd, a task suite (tasks.TaskSuite)."""
    task = raw.get("task", "lloyd")
    if task != "lloyd" and task not in tasks.TASKS:
        raise UsageError(f"Suite {name}: task must be lloyd or one of {', '.join(tasks.TASKS)}; got {task!r}.")
    lloyd = task == "lloyd"
    required = ("title", "source", "protocol", "datasets") if lloyd else ("title", "source", "workloads", "impls")
    # A Lloyd suite's keys must be there; a task suite's must also not be empty.
    missing = [key for key in required if (key not in raw if lloyd else not raw.get(key))]
    if missing:
        raise UsageError(f"Suite {name} lacks {', '.join(missing)}.")
    protocol = raw.get("protocol", {})
    unknown = set(protocol) - set(PROTOCOL_KEYS if lloyd else tasks.PROTOCOL_KEYS)
    if unknown:
        raise UsageError(f"Suite {name}: unknown protocol keys {', '.join(sorted(unknown))}.")
    return _lloyd_suite(name, raw) if lloyd else _task_suite(name, raw, task)


def _lloyd_suite(name: str, raw: dict) -> Suite:
    protocol = raw["protocol"]
    if not isinstance(protocol.get("k"), list) or not protocol["k"]:
        raise UsageError(f"Suite {name}: protocol.k must be a non-empty list.")
    comparison = raw.get("comparison", "none")
    if comparison not in COMPARISONS:
        raise UsageError(f"Suite {name}: comparison must be one of {', '.join(COMPARISONS)}.")
    plots = raw.get("plots", [])
    if set(plots) - set(PLOTS):
        raise UsageError(f"Suite {name}: plots must be among {', '.join(PLOTS)}.")
    if not raw["datasets"]:
        raise UsageError(f"Suite {name} names no dataset.")
    return Suite(name, raw["title"], raw["source"], protocol, raw["datasets"], raw.get("published"),
                 comparison, plots, raw.get("impls"))


def _task_suite(name: str, raw: dict, task: str) -> tasks.TaskSuite:
    for spec in raw["workloads"]:
        extra = set(spec) - tasks.WORKLOAD_KEYS[task]
        if extra:
            raise UsageError(f"Suite {name}: unknown workload keys {', '.join(sorted(extra))} for the {task} task.")
    own = {key: tasks.PROTOCOL_KEYS[key](value) for key, value in raw.get("protocol", {}).items()}
    return tasks.TaskSuite(name, raw["title"], raw["source"], task, raw["workloads"], raw["impls"],
                           raw.get("published"), **own)

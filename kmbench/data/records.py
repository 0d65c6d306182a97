"""The typed records of the store: one dataclass per task's record schema (version 1), the
one definition of what a line holds, read by every exporter.

    LloydRecord    a Lloyd cell: a row on a dataset with k, a stop rule and a start; the
                   scaling and out-of-core plans' records are Lloyd records with a few fields
                   more (GPUs in the build, the copy floor, the share of GPU memory)
    AssignRecord   document 001's task: one assignment pass, a rung of the kernel ladder
    BatchedRecord  document 003's task: many small problems in one batch

The store stays JSON lines (kmbench.data.results): `parse` turns one line's object into its
record, `Record.to_dict` gives the object back. The fields some reader uses are typed; what
only a person reads (a row's build details, the environment, the judge's detail) is kept as
the free-form dicts the rows write, and any key not named here rides along in `extra`, so a
record written back loses nothing. A field without a default is one every reader needs: a
line lacking it, or holding it in another type, is no whole record (RecordError).

Older lines are migrated on read: a Lloyd line without a label is labelled with its row's
name, without a stop rule it ran its iterations (the only rule there was), and without the
`stop` block its row followed its own rule.
"""

from __future__ import annotations

import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass

SCHEMA_VERSION = 1
GPU_FLAGS = ("throttled", "shared")  # kmbench.protocol.gpu_state's keys of a flagged cell
# How a row that takes a thread count came to its count (a Lloyd record's `thread_choice.how`):
# forced by the user (`run --threads`), or the fastest of kmbench.protocol.threads' calibration.
THREADS_FORCED, THREADS_FASTEST = "forced", "fastest"


class RecordError(ValueError):
    """An object that is not a whole record of its task's schema."""


def _dataclass_in(kind) -> type | None:
    """The record part a field holds (DatasetInfo for `DatasetInfo | None`), if any."""
    members = typing.get_args(kind) or (kind,)
    return next((member for member in members if is_dataclass(member)), None)


def _build(cls, raw, where: str = ""):
    """One record part from its object: typed fields by name, the rest into `extra`. A missing
    or None field takes its default; a required one (no default) must be there, in its type."""
    if not isinstance(raw, dict):
        raise RecordError(f"{where.rstrip('.') or 'the line'} is not an object")
    hints = typing.get_type_hints(cls)
    named = {part.name: part for part in fields(cls) if part.name not in _BOOKKEEPING}
    values = {key: value for key, value in raw.items() if key in named and value is not None}
    for name, part in named.items():
        required = part.default is MISSING and part.default_factory is MISSING
        if name not in values:
            if required:
                raise RecordError(f"{where}{name} is missing")
            continue
        nested = _dataclass_in(hints[name])
        if nested is not None:
            values[name] = _build(nested, values[name], f"{where}{name}.")
        elif required and not _is(values[name], hints[name]):
            raise RecordError(f"{where}{name} is {type(values[name]).__name__}, not {hints[name].__name__}")
    return cls(**values, extra={key: value for key, value in raw.items() if key not in named},
               given=frozenset(key for key in raw if key in named))


def _is(value, kind: type) -> bool:
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


_BOOKKEEPING = ("extra", "given")  # every part's two fields that are not keys of its own


def _default(part):
    if part.default is not MISSING:
        return part.default
    return part.default_factory() if part.default_factory is not MISSING else MISSING


class _Part:
    """What every record part shares: back to the object it was read from. `extra` holds the
    keys the part does not name, `given` the keys it was read with, so that writing it back
    leaves out only what the object left out (a default it never said)."""

    extra: dict
    given: frozenset

    def to_dict(self) -> dict:
        out = {}
        for part in fields(self):
            value = getattr(self, part.name)
            if part.name in _BOOKKEEPING or (part.name not in self.given and value == _default(part)):
                continue
            out[part.name] = value.to_dict() if is_dataclass(value) else value
        return {**out, **self.extra}


@dataclass(frozen=True)
class Statistic(_Part):
    """A repeated time's summary in seconds (times.iterate, times.wall, times.run)."""

    mean: float | None = None
    median: float | None = None
    min: float | None = None
    std: float | None = None
    cv: float | None = None
    extra: dict = field(default_factory=dict, repr=False)
    given: frozenset = field(default=frozenset(), repr=False, compare=False)


@dataclass(frozen=True)
class Times(_Part):
    """A cell's times: the counted repeats of the timed region (Lloyd's `iterate`, a task's
    `run`), the process wall clock, set-up, the first (warm-up) run, and each phase a row timed."""

    iterate: Statistic | None = None
    run: Statistic | None = None
    wall: Statistic | None = None
    setup: float | dict | None = None
    first_run: float | None = None
    phases: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict, repr=False)
    given: frozenset = field(default=frozenset(), repr=False, compare=False)

    def phase_mean(self, name: str) -> float | None:
        """The mean seconds of one phase (the scaling rows' `communicate`), None where not timed."""
        phase = self.phases.get(name)
        return phase.get("mean") if isinstance(phase, dict) else None


@dataclass(frozen=True)
class DatasetInfo(_Part):
    name: str
    n: int
    d: int
    generator: str | None = None
    dtype: str | None = None
    parameters: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict, repr=False)
    given: frozenset = field(default=frozenset(), repr=False, compare=False)


@dataclass(frozen=True)
class Params(_Part):
    """What every row of a Lloyd run was asked for."""

    k: int
    iterations: int
    init: str
    seed: int
    stop: str = "iterations"
    tol: float = 0.0
    extra: dict = field(default_factory=dict, repr=False)
    given: frozenset = field(default=frozenset(), repr=False, compare=False)


@dataclass(frozen=True, kw_only=True)
class Record(_Part):
    """The header every task's record holds, and its verdict."""

    task: typing.ClassVar[str]
    impl: str
    status: str
    label: str = ""
    schema: int = SCHEMA_VERSION
    run_id: str | None = None
    timestamp: str | None = None
    detail: str = ""
    warnings: list = field(default_factory=list)
    repeats_done: int | None = None
    times: Times = field(default_factory=Times)
    build: dict = field(default_factory=dict)  # what the row declares it is built on, free-form per row
    env: dict = field(default_factory=dict)  # the machine, as kmbench.protocol.environment captures it
    # A GPU row's GPUs around its counted runs: clocks, power, temperature, throttle reasons and
    # other processes (kmbench.protocol.gpu_state), or {"not_recorded": why}; {} for a CPU row.
    gpu_state: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict, repr=False)
    given: frozenset = field(default=frozenset(), repr=False, compare=False)

    @property
    def gpu_flags(self) -> list[str]:
        """"throttled" and/or "shared" where the GPU state says its counted runs were (the lines
        that say why are its warnings)."""
        return [flag for flag in GPU_FLAGS if self.gpu_state.get(flag)]

    def to_dict(self) -> dict:
        out = super().to_dict()
        return out if self.task == "lloyd" else {"schema": out.pop("schema"), "task": self.task, **out}


@dataclass(frozen=True, kw_only=True)
class LloydRecord(Record):
    task: typing.ClassVar[str] = "lloyd"
    dataset: DatasetInfo
    params: Params
    stop: dict = field(default_factory=dict)  # the rule the row followed: rule, max_iter, tol, followed
    iterations_executed: int | None = None
    reference_iterations: int | None = None
    stopped_by_budget: bool = False
    per_iteration_s: float | None = None
    distance_evals_per_s: float | None = None
    memory: dict = field(default_factory=dict)  # peaks: host_bytes, gpu_bytes
    validation: dict = field(default_factory=dict)  # the judge's figures and detail
    copy_floor_s: float | None = None  # out-of-core: one host-to-device pass of the data
    floor_multiple: float | None = None
    gpu_memory_share: float | None = None
    # A row that takes a thread count: {"count", "how", "cores"}, and where the count was the
    # calibration's, what it tried (kmbench.protocol.threads.ThreadChoice). Older records lack it.
    thread_choice: dict = field(default_factory=dict)

    @property
    def stop_followed(self) -> str:
        """"own", or "reference count" for a row that cannot stop by the tolerance rule itself."""
        return self.stop.get("followed", "own")

    @property
    def threads(self):
        return self.build.get("threads")

    @property
    def threads_calibrated(self) -> bool:
        """Whether its thread count was the calibration's fastest rather than asked for."""
        return self.thread_choice.get("how") == THREADS_FASTEST

    @property
    def library(self):
        return self.build.get("library")

    @property
    def precision(self):
        """What the row computes in, as it declares it (older rows say `computes_in`)."""
        return self.build.get("precision") or self.build.get("computes_in")

    @property
    def workers(self) -> int | None:
        """The Dask workers a row ran on (one per GPU for the GPU rows); None for every other row."""
        workers = self.build.get("workers")
        return workers if isinstance(workers, int) else None

    @property
    def gpus(self) -> int:
        """The GPUs (Dask workers) a multi-GPU row ran on; one for every other row."""
        return self.workers or 1

    def memory_bytes(self, where: str) -> int | None:
        """The peak memory measured on the "host" or the "gpu"."""
        return self.memory.get(f"{where}_bytes")

    def communication_per_iteration(self) -> float | None:
        """Seconds per iteration inside the collective (the run's `communicate` phase, the
        slowest rank's CUDA-event time, over the iterations run), or None where not recorded."""
        seconds = self.times.phase_mean("communicate")
        if not seconds or not self.iterations_executed:
            return None
        return seconds / self.iterations_executed

    @staticmethod
    def migrate(raw: dict) -> dict:
        return {**raw, "label": raw.get("label") or raw.get("impl")}


@dataclass(frozen=True, kw_only=True)
class TaskRecord(Record):
    """A task suite's cell: a row on one workload (`spec`) of one suite."""

    label: str
    suite: str
    workload: str
    spec: dict = field(default_factory=dict)
    description: str = ""
    step: str | None = None  # the rung of a ladder this row is
    seconds: float | None = None  # mean of the counted repeats
    floor_s: float | None = None

    @staticmethod
    def migrate(raw: dict) -> dict:
        return raw


@dataclass(frozen=True, kw_only=True)
class AssignRecord(TaskRecord):
    task: typing.ClassVar[str] = "assign"
    bytes_per_pass: int | None = None


@dataclass(frozen=True, kw_only=True)
class BatchedRecord(TaskRecord):
    task: typing.ClassVar[str] = "batched"
    rows_done: int | None = None
    extrapolated_seconds: float | None = None  # a budgeted row's whole batch, from the rows it did
    rows_per_s: float | None = None
    iterations_mean: float | None = None

    @property
    def whole_seconds(self) -> float | None:
        """The whole batch's time: measured, or extrapolated where a budget stopped the row."""
        return self.extrapolated_seconds or self.seconds


SCHEMAS: dict[str, type[Record]] = {schema.task: schema for schema in (LloydRecord, AssignRecord, BatchedRecord)}


def task_of(raw: dict) -> str:
    """The task a stored object belongs to (records without one are Lloyd's)."""
    return raw.get("task", "lloyd")


def parse(raw) -> Record:
    """The typed record of one stored object; RecordError says why it is not a whole one."""
    if not isinstance(raw, dict):
        raise RecordError("the line is not an object")
    if raw.get("schema") != SCHEMA_VERSION:
        raise RecordError(f"schema {raw.get('schema')!r} is not {SCHEMA_VERSION}")
    schema = SCHEMAS.get(task_of(raw))
    if schema is None:
        raise RecordError(f"no schema for the task {task_of(raw)!r}")
    return _build(schema, schema.migrate({key: value for key, value in raw.items() if key != "task"}))


def typed(record: Record | dict) -> Record:
    """A record as its dataclass, whether it comes typed or as the object a loop just built."""
    return record if isinstance(record, Record) else parse({"schema": SCHEMA_VERSION, **record})

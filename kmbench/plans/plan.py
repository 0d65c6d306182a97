"""A plan: the grid of cells a suite or a sweep asks for, checked whole before anything is
written, then run step by step (one dataset and one set of parameters per step), skipping
cells already measured with the same code on the same machine unless told to re-run.

A dataset is described by a spec, {"generator": "blobs" | "radial", parameters...}; its
name and point count are known without generating it, so k can be checked against every
dataset first. For the radial tree, "n" may stand for the size: the cluster size is then
n / (branches1 * branches2).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kmbench import progress, registry
from kmbench.data import cells, datasets, files, results
from kmbench.protocol import Options, environment, runner
from kmbench.errors import UsageError
from kmbench.tasks import lloyd

BLOBS_DEFAULTS = {"d": 2, "centers": 5, "std": 1.0, "seed": 0, "dtype": "float32"}
RADIAL_DEFAULTS = {"branches1": 10, "dist1": 20.0, "branches2": 5, "dist2": 2.0, "cluster_size": 20000,
                   "scale": 0.1, "seed": 0, "dtype": "float32"}
# Protocol settings a dataset entry may set for its own cells (a budgeted CPU row, say).
OWN_SETTINGS = {"stop": str, "tol": float, "repeats": int, "warmup": int, "max_time": float}


@dataclass
class Step:
    spec: dict  # the dataset, with every parameter filled in
    settings: runner.Settings
    impls: list = field(default_factory=list)

    @property
    def name(self) -> str:
        return dataset_name(self.spec)[0]


def _filled(spec: dict) -> dict:
    generator = spec.get("generator")
    known = {"blobs": BLOBS_DEFAULTS, "radial": RADIAL_DEFAULTS}.get(generator)
    unknown = sorted(set(spec) - {"generator", "n"} - set(known or ()))
    if known is not None and unknown:
        raise UsageError(f"a {generator} dataset has no parameter {', '.join(unknown)}; its parameters: "
                         f"n, {', '.join(known)}.")
    if generator == "blobs":
        full = {**BLOBS_DEFAULTS, **spec}
        if "n" not in full:
            raise UsageError("a blobs dataset needs n.")
        return full
    if generator == "radial":
        full = {**RADIAL_DEFAULTS, **spec}
        if "n" in full:
            leaves = full["branches1"] * full["branches2"]
            full["cluster_size"] = max(1, int(full.pop("n")) // leaves)
        return full
    raise UsageError(f"Unknown dataset generator {generator!r}; known: blobs, radial.")


def dataset_name(spec: dict) -> tuple[str, int]:
    """The cache name and point count of a filled spec, without generating anything."""
    s = spec
    datasets.dtype_of(s["dtype"])
    if s["generator"] == "blobs":
        return datasets.blobs_name(int(s["n"]), s["d"], s["centers"], s["std"], s["seed"], s["dtype"]), int(s["n"])
    name = datasets.radial_name(s["branches1"], s["dist1"], s["branches2"], s["dist2"], int(s["cluster_size"]),
                                s["scale"], s["seed"], s["dtype"])
    return name, s["branches1"] * s["branches2"] * int(s["cluster_size"])


def make_dataset(spec: dict, directory=None) -> datasets.Dataset:
    s = spec
    if s["generator"] == "blobs":
        return datasets.blobs(int(s["n"]), s["d"], s["centers"], s["std"], s["seed"], s["dtype"], directory)
    return datasets.radial(s["branches1"], s["dist1"], s["branches2"], s["dist2"], int(s["cluster_size"]),
                           s["scale"], s["seed"], s["dtype"], directory)


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def expand(dataset_specs: list[dict], settings: runner.Settings, ks: list[int],
           iterations: list[int] | None = None, impl_names: str | None = None) -> list[Step]:
    """Every (dataset, k, iterations) combination. A list-valued parameter in a spec expands
    into one dataset per value; a spec may name its own implementations ("impls"), list of k
    ("k"), iteration count ("iterations") and any of OWN_SETTINGS."""
    everything = registry.discover()
    steps = []
    for raw in dataset_specs:
        raw = dict(raw)
        own = raw.pop("impls", None)
        own_ks = raw.pop("k", None)
        own_iterations = raw.pop("iterations", None)
        own_settings = {key: kind(raw.pop(key)) for key, kind in OWN_SETTINGS.items() if key in raw}
        listed = [key for key, value in raw.items() if isinstance(value, (list, tuple))]
        combos = [{}]
        for key in listed:
            combos = [{**combo, key: value} for combo in combos for value in raw[key]]
        chosen = registry.select(impl_names or (",".join(own) if own else None), everything)
        for combo in combos:
            spec = _filled({**raw, **combo})
            for k in own_ks or ks:
                for count in iterations or _as_list(own_iterations or settings.iterations):
                    steps.append(Step(spec, replace(settings, k=int(k), iterations=int(count), **own_settings),
                                      chosen))
    return steps


def check_before_writing(cells: list[tuple[runner.Settings, dict]], store=None, data_dir=None,
                         generating: bool = True) -> None:
    """Every option, every dataset against k ({name: n} beside each settings), the record
    store and, where data are generated, the dataset cache: before any dataset is generated,
    any cell computed or any record appended."""
    for settings, sizes in cells:
        runner.check_settings(settings)
        runner.check_sizes(settings, sizes)
    results.check_writable(store)
    if generating:
        files.check_writable_folder(datasets.data_dir(data_dir), "the dataset cache")


def check(steps: list[Step], store=None, data_dir=None) -> None:
    """Everything a plan needs, before any dataset is generated or cell run."""
    if not steps:
        raise UsageError("the plan has no cell to run.")
    check_before_writing([(step.settings, dict([dataset_name(step.spec)])) for step in steps], store, data_dir)


def _planned(impl, dataset: str, settings: runner.Settings, options: Options | None = None) -> cells.Cell:
    """The cell a plan runs `impl` in. A row that takes a thread count is planned at the count
    asked for, where one is, so a record at another count does not stand for it; otherwise the
    threads (and a Dask row's workers) are left open, found at whatever the row reports."""
    threads = options.threads if options is not None and impl.takes_threads else None
    return cells.lloyd_cell(impl.name, dataset, settings.k, settings.iterations, settings.stop, settings.tol,
                            settings.init, settings.seed, threads)


def finished(store=None, machines: set | None = None) -> dict:
    """The newest record of each cell measured to the end with this code on this machine, or on
    one of `machines` (environment identities: a cluster's, kmbench.protocol.placement), by
    cell (cells.finished)."""
    machines = machines or {environment.identity()}
    return cells.finished(results.load(store), lambda record: environment.identity(record.get("env") or {}) in machines)


def remaining(step: Step, done: set, options: Options = Options()) -> list:
    """The step's implementations whose cell is not among `done` (finished(store))."""
    return [impl for impl in step.impls if _planned(impl, step.name, step.settings, options) not in done]


def execute(steps: list[Step], store=None, reporter=None, data_dir=None, force=False,
            options: Options = Options(), cluster=None) -> tuple[list[dict], int]:
    """Run every step, each row handed `options`, each cell measured here or by `cluster`'s
    workers; returns the new records and the number of cells skipped."""
    done = set() if force else finished(store, cluster.machines() if cluster else None)
    records, skipped = [], 0
    for step in steps:
        dataset = make_dataset(step.spec, data_dir)
        todo = remaining(step, done, options)
        skipped += len(step.impls) - len(todo)
        measured = progress.runnable([impl for impl in step.impls if impl not in todo])
        if reporter and measured:
            reporter.skip(measured)  # it counts the cells of rows that can run here
        if todo:
            records += lloyd.run(todo, [dataset], step.settings, store, reporter, data_dir, options, cluster)
    return records, skipped


def latest_records(steps: list[Step], store=None) -> list[dict]:
    """The newest stored record of every cell of the plan (measured now or before)."""
    wanted = {_planned(impl, step.name, step.settings) for step in steps for impl in step.impls}
    return cells.newest(results.load(store), wanted)

"""The cells of a run on a Dask cluster (`kmbench run | sweep | reproduce --scheduler ADDRESS`),
as benchopt runs its solvers on Dask or Slurm.

The client (the kmbench process) makes each workload's problem and float64 oracle once, as a
local run does, and sends each cell to a worker, which measures and judges it and hands its
record back as data; the client appends it to its own store (kmbench.data.results, atomically,
as ever). A worker never writes to the client's store, nor anywhere else of the client's.

One cell per host at a time. A host's cores and GPUs belong to one timed cell, so no two timed
cells share a GPU or a core however the host's workers are laid out (one worker per host, or one
`dask cuda worker` per GPU); a matrix measures faster with more hosts, never with more workers
on one. A cell goes to a host whose worker can run its row (the row's available(), asked there)
and waits for one; a row that can run nowhere is measured as skipped by any worker, which says
why. A row that spans a cluster itself (`spans_cluster`: the Dask rows) runs in the client, on
the whole cluster, once every cell in flight is done and before any later one starts.

A worker lost mid-cell (its process ended, or it left) becomes an `error` cell that says so;
the rest of the run goes on with the workers left and any that join (a nanny's restart).
Workers must run the client's kmbench code: a worker whose code differs is refused at once.
"""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import CancelledError
from dataclasses import dataclass, field, replace

from kmbench.data.dataset import Dataset
from kmbench.errors import UsageError
from kmbench.protocol import Problem, environment
from kmbench.protocol.cluster import connect
from kmbench.protocol.task import Inputs, cell_record, failed_record, measured_here, usable

POLL_S = 0.25  # how often the client looks at its cells in flight and at the cluster's workers
WORKERLESS_S = 60.0  # a cluster without a worker this long ends the run's remaining cells as errors


def worker_facts(rows: list) -> dict:
    """On a worker: the environment its records will carry, and whether each row runs there."""
    return {"env": environment.capture(), "usable": {impl.name: usable(impl) for impl in rows}}


def measure_on_worker(task, impl, payload, run_id: str, rows: list, command: str) -> dict:
    """On a worker: one cell, measured and judged there; its record is returned, never stored."""
    problem, oracle, workload = payload
    env = {**environment.capture(), "command": command}  # the command is the client's
    record = cell_record(task, impl, problem, oracle, workload, run_id)
    record.update(env=env, **(task.floor(rows, problem, env) if problem is not None else {}))
    return record


def shipped(inputs: Inputs) -> tuple:
    """What a worker gets of a workload: (problem, oracle, workload). The points travel once
    (a Lloyd workload's dataset shares its problem's array), and the client's file path is
    not handed on as the rows' input: the worker's own disk does not have it."""
    problem, workload = inputs.problem, inputs.workload
    if isinstance(problem, Problem):  # Lloyd's (the other tasks' problems name no file)
        problem = replace(problem, data_path=None)
        if isinstance(workload, Dataset) and workload.data.shape == problem.data.shape:
            workload = replace(workload, data=problem.data)
    return problem, inputs.oracle, workload


@dataclass
class Worker:
    address: str
    host: str  # the name its machine gives itself (its records' env.hostname)
    env: dict
    usable: dict = field(default_factory=dict)  # row name -> (available, why not)


@dataclass
class Flight:
    """A cell sent to a worker, until its record is back."""

    inputs: Inputs
    impl: object
    worker: Worker
    future: object


class Cluster:
    """A running Dask cluster that measures a run's cells (see the module's text)."""

    def __init__(self, address: str):
        self.address = address
        self.client = connect(address)
        self.command = environment.capture()["command"]
        self.workers: dict[str, Worker] = {}  # those that measure: alive, and running this code
        self.strangers: dict[str, Worker] = {}  # alive, but running other kmbench code: never used
        self.rows: list = []
        self._payloads: dict = {}  # (id(inputs), made, worker address) -> future of shipped(inputs)
        self.refresh()
        if self.strangers:
            self.close()
            named = ", ".join(f"{w.address} ({w.host})" for w in self.strangers.values())
            raise UsageError(f"Dask workers {named} run other kmbench code than this client: install this checkout "
                             "there.")
        if not self.workers:
            self.close()
            raise UsageError(f"the Dask cluster at {address} has no worker.")

    def close(self) -> None:
        self.client.close()

    def machines(self) -> set:
        """The identities (environment.identity) of every machine this run measures on: a
        cell finished on any of them with this code need not run again."""
        return {environment.identity(worker.env) for worker in self.workers.values()} | {environment.identity()}

    def refresh(self) -> None:
        """Forget the workers that left; ask those that joined what they are and can run."""
        # Asked of the scheduler each time: scheduler_info() returns the client's cache, which its
        # periodic refresh replaces with one that lists no worker (all would look lost).
        alive = set(self.client.nthreads())
        for known in (self.workers, self.strangers):
            for gone in set(known) - alive:
                del known[gone]
        new = sorted(alive - set(self.workers) - set(self.strangers))
        if new:
            here = environment.code_hash()
            facts = self.client.run(worker_facts, self.rows, workers=new, on_error="return")
            for address, fact in facts.items():
                if isinstance(fact, dict):  # else it left while asked
                    worker = Worker(address, fact["env"].get("hostname") or address, fact["env"], fact["usable"])
                    (self.workers if fact["env"].get("code_hash") == here else self.strangers)[address] = worker

    def run(self, jobs: list, run_id: str, keep, reporter=None) -> None:
        """Every cell of `jobs` ([(Inputs, rows)]), each record handed to keep(record) here."""
        rows = {impl.name: impl for _, todo in jobs for impl in todo}
        if set(rows) - {impl.name for impl in self.rows}:
            self.rows = list(rows.values())
            self.workers.clear()  # asked again, about these rows
            self.strangers.clear()
        queue = deque((inputs, impl) for inputs, todo in jobs for impl in todo)
        flights: list[Flight] = []
        alone_since = None
        while queue or flights:
            self.refresh()
            for flight in [f for f in flights if f.future.done() or f.worker.address not in self.workers]:
                flights.remove(flight)
                keep(self._record_of(flight, run_id))
            self._forget_done(queue, flights)
            if not self.workers and not flights:
                alone_since = alone_since or time.monotonic()
                if time.monotonic() - alone_since > WORKERLESS_S:
                    while queue:
                        inputs, impl = queue.popleft()
                        keep(self._failed(inputs, impl, None, run_id, f"the Dask cluster at {self.address} "
                                          f"has had no worker for {WORKERLESS_S:.0f} s"))
                    break
            else:
                alone_since = None
            self._place(queue, flights, run_id, keep, reporter)
            if flights:
                from distributed import wait

                try:
                    wait([flight.future for flight in flights], timeout=POLL_S, return_when="FIRST_COMPLETED")
                except (TimeoutError, CancelledError):
                    pass  # nothing landed, or a cell's data went with its worker: looked at next round
            elif queue:
                time.sleep(POLL_S)
        self._payloads.clear()

    def _forget_done(self, queue: deque, flights: list) -> None:
        """Let the workers drop the data of workloads none of whose cells is queued or in flight."""
        active = {id(inputs) for inputs, _ in queue} | {id(flight.inputs) for flight in flights}
        for key in [key for key in self._payloads if key[0] not in active]:
            del self._payloads[key]

    def _place(self, queue: deque, flights: list, run_id: str, keep, reporter) -> None:
        """Send queued cells, in order, to the free hosts that can run them. A row that spans
        the cluster is a barrier: it runs here once nothing is in flight, and nothing after it
        is sent before it ends."""
        busy = {flight.worker.host for flight in flights}
        for cell in list(queue):
            inputs, impl = cell
            where = inputs.task.workload_name(inputs.workload)
            if impl.spans_cluster:
                if not flights:
                    queue.remove(cell)
                    if reporter:
                        reporter.start(impl, where)
                    keep(measured_here(inputs, impl, run_id))
                return
            worker = self._free_worker(impl, busy)
            if worker is None:
                continue
            queue.remove(cell)
            busy.add(worker.host)
            if worker.usable[impl.name][0]:
                inputs.make()  # the oracle, here, as in a local run (once per workload)
            if reporter:
                reporter.start(impl, where)
            future = self.client.submit(measure_on_worker, inputs.task, impl, self._payload(inputs, worker), run_id,
                                        inputs.impls, self.command, workers=[worker.address],
                                        allow_other_workers=False, pure=False)
            flights.append(Flight(inputs, impl, worker, future))

    def _free_worker(self, impl, busy: set) -> Worker | None:
        """A worker on a free host that can run the row; None to wait for one. A row no worker
        can run goes to any free host, to be measured as skipped with that host's reason."""
        free = [worker for worker in self.workers.values() if worker.host not in busy]
        able = [worker for worker in free if worker.usable[impl.name][0]]
        if able:
            return able[0]
        if any(worker.usable[impl.name][0] for worker in self.workers.values()):
            return None
        return free[0] if free else None

    def _payload(self, inputs: Inputs, worker: Worker):
        """shipped(inputs), on that worker, sent once per workload and worker."""
        key = (id(inputs), inputs.oracle is not None, worker.address)
        if key not in self._payloads:
            self._payloads[key] = self.client.scatter([shipped(inputs)], workers=[worker.address], hash=False)[0]
        return self._payloads[key]

    def _record_of(self, flight: Flight, run_id: str) -> dict:
        """A landed cell's record: the worker's, or an error that says what became of it."""
        worker = flight.worker
        lost = (f"the Dask worker {worker.address} on {worker.host} was lost mid-cell (its process ended or it "
                "left the cluster); the rest of the run goes on")
        if worker.address in self.workers:
            try:
                return flight.inputs.charged({**flight.future.result(), "worker": worker.address})
            except CancelledError:  # its data went with a worker (Dask's lost-data cancellation)
                pass
            except Exception as exc:  # measure_cell never raises: this is Dask's, or pickling's
                lost = f"the cell's record could not come back from the Dask worker {worker.address}: {exc}"
        self.client.cancel(flight.future)
        return self._failed(flight.inputs, flight.impl, worker, run_id, lost)

    def _failed(self, inputs: Inputs, impl, worker: Worker | None, run_id: str, why: str) -> dict:
        """The record of a cell whose worker could not give one: a whole record, status error."""
        env = {**(worker.env if worker else environment.capture()), "command": self.command}
        return {**failed_record(inputs, impl, run_id, why, env), **({"worker": worker.address} if worker else {})}

"""Judge the cells of committed record stores again, with this tree's judge, and compare each
verdict with the stored one (a changed judge must not change a verdict it has no reason to).

Each distinct cell (row, dataset, k, iterations, stop rule, start) is run once more, untimed in
effect (no warm-up, one counted run: the verdict does not depend on the timing), on the dataset
its record names (generated blobs are made again from their parameters), and judged.

    python tools/rejudge.py results/cpu-2core/records.jsonl ... [--out FILE.md]

Prints one line per cell and exits 1 if any verdict changed. Rows that cannot run here (no GPU,
a package missing) are listed as not re-judged, with why.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import fields

from kmbench.data import datasets
from kmbench.protocol import validate
from kmbench.protocol.runner import Settings, make_problem, run_cell
from kmbench.protocol.task import usable
from kmbench.registry import discover


def cells(stores: list[str]) -> dict:
    """The distinct cells of the stores: key -> (record, the stores it came from)."""
    found: dict = {}
    for store in stores:
        with open(store) as handle:
            for line in handle:
                record = json.loads(line)
                if record.get("task", "lloyd") != "lloyd" or "params" not in record:
                    continue
                params = {name: record["params"].get(name) for name in ("k", "iterations", "stop", "tol", "init", "seed")}
                key = (record["impl"], record["dataset"]["name"], json.dumps(params, sort_keys=True))
                found.setdefault(key, (record, []))[1].append(store)
    return found


def dataset_of(record: dict):
    described = record["dataset"]
    parameters = described.get("parameters") or {}
    if described.get("generator") == "blobs":
        return datasets.blobs(parameters["n"], parameters["d"], parameters["centers"], parameters["std"],
                              parameters["seed"], described.get("dtype", "float32"))
    return datasets.resolve(described["name"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--out", help="a markdown table of the cells and their verdicts")
    args = parser.parse_args(argv)
    rows = discover()
    names = {field.name for field in fields(Settings)}
    lines = ["| row | dataset | k | iterations | stored | now | seconds |", "|---|---|---|---|---|---|---|"]
    changed = 0
    for (impl_name, dataset_name, _), (record, stores) in cells(args.stores).items():
        impl = rows.get(impl_name)
        ready, why = usable(impl) if impl else (False, "not a row of this tree")
        params = record["params"]
        if not ready:
            print(f"not re-judged: {impl_name} on {dataset_name}: {why}", flush=True)
            lines.append(f"| {impl_name} | {dataset_name} | {params['k']} | {params['iterations']} | "
                         f"{record['status']} | not run here: {why} | |")
            continue
        settings = Settings(**{**{name: params[name] for name in names if name in params}, "warmup": 0, "repeats": 1,
                               "max_time": None})
        started = time.perf_counter()
        dataset = dataset_of(record)
        problem = make_problem(dataset, settings)
        oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, problem.iterations, tol=problem.tol)
        again = run_cell(impl, problem, oracle, dataset, settings, "rejudge")
        seconds = time.perf_counter() - started
        same = again["status"] == record["status"]
        changed += not same
        print(f"{'same   ' if same else 'CHANGED'} {impl_name} on {dataset_name} k={params['k']} "
              f"its={params['iterations']}: stored {record['status']}, now {again['status']} ({seconds:.0f} s); "
              f"{again.get('detail', '')[:200]}", flush=True)
        lines.append(f"| {impl_name} | {dataset_name} | {params['k']} | {params['iterations']} | {record['status']} | "
                     f"{again['status']} | {seconds:.0f} |")
    if args.out:
        with open(args.out, "w") as handle:
            handle.write("\n".join(lines) + "\n")
    print(f"{changed} verdict(s) changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())

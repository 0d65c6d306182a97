"""The strong-scaling table of a multi-GPU run (`make scale-dask-cuda`): time per iteration
of each (implementation, GPUs, k) on one dataset, the speedup over the same row on one GPU,
the parallel efficiency, the time against kmbench-gpu alone on one GPU (where the run has it)
and, for the rows that record it, the collective's share of an iteration. A cell that is not
`ok` is shown with its status, not a time.

    python3 -m kmbench.report.scaling results/<machine>/scaling/records.jsonl > scaling.md
"""

from __future__ import annotations

import sys

from kmbench.data import results

ALONE = "kmbench-gpu"  # the one-GPU row without Dask that every GPU set is held against


def _gpus(record: dict) -> int:
    return int((record.get("build") or {}).get("workers") or 1)


def _per_iteration(record: dict | None) -> float | None:
    return record.get("per_iteration_s") if record and record.get("status") == "ok" else None


def communication_per_iteration(record: dict) -> float | None:
    """Seconds per iteration inside the collective (the run's `communicate` phase, the
    slowest rank's CUDA-event time, over the iterations run), or None where not recorded."""
    phase = ((record.get("times") or {}).get("phases") or {}).get("communicate")
    iterations = record.get("iterations_executed")
    if not phase or not iterations:
        return None
    return phase["mean"] / iterations


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.1f} us"


def markdown(records: list[dict]) -> str:
    cells: dict[tuple, dict] = {}
    for record in records:  # the newest record of each cell wins
        key = (record["impl"], record["dataset"]["name"], record["params"]["k"], _gpus(record))
        cells[key] = record
    env = next((r.get("env") for r in records if r.get("env")), {}) or {}
    gpu = (env.get("gpu") or {}).get("name", "?")
    lines = [f"# Strong scaling: Lloyd on several GPUs ({gpu})", "",
             "Time per iteration is the mean of the counted repeats over the iterations run: the slowest "
             "rank's CUDA-event time for kmbench-gpu-dask, the host clock for the Dask-reduction rows (each "
             f"iteration ends with the reduced partials on the client). `x {ALONE}`: the row's time over "
             f"{ALONE}'s alone on one GPU, same data and k. Communication: time per iteration inside the "
             "all-reduce.", "",
             f"| implementation | dataset | n | k | GPUs | time per iteration | speedup over 1 GPU | efficiency "
             f"| x {ALONE} | communication | status |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (impl, name, k, gpus), record in sorted(cells.items()):
        per = _per_iteration(record)
        base = _per_iteration(cells.get((impl, name, k, 1)))
        alone = _per_iteration(cells.get((ALONE, name, k, 1)))
        speedup = base / per if base and per else None
        lines.append(f"| {impl} | {name} | {record['dataset'].get('n', '?'):,} | {k} | {gpus} | "
                     f"{_time(per)} | {f'{speedup:.2f}x' if speedup else '-'} | "
                     f"{f'{speedup / gpus:.0%}' if speedup else '-'} | "
                     f"{f'{per / alone:.2f}x' if per and alone and impl != ALONE else '-'} | "
                     f"{_time(communication_per_iteration(record)) if per else '-'} | {record.get('status')}"
                     f"{': ' + record.get('detail', '') if record.get('status') != 'ok' else ''} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown(results.load(sys.argv[1])))

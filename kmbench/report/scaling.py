"""The strong-scaling table of a multi-GPU run (`make scale-dask-cuda`): time per iteration
of each (implementation, GPUs, k) on one dataset, the speedup over the same row on one GPU,
and the parallel efficiency. A cell that is not `ok` is shown with its status, not a time.

    python3 -m kmbench.report.scaling results/<machine>/scaling/records.jsonl > scaling.md
"""

from __future__ import annotations

import sys

from kmbench.data import results


def _gpus(record: dict) -> int:
    return int((record.get("build") or {}).get("workers") or 1)


def markdown(records: list[dict]) -> str:
    cells: dict[tuple, dict] = {}
    for record in records:  # the newest record of each cell wins
        key = (record["impl"], record["dataset"]["name"], record["params"]["k"], _gpus(record))
        cells[key] = record
    env = next((r.get("env") for r in records if r.get("env")), {}) or {}
    gpu = (env.get("gpu") or {}).get("name", "?")
    lines = [f"# Strong scaling: Lloyd on several GPUs ({gpu})", "",
             "Time per iteration is the mean of the counted repeats over the iterations run, on the host "
             "clock for the dask rows (each iteration ends with the reduced partials on the client).", "",
             "| implementation | dataset | n | k | GPUs | time per iteration | speedup over 1 GPU | efficiency | status |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (impl, name, k, gpus), record in sorted(cells.items()):
        one = cells.get((impl, name, k, 1))
        per = record.get("per_iteration_s") if record.get("status") == "ok" else None
        base = one.get("per_iteration_s") if one and one.get("status") == "ok" else None
        speedup = base / per if base and per else None
        lines.append(f"| {impl} | {name} | {record['dataset'].get('n', '?'):,} | {k} | {gpus} | "
                     f"{f'{per * 1e3:.2f} ms' if per else '-'} | {f'{speedup:.2f}x' if speedup else '-'} | "
                     f"{f'{speedup / gpus:.0%}' if speedup else '-'} | {record.get('status')}"
                     f"{': ' + record.get('detail', '') if record.get('status') != 'ok' else ''} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown(results.load(sys.argv[1])))

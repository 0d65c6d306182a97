"""The out-of-core view (`kmbench out-of-core`): Lloyd on data larger than the GPU's memory, each
row's time per iteration beside its copy floor, one host-to-device pass of the data, which no
streamed iteration can beat. A cell that is not `ok` shows its status, not a time."""

from __future__ import annotations

from kmbench.data.records import LloydRecord
from kmbench.report.formatting import record_status


def markdown(records: list[LloydRecord]) -> str:
    gpu = next(((r.env.get("gpu") or {}).get("name") for r in records if r.env), None) or "?"
    lines = [f"# Lloyd on data larger than the GPU ({gpu})", "",
             "Time per iteration: mean of the counted repeats (CUDA events), over the iterations run. "
             "Copy floor: one pass of the host-to-device copies alone, same chunks, measured by the "
             "streamed row in its prepare.", "",
             "| implementation | n | d | k | data | share of GPU memory | copy floor | time per iteration "
             "| x floor | status |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for record in records:
        data = record.dataset
        size = data.n * data.d * 4
        per, floor, status = record.per_iteration_s, record.copy_floor_s, record.status
        lines.append(f"| {record.impl} | {data.n:,} | {data.d} | {record.params.k} | "
                     f"{size / 1e9:.1f} GB | {record.gpu_memory_share or 0:.2f} | "
                     f"{f'{floor * 1e3:.0f} ms' if floor else '-'} | "
                     f"{f'{per * 1e3:.0f} ms' if per and status == 'ok' else '-'} | "
                     f"{f'{per / floor:.2f}x' if per and floor and status == 'ok' else '-'} | {record_status(record)}"
                     f"{': ' + record.detail if status != 'ok' else ''} |")
    return "\n".join(lines) + "\n"

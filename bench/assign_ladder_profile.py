"""Launch each step of the ladder once per workload of the assign-ladder suite, outside any
graph, for Nsight Compute to measure (the suite's timings come from kmbench reproduce), and
turn its CSV into a markdown table:

    ncu --csv --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,\\
        sm__inst_issued.avg.pct_of_peak_sustained_active -k regex:assign_ \\
        python3 bench/assign_ladder_profile.py > ncu.csv
    python3 bench/assign_ladder_profile.py --summarize ncu.csv > ncu.md

Nsight Compute flushes the caches before each kernel and fixes the clocks, so its durations
are of a pass from DRAM at base clock: longer than the suite's back-to-back graph timings.
"""

from __future__ import annotations

import csv
import sys


METRICS = {"gpu__time_duration.sum": "duration (us)",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput (% of peak)",
           "sm__inst_issued.avg.pct_of_peak_sustained_active": "issue slots used (% of active)"}


def summarize(path: str) -> str:
    """One row per profiled kernel launch, in launch order, with the three metrics."""
    rows: dict[str, dict] = {}
    header = None
    with open(path, newline="") as handle:
        for line in csv.reader(handle):
            if line and line[0] == "ID":
                header = line
            elif header and len(line) == len(header):
                record = dict(zip(header, line))
                row = rows.setdefault(record["ID"], {"kernel": record["Kernel Name"].split("(")[0]})
                value = float(record["Metric Value"].replace(",", ""))
                row[record["Metric Name"]] = value / 1000 if record["Metric Unit"] in ("ns", "nsecond") else value
    names = list(METRICS)
    lines = ["| kernel | " + " | ".join(METRICS.values()) + " |", "|---" * (len(names) + 1) + "|"]
    for row in rows.values():
        lines.append(f"| {row['kernel']} | " + " | ".join(f"{row.get(name, float('nan')):.1f}" for name in names) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--summarize":
        sys.stdout.write(summarize(sys.argv[2]))
        return
    import cupy

    from impls.gpu.assign_ladder import LADDER
    from kmbench.plans import suite
    from kmbench.tasks import tasks
    ladder = suite.load("assign-ladder")
    for spec in ladder.workloads:
        problem = tasks.assign_problem(**spec)
        for step in LADDER:
            impl = step()
            impl.prepare(problem)
            impl.launch_once()
            cupy.cuda.Device().synchronize()
            print(f"{tasks.workload_name('assign', spec)} {impl.name} {impl.build_info()['kernel']}", flush=True)
            impl.release()


if __name__ == "__main__":
    main()

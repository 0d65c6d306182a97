"""kmbench-gpu's run, kernel by kernel: where the time of an embedding cell goes (issue 64).

The row's run is timed as a whole with CUDA events (its graph launched, as in a cell), then run
again with every kernel launched alone (the row's use_graph off, as KMBENCH_CUDA_GRAPH=0 sets it) under
torch's profiler, which collects every kernel of the process through CUPTI (CuPy's included).
Each kernel's time is summed over the run and divided by the iterations: the table says which
stage (the tensor pass, the re-check, the sort or the moved rows' sums, the centroids' layout)
holds the time the floor does not explain.

    python3 bench/iteration_kernels.py --shape 1000000,256,4096 --shape 1000000,64,1000
    python3 bench/iteration_kernels.py --shape 1000000,256,4096 --ab TAKE_TURNS --no-kernels

--ab NAME times the run with hopper_pass.NAME (a module setting, such as TAKE_TURNS) off, on, off,
on in one process, graph on: an A/B/A/B of one setting.

Needs a GPU with CuPy and torch. The data are the suite's blobs (one centre a cluster), the
start the suite's (random, seed 0).
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from impls.gpu.kmbench_gpu import KmbenchGpu
from kmbench.data.datasets import blobs
from kmbench.protocol.settings import Settings, make_problem


def graph_seconds(problem, repeats: int) -> float:
    """Best seconds of the row's iterate phase over `repeats` runs after a warm-up, graph on."""
    impl = KmbenchGpu()
    try:
        impl.prepare(problem)
        impl.run(problem)
        return min(impl.run(problem).phases["iterate"] for _ in range(repeats))
    finally:
        impl.release()


def kernel_seconds(problem) -> tuple[dict[str, tuple[float, int]], float]:
    """{kernel: (seconds, launches)} over one run with every kernel launched alone, and that
    run's iterate phase; the first run of the process is a warm-up. The profile holds the whole
    call (the start's upload and the result's download too, outside the iterate phase), so the
    once-a-run copies and kernels are spread over the iterations in the table."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    impl = KmbenchGpu()
    impl.use_graph = False  # what KMBENCH_CUDA_GRAPH=0 sets: every kernel launched alone
    try:
        impl.prepare(problem)
        impl.run(problem)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            result = impl.run(problem)
            torch.cuda.synchronize()
    finally:
        impl.release()
    totals: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA and event.device_time_total > 0:
            entry = totals[event.name[:70]]
            entry[0] += event.device_time_total * 1e-6
            entry[1] += 1
    return {name: (s, c) for name, (s, c) in totals.items()}, result.phases["iterate"]


def alternate(problem, setting: str, repeats: int) -> list[tuple[bool, float]]:
    """(value, best seconds a run) with hopper_pass.`setting` off, on, off, on."""
    from impls.gpu.kmbench_gpu import hopper_pass

    original = getattr(hopper_pass, setting)
    if not isinstance(original, bool):
        raise SystemExit(f"--ab takes a True/False setting of hopper_pass; {setting} is {original!r}")
    try:
        measured = []
        for value in (False, True, False, True):
            setattr(hopper_pass, setting, value)
            measured.append((value, graph_seconds(problem, repeats)))
        return measured
    finally:
        setattr(hopper_pass, setting, original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", help="n,d,k (repeatable; default 1e6,256,4096)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--ab", help="a hopper_pass module setting to time off and on, alternately")
    parser.add_argument("--no-kernels", action="store_true", help="skip the kernel-by-kernel table")
    args = parser.parse_args()
    for shape in args.shape or ["1000000,256,4096"]:
        n, d, k = (int(float(v)) for v in shape.split(","))
        problem = make_problem(blobs(n, d, centers=k, directory=args.data_dir),
                               Settings(k=k, iterations=args.iterations))
        if args.ab:
            for value, seconds in alternate(problem, args.ab, args.repeats):
                print(f"{n:,} x {d}, k = {k:,}: {args.ab}={int(value)} {seconds / args.iterations * 1e3:.3f} ms an "
                      "iteration (graph)", flush=True)
        if args.no_kernels:
            continue
        whole = graph_seconds(problem, args.repeats) / args.iterations
        kernels, alone = kernel_seconds(problem)
        busy = sum(s for s, _ in kernels.values()) / args.iterations
        print(f"\n{n:,} x {d}, k = {k:,}, {args.iterations} iterations: {whole * 1e3:.3f} ms an iteration "
              f"(graph); kernels alone {alone / args.iterations * 1e3:.3f} ms, of it {busy * 1e3:.3f} ms in kernels")
        for name, (seconds, launches) in sorted(kernels.items(), key=lambda item: -item[1][0]):
            share = seconds / args.iterations
            if share < 2e-6:
                continue
            print(f"  {share * 1e3:8.3f} ms  {share / whole:6.1%}  x{launches / args.iterations:<5.3g} {name}")


if __name__ == "__main__":
    main()

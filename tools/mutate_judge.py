"""Plant one-line slips in the judge and check that its tests catch each (`make mutate-judge`).

Each mutant changes one line of kmbench/judge/, kmbench/protocol/validate.py or clock.py: a bound
made looser or tighter, a check skipped, a comparison that lets a near miss through. For each, a
scratch copy of the tree gets the change and runs the judge's tests (first failure stops it); a
mutant the tests fail on is *killed*. A survivor is either a missing test or a change that
cannot alter a verdict, which kmbench/judge/NOTES.md then says ("Mutants that live").

    python tools/mutate_judge.py [--jobs N] [--only SUBSTRING] [--out results/cpu-2core/mutation]

Writes `mutants.md` (one row per mutant) and `mutants.json` into --out. The GPU kernels
(kmbench/judge/kernels.py) are left out: CI's machine has no GPU to run their tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The judge's tests, fastest and most pointed first (a killed mutant stops at its first failure):
# the list mutmut runs too (`make mutate-judge-generated`), kept once in pyproject.toml.
TESTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]["pytest_add_cli_args_test_selection"]
COPIED = ["kmbench", "impls", "tests", "pyproject.toml"]
J, V, C, P = "kmbench/judge/", "kmbench/protocol/validate.py", "kmbench/protocol/clock.py", "kmbench/judge/precision.py"

# (file, the line's text as it is, as mutated, what the slip does)
MUTANTS = [
    (J + "scan.py", "ok[tied] = keys[place] == wanted", "ok[tied] = True",
     "any label allowed for an ambiguous point"),
    (J + "scan.py", "apart = (d2 - d1) > 2 * judge_error + need[rows]", "apart = (d2 - d1) > judge_error + need[rows]",
     "the judge's own error counted once, not twice"),
    (J + "scan.py", "apart = (d2 - d1) > 2 * judge_error + need[rows]", "apart = (d2 - d1) > 2 * judge_error",
     "the row's rounding left out of 'clear'"),
    (J + "scan.py", "return apart & xp.isfinite(d1) & xp.isfinite(d2)", "return apart | xp.isinf(d2)",
     "an overflowed score taken for 'no other centroid'"),
    (J + "scan.py", "pair_error = 2 * row_error", "pair_error = row_error", "half the row's pair error"),
    (J + "scoring.py", "self.factor = distance_factor(FLOAT64 if exact64 else _product_precision(xp), self.d)",
     "self.factor = distance_factor(FLOAT64, self.d)", "the judge's float32 product error taken as float64's"),
    (J + "error_bounds.py", "return factor * xp.maximum(raw * raw, centred * centred)", "return factor * centred * centred",
     "the row's error only for the mean as anchor"),
    (J + "error_bounds.py", "return factor * (d_a + d_b) + 4 * unit * reach * roots", "return factor * (d_a + d_b)",
     "direct distances' coordinate rounding left out"),
    (J + "scan.py", "settled = (below > upper) & separated(", "settled = separated(",
     "a negative carried bound squared into a large one"),
    (J + "carried.py", "for mover in movers.tolist():", "for mover in movers.tolist()[:0]:",
     "the movers left out of the carried bound and not measured"),
    (J + "carried.py", "kept[movers] = 0.0", "kept[:] = 0.0", "no centroid's move taken off the carried bound"),
    (J + "carried.py", "out[first] = np.max(np.delete(moved, first))", "out[first] = 0.0",
     "the largest mover's own points bounded as if no other centroid moved"),
    (J + "scan.py", "allowed = distances <= (smallest + allowance[pending])[:, None]",
     "allowed = distances <= (smallest + 0.5 * allowance[pending])[:, None]", "half the allowance in float64"),
    (J + "scan.py", "several_mask = (allowed.sum(axis=1) > 1) & ~exact[pending]",
     "several_mask = (allowed.sum(axis=1) > 1)", "exact ties no longer go to the lowest index"),
    (J + "error_bounds.py", "return integral & (x.shape[1] * largest * largest * 4 < precision.exact_below)",
     "return integral & (x.shape[1] * largest * largest < 4 * precision.exact_below)",
     "inexact integer arithmetic taken for exact"),
    (J + "scan.py", "lower[rows] = xp.sqrt(xp.maximum(d2 - judge_error, 0.0))", "lower[rows] = xp.sqrt(xp.maximum(d2, 0.0))",
     "a scan's lower bound without its own error"),
    (J + "sums.py", "+ 3 * precision.store * centre)", "+ 0 * precision.store * centre)",
     "the mean bound without the stored centroid's rounding"),
    (J + "sums.py", "return 2 * precision.store * xp.sqrt((previous * previous).sum(axis=1))",
     "return 2e3 * precision.store * xp.sqrt((previous * previous).sum(axis=1))", "an empty cluster may wander"),
    (J + "sums.py", "norm = xp.maximum(xp.maximum(points.norm, points.centred_norm), xp.sqrt(square))",
     "norm = xp.sqrt(square)", "summand norms only from the old centroid"),
    (J + "sums.py", "squares += xp.bincount(own, weights=square, minlength=k)",
     "squares += xp.bincount(own, weights=norm, minlength=k)", "the inertia summed from the wrong column"),
    (J + "sums.py", "out[filled] = self.sums[filled] / self.counts[filled, None]",
     "out[filled] = self.sums[filled] / (self.counts[filled, None] + 1)", "every mean one point short"),
    (J + "certify.py", "excess = gap - bound", "excess = gap - 2 * bound", "every mean's bound doubled"),
    (J + "certify.py", "if not bool(good.all()):", "if False:", "reported labels never checked"),
    (J + "certify.py", "moved = self._within(new, previous, bound, filled=empty)",
     "moved = self._within(new, previous, bound, filled=~empty)", "the wrong clusters held to 'kept'"),
    (J + "certify.py", "wrong = candidates & ~inside & (has_fixed | ~kept)", "wrong = candidates & ~inside & has_fixed",
     "a cluster of ambiguous points alone may go anywhere"),
    (J + "certify.py", "bound = factor * most.weights / fixed_count + 3 * self.precision.store * centre + away / fixed_count",
     "bound = factor * most.weights / fixed_count + 3 * self.precision.store * centre",
     "the ambiguous points' share of a mean left out"),
    (J + "certify.py", "if stop_done(changed, found.nearest.size, tol):", "if stop_done(changed, found.nearest.size, None):",
     "the reference ignores the tolerance rule"),
    (J + "trajectory.py", "if end.shape == kept[count].shape and np.array_equal(end, kept[count]):",
     "if end.shape == kept[count].shape and np.allclose(end, kept[count]):",
     "the timed end compared with allclose, not equality"),
    (J + "trajectory.py", "certificate.inertias[digest(kept[count])] = step.inertia_before",
     "certificate.inertias[digest(kept[count])] = 0.0", "an end point's inertia not the one computed"),
    (J + "trajectory.py", "return np.array_equal(once, again)", "return False",
     "every row taken for non-deterministic"),
    (J + "trajectory.py", "end = _end_failure(certifier, timed, kept, frozen_slack=False)",
     "end = _end_failure(certifier, timed, kept, frozen_slack=True)", "the frozen-empty-cluster slack given to every row"),
    (J + "trajectory.py", "not (claimed < problem.iterations and fixed_point)", "not (claimed < problem.iterations)",
     "fewer iterations accepted short of a fixed point"),
    (J + "trajectory.py", "if counts[0] < 1:", "if counts[0] < 0:", "a timed run of no iteration let through"),
    (J + "trajectory.py", "least, most = changed", "most, least = changed", "the tolerance rule's counts swapped"),
    (J + "trajectory.py", "if not np.array_equal(np.asarray(result.centroids, dtype=np.float64), ends[int(result.iterations)]):",
     "if not np.allclose(np.asarray(result.centroids, dtype=np.float64), ends[int(result.iterations)]):",
     "prefix runs' ends compared with allclose"),
    (V, "return Verdict(APPROXIMATE, end.centroid_error", "return Verdict(OK, end.centroid_error",
     "'approximate' treated as 'ok'"),
    (V, "order = {ERROR: 4, MISMATCH: 3, APPROXIMATE: 2, OK: 1, SKIPPED: 0}",
     "order = {ERROR: 4, MISMATCH: 0, APPROXIMATE: 2, OK: 1, SKIPPED: 0}", "a mismatching repeat hidden by an ok one"),
    (V, "if not np.isfinite(centroids).all():", "if False:", "NaN centroids let through to the certificate"),
    (V, "if certificate.certified:", "if True:", "the certificate's failure ignored"),
    (C, "if sum(claims) > wall * (1 + WALL_SLACK) + WALL_SLACK_S:", "if max(claims) > wall * (1 + WALL_SLACK) + WALL_SLACK_S:",
     "the wall check on the largest claim instead of their sum"),
    (C, "per_iteration = max(BYTES_PER_POINT * problem.n, declared_bytes or 0)", "per_iteration = BYTES_PER_POINT * problem.n",
     "the floor without the declared bytes"),
    (C, "FLOOR_HEADROOM = 20.0", "FLOOR_HEADROOM = 200.0", "the floor's headroom 20 -> 200"),
    (C, "if min(claims) < floor:", "if max(claims) < floor:", "only the largest claim held to the floor"),
    (C, "return iterations * per_iteration / (FLOOR_HEADROOM * copy_rate(gpu))",
     "return per_iteration / (FLOOR_HEADROOM * copy_rate(gpu))", "the floor of one iteration, whatever the count"),
    (C, "math.isfinite(t) and t >= 0 for t in claims", "math.isfinite(t) for t in claims", "negative claims accepted"),
    (C, "isinstance(t, numbers.Real) and math.isfinite(t)", "isinstance(t, (int, float)) and math.isfinite(t)",
     "a NumPy scalar time refused as not a number"),
    (P, "return 2 * p.input + p.input ** 2 + gamma(d + 8, p.accumulate) + 2 * p.store",
     "return 2 * p.input + p.input ** 2 + gamma(d, p.accumulate) + 2 * p.store", "the distance bound's extra roundings dropped"),
    (P, "return gamma(count + 2, p.accumulate) + p.input", "return gamma(count + 2, p.accumulate)",
     "the sum bound without input rounding"),
    (P, "out = np.where(mu >= 0.5, np.inf, mu / (1.0 - mu))", "out = np.where(mu >= 1.0, np.inf, mu / (1.0 - mu))",
     "gamma used past where it bounds anything"),
    # Slips the tests above missed until the exact-arithmetic oracle (tests/test_judge_exact.py) came.
    (J + "certify.py", "gap = xp.sqrt(((new - target) ** 2).sum(axis=1))", "gap = xp.abs(new - target).max(axis=1)",
     "a centroid's distance measured in the max norm"),
    (J + "certify.py", "by_float64.weights - removed.weights)", "by_float64.weights)",
     "the tied points' weight left in the clear points' sum"),
    (J + "certify.py", "inside = ((new >= low - margin) & (new <= high + margin)).all(axis=1)",
     "inside = ((new >= low - margin) & (new <= high + margin)).any(axis=1)", "one coordinate in the box is enough"),
    (J + "certify.py", "margin = (factor * most.weights / fixed_count + 3 * self.precision.store * reach)[:, None]",
     "margin = (factor * most.weights / fixed_count)[:, None]", "the box's margin without the stored rounding"),
    (J + "error_bounds.py", "return integral & (x.shape[1] * largest * largest * 4 < precision.exact_below)",
     "return integral & (x.shape[1] * largest * largest * 2 < precision.exact_below)", "the exact-integer limit taken twice as high"),
    (P, '"float16": Precision("float16", 2.0 ** -11, 2.0 ** -22, 2.0 ** -11, 2.0 ** 11)',
     '"float16": Precision("float16", 2.0 ** -11, 2.0 ** -22, 2.0 ** -24, 2.0 ** 11)', "float16 centroids stored as float32"),
    (P, '"bfloat16": Precision("bfloat16", 2.0 ** -8, 2.0 ** -22, 2.0 ** -8, 2.0 ** 8)',
     '"bfloat16": Precision("bfloat16", 2.0 ** -8, 2.0 ** -22, 2.0 ** -8, 2.0 ** 11)', "bfloat16's exact limit 2^11"),
    (J + "sums.py", "norm = xp.maximum(xp.maximum(points.norm, points.centred_norm), xp.sqrt(square))",
     "norm = xp.maximum(points.norm, xp.sqrt(square))", "summand norms without the data's mean as anchor"),
    (J + "error_bounds.py", "return factor * (d_a + d_b) + 4 * unit * reach * roots + 8 * unit * unit * reach * reach",
     "return factor * (d_a + d_b) + 2 * unit * reach * roots + 8 * unit * unit * reach * reach",
     "the direct bound's coordinate term halved"),
    (J + "scan.py", "direct = direct and precision.input == precision.accumulate == precision.store", "direct = direct",
     "the direct bound given to precisions of mixed units (TF32, float16)"),
]


def apply(tree: Path, path: str, old: str, new: str) -> None:
    file = tree / path
    text = file.read_text()
    if text.count(old) != 1:
        raise SystemExit(f"mutant of {path}: {old!r} occurs {text.count(old)} times, not once")
    file.write_text(text.replace(old, new))


def run_one(index: int, mutant, scratch: Path, timeout: float) -> dict:
    path, old, new, what = mutant
    tree = scratch / f"mutant-{index}"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, tree / name)
    apply(tree, path, old, new)
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS],
                              cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
        killed, by = done.returncode != 0, _first_failure(done.stdout)
    except subprocess.TimeoutExpired:
        killed, by = True, f"timed out after {timeout:.0f} s"
    shutil.rmtree(tree, ignore_errors=True)
    return {"file": path, "from": old, "to": new, "what": what, "killed": killed, "by": by,
            "seconds": round(time.perf_counter() - started, 1)}


def _first_failure(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0].split(" ", 1)[1]
    return ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", help="only mutants whose file or text contains this")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds one mutant's tests may take")
    parser.add_argument("--out", default="results/cpu-2core/mutation")
    args = parser.parse_args(argv)
    for path, old, _, _ in MUTANTS:  # every mutant names a line that is there, once
        apply_check = (ROOT / path).read_text().count(old)
        if apply_check != 1:
            raise SystemExit(f"mutant of {path}: {old!r} occurs {apply_check} times, not once")
    chosen = [(i, m) for i, m in enumerate(MUTANTS) if not args.only or args.only in m[0] or args.only in m[1]]
    scratch = Path(tempfile.mkdtemp(prefix="kmbench-mutants-"))
    results = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_one, i, m, scratch, args.timeout) for i, m in chosen]
        for future in futures:
            row = future.result()
            results.append(row)
            print(f"{'killed ' if row['killed'] else 'LIVES  '} {row['file']}: {row['what']}"
                  f"{' (' + row['by'] + ')' if row['by'] else ''} [{row['seconds']} s]", flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    killed = sum(row["killed"] for row in results)
    print(f"{killed} of {len(results)} mutants killed ({killed / max(1, len(results)):.0%})")
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutants.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [f"# Mutants of the judge: {killed} of {len(results)} killed", "",
             f"`python tools/mutate_judge.py` ({len(TESTS)} test files, first failure stops a mutant).", "",
             "| file | slip | killed | by |", "|---|---|---|---|"]
    lines += [f"| {r['file']} | {r['what']} | {'yes' if r['killed'] else '**no**'} | {r['by']} |" for r in results]
    (out / "mutants.md").write_text("\n".join(lines) + "\n")
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())

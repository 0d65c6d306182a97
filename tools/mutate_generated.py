"""mutmut's own mutants of the judge, and a report of which its tests kill (`make mutate-judge-generated`).

tools/mutate_judge.py plants the slips its authors thought of; this plants the ones nobody picked:
mutmut (pyproject.toml's [tool.mutmut]) changes every operator, constant, comparison and call
argument of kmbench/judge/, reference.py, validate.py and clock.py, one at a time, and runs only the
judge's tests that reach the changed function (it measures that once, with coverage), fastest
first, stopping at the first failure. Its results stay in mutants/ (ignored by git), so a second
run tests only the mutants of functions that changed since.

    python tools/mutate_generated.py [--jobs N] [--only 'kmbench.protocol.clock*'] [--report-only]
    python tools/mutate_generated.py --adopt-selection   # after adding test files to the selection

Every survivor must be either killed by a test or listed in tools/mutants_equivalent/ (a TOML file a module) with the
reason it cannot change a verdict (kind "equivalent"), or why no CPU test can reach it (kind
"gpu-only": code that runs only with CuPy); the report (--out) says "K of N killed" and lists both.
Exit status 1 while a survivor is neither.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "tools" / "mutants_equivalent"  # one TOML file per module mutated
# Which mutants --recheck killed, and with which test files. Its own file: mutmut refuses a .meta
# file with keys it does not know.
RECHECKED = ROOT / "mutants" / "rechecked.json"
# mutmut's exit codes of a mutant's test run (mutmut/stats.py), as this report counts them.
KILLED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
          -11: "crashed", -9: "crashed", 37: "killed"}
LIVE = {0: "survived", 5: "no test reaches it", 33: "no test reaches it", 34: "skipped", 35: "suspicious"}


def mutmut() -> list[str]:
    """mutmut's command line (not `python -m mutmut`, which mutmut warns against), handing each
    mutant's tests to pytest fastest first (tools/mutmut_fast_first.py)."""
    return [sys.executable, str(ROOT / "tools" / "mutmut_fast_first.py")]


def run_mutmut(jobs: int, only: list[str]) -> int:
    # One BLAS thread per mutant: the parallelism is mutmut's children, not each one's threads.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run([*mutmut(), "run", "--max-children", str(jobs), *only], cwd=ROOT, env=env).returncode


def read_results() -> dict[str, dict[str, int | None]]:
    """{source file: {mutant name: exit code or None (not run yet)}} from mutmut's cache, less the
    mutants of functions the source no longer has (mutmut drops them at its next run)."""
    out = {}
    for meta in sorted((ROOT / "mutants").rglob("*.py.meta")):
        path = str(meta.relative_to(ROOT / "mutants"))[: -len(".meta")]
        present = source_functions(ROOT / path)
        out[path] = {name: code for name, code in json.loads(meta.read_text())["exit_code_by_key"].items()
                     if function_of(name) in present}
    return out


def function_of(mutant: str) -> str:
    """The mutated function's name as mutmut names it (x_name, xǁClassǁname), without its module."""
    return mutant.rsplit(".", 1)[-1].partition("__mutmut_")[0]


def source_functions(path: Path) -> set[str]:
    """The functions of a source file as mutmut names them: x_name, and xǁClassǁname for methods."""
    if not path.exists():
        return set()
    tree = ast.parse(path.read_text())
    names = {f"x_{node.name}" for node in tree.body if isinstance(node, ast.FunctionDef)}
    for cls in (node for node in tree.body if isinstance(node, ast.ClassDef)):
        names |= {f"x\u01c1{cls.name}\u01c1{node.name}" for node in cls.body if isinstance(node, ast.FunctionDef)}
    return names


def mutant_functions(path: str) -> dict[str, str]:
    """{function name as mutmut names it: its source} of the mutated copy of `path` (mutmut keeps
    each mutant as a whole function beside the original, `..._mutmut_orig`)."""
    text = (ROOT / "mutants" / path).read_text()
    lines = text.splitlines()  # once: ast.get_source_segment splits the whole file at every call
    return {node.name: "\n".join(lines[node.lineno - 1:node.end_lineno]) for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef) and "__mutmut_" in node.name}


def changed_lines(name: str, functions: dict[str, str]) -> tuple[str, str]:
    """The mutant's removed and added lines (stripped, joined by ' / ')."""
    own = name.rsplit(".", 1)[-1]
    original = functions[own.partition("__mutmut_")[0] + "__mutmut_orig"].splitlines()[1:]
    mutated = functions[own].splitlines()[1:]  # the def lines differ by name only
    diff = [line for line in difflib.unified_diff(original, mutated, lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("---", "+++"))]
    return (" / ".join(line[1:].strip() for line in diff if line.startswith("-")),
            " / ".join(line[1:].strip() for line in diff if line.startswith("+")))


def load_equivalent() -> list[dict]:
    return [entry for listed in sorted(EQUIVALENT.glob("*.toml"))
            for entry in tomllib.loads(listed.read_text()).get("equivalent", [])]


def explain(name: str, removed: str, added: str, equivalent: list[dict]) -> str | None:
    """The listed reason this survivor cannot change a verdict, matched by its function and its
    change (not by mutmut's number, which moves when the function changes)."""
    function = name.partition("__mutmut_")[0]
    for entry in equivalent:
        if entry["function"] == function and entry["from"] == removed and entry["to"] == added:
            return f"{entry.get('kind', 'equivalent')}: {entry['reason']}"
    return None


def report(results: dict, out: Path, jobs: int) -> int:
    equivalent = load_equivalent()
    counts: dict[str, Counter] = {}
    survivors = []
    for path, codes in results.items():
        tally = counts.setdefault(path, Counter())
        functions = mutant_functions(path) if any(c is not None and c not in KILLED for c in codes.values()) else {}
        for name, code in sorted(codes.items()):
            if code is None:
                tally["not run yet"] += 1
            elif code in KILLED:
                tally["killed"] += 1
            else:
                removed, added = changed_lines(name, functions)
                reason = explain(name, removed, added, equivalent)
                tally["equivalent" if reason else "unexplained"] += 1
                survivors.append({"file": path, "mutant": name, "status": LIVE.get(code, f"exit {code}"),
                                  "from": removed, "to": added, "equivalent": reason})
    total = Counter()
    for tally in counts.values():
        total.update(tally)
    run = sum(total.values()) - total["not run yet"]
    killed = total["killed"]
    still_killed = {name for codes in results.values() for name, code in codes.items()
                    if KILLED.get(code) == "killed"}
    rechecked = len(still_killed & set(read_rechecked()))
    whole = [path for path, tally in counts.items() if sum(tally.values()) and not tally["not run yet"]]
    lines = [f"# mutmut's mutants of the judge: {killed} of {run} killed ({killed / max(1, run):.1%})", "",
             "Generated by mutmut (`make mutate-judge-generated JOBS=N`, tools/mutate_generated.py): every operator,",
             "constant, comparison and argument of the files below changed one at a time, each mutant run against",
             "the judge's tests that reach its function. A timeout or crash counts as killed.",
             f"Of the killed, {rechecked} by `--recheck`: survivors of mutmut's run (or mutants it had not reached)",
             "run in the same way against test files written after it, without mutmut.",
             f"{total['equivalent']} survivors are listed (tools/mutants_equivalent/, reasons below: equivalent, or gpu-only);",
             f"{total['unexplained']} are neither killed nor explained; {total['not run yet']} mutants are not run yet",
             "(`make mutate-judge-generated JOBS=N` runs them; in this checkout's mutants/ the verdicts below are kept,",
             "a fresh clone has no mutants/ and runs every mutant again).", "",
             f"Files run whole: {', '.join(p.rsplit('/', 1)[-1] for p in whole) or 'none'}; "
             f"{sum(counts[p]['killed'] for p in whole)} of {sum(sum(counts[p].values()) for p in whole)} of their mutants killed.", "",
             "| file | mutants | killed | equivalent | unexplained | not run yet |", "|---|---|---|---|---|---|"]
    for path, tally in counts.items():
        lines.append(f"| {path} | {sum(tally.values())} | {tally['killed']} | {tally['equivalent']} "
                     f"| {tally['unexplained']} | {tally['not run yet']} |")
    for title, chosen in (("Survivors neither killed nor explained", [s for s in survivors if not s["equivalent"]]),
                          ("Listed survivors", [s for s in survivors if s["equivalent"]])):
        lines += ["", f"## {title} ({len(chosen)})", ""]
        if chosen:
            lines += ["| mutant | status | from | to | why it lives |", "|---|---|---|---|---|"]
            lines += [f"| {s['mutant']} | {s['status']} | `{s['from']}` | `{s['to']}` | {s['equivalent'] or ''} |"
                      for s in chosen]
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutants.md").write_text("\n".join(line.replace("|`", "| `") for line in lines) + "\n")
    (out / "mutants.json").write_text(json.dumps({"counts": {p: dict(t) for p, t in counts.items()},
                                                  "survivors": survivors}, indent=1) + "\n")
    print(lines[0][2:])
    print(f"{total['unexplained']} unexplained survivors, {total['not run yet']} not run yet: {out / 'mutants.md'}")
    return 1 if total["unexplained"] else 0


def wants_recheck(code: int | None, reason: str | None, named: bool, gpu_only: bool) -> bool:
    """Whether --recheck runs a mutant: the survivors no entry explains and the mutants not run yet,
    of those --only names (`named`: every mutant where it names none); with --gpu-only, instead the
    survivors listed gpu-only that it names."""
    if gpu_only:
        return named and code in LIVE and (reason or "").startswith("gpu-only")
    return named and (code is None or (code in LIVE and not reason))


def recheck(test_files: list[str], only: list[str], jobs: int, gpu_only: bool = False) -> int:
    """Cached survivors no entry explains, and mutants not run yet (of those `only` names; see
    wants_recheck), run again against `test_files`, tests written after mutmut's run, without mutmut: a change to pyproject's test
    selection empties mutmut's whole cache, and a run of every mutant again takes hours on two
    cores. Each mutant is one pytest process in mutants/ (tests copied in as they are now) with
    MUTANT_UNDER_TEST set, as mutmut runs it; one whose tests fail is killed (exit code 1, and the
    test files are noted in mutants/rechecked.json). The rest keep their cached verdict.

    With `gpu_only`, on a GPU machine: instead the survivors listed as "gpu-only" (code only CuPy
    arrays reach, which mutmut's CPU tests never run) matching `only`, against GPU test files."""
    import fnmatch
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    shutil.copytree(ROOT / "tests", ROOT / "mutants" / "tests", dirs_exist_ok=True)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *test_files]

    def fails(name: str) -> bool:
        try:
            return subprocess.run(command, cwd=ROOT / "mutants", env={**env, "MUTANT_UNDER_TEST": name},
                                  capture_output=True, timeout=300).returncode == 1
        except subprocess.TimeoutExpired:
            return False  # not counted as killed here

    if fails(""):
        print("the tests fail without a mutant: nothing rechecked")
        return 1
    equivalent = load_equivalent()
    killed, noted = 0, read_rechecked()
    for meta in sorted((ROOT / "mutants").rglob("*.py.meta")):
        path = str(meta.relative_to(ROOT / "mutants"))[: -len(".meta")]
        data = json.loads(meta.read_text())
        functions, present = mutant_functions(path), source_functions(ROOT / path)
        def chosen(name: str, code: int | None) -> bool:
            if function_of(name) not in present or name.rsplit(".", 1)[-1] not in functions:
                return False
            reason = explain(name, *changed_lines(name, functions), equivalent) if code in LIVE else None
            named = any(fnmatch.fnmatch(name, p) for p in only) if only else not gpu_only
            return wants_recheck(code, reason, named, gpu_only)

        wanted = [name for name, code in data["exit_code_by_key"].items() if chosen(name, code)]
        with ThreadPoolExecutor(jobs) as pool:
            verdicts = dict(zip(wanted, pool.map(fails, wanted)))
        for name, dead in verdicts.items():
            if dead:
                data["exit_code_by_key"][name] = 1
                noted[name] = " ".join(test_files)
        killed += sum(verdicts.values())
        meta.write_text(json.dumps(data))
        RECHECKED.write_text(json.dumps(noted, indent=1))
        print(f"{path}: {sum(verdicts.values())} of {len(wanted)} rechecked mutants killed", flush=True)
    print(f"{killed} killed by {' '.join(test_files)}")
    return 0


def adopt_selection(rechecked: bool = False) -> int:
    """After test files join pyproject's selection: mutmut's kills are kept (more tests kill at
    least what fewer did), its survivors, timeouts and crashes are marked not run (its next run
    gives them every test now selected), and the selection's fingerprint is recorded, which
    otherwise makes that run empty the whole cache (hours of mutants on two cores).

    `rechecked`: the new files already ran against every unexplained survivor (--recheck), so the
    survivors stay; only the listed ones have not met the new tests, which can only undercount kills."""
    from mutmut.configuration import config

    os.chdir(ROOT)  # mutmut reads pyproject.toml from the working directory
    stats = ROOT / "mutants" / "mutmut-stats.json"
    data = json.loads(stats.read_text())
    old, new = data.get("config_fingerprint", {}), config().config_fingerprint()
    changed = sorted(group for group in old if group != "test_selection" and old[group] != new.get(group))
    if changed:  # how tests run or time out changed too: no kill can be kept
        print(f"more than the test selection changed ({', '.join(changed)}): let mutmut run every mutant again")
        return 1
    data["config_fingerprint"] = new
    stats.write_text(json.dumps(data))
    reset = 0
    for meta in (ROOT / "mutants").rglob("*.py.meta"):
        verdicts = json.loads(meta.read_text())
        for name, code in verdicts["exit_code_by_key"].items():
            if code is not None and KILLED.get(code) != "killed" and not rechecked:
                verdicts["exit_code_by_key"][name] = None
                reset += 1
        meta.write_text(json.dumps(verdicts))
    print(f"the new selection adopted: {reset} survivors, timeouts and crashes to run again"
          + (" (survivors rechecked with the new files: kept)" if rechecked else ""))
    return 0


def read_rechecked() -> dict[str, str]:
    return json.loads(RECHECKED.read_text()) if RECHECKED.exists() else {}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants run at once")
    parser.add_argument("--only", action="append", default=[],
                        help="mutmut's mutant names or globs, e.g. 'kmbench.protocol.clock*' (reruns them)")
    parser.add_argument("--report-only", action="store_true", help="report mutmut's cache, run nothing")
    parser.add_argument("--recheck", action="append", default=[], metavar="TEST_FILE",
                        help="run the unexplained survivors and the mutants not run yet (of those --only names) against these tests")
    parser.add_argument("--gpu-only", action="store_true",
                        help="with --recheck on a GPU machine: the survivors listed gpu-only that --only names")
    parser.add_argument("--adopt-selection", action="store_true",
                        help="keep mutmut's kills after pyproject's test selection grew (see adopt_selection)")
    parser.add_argument("--survivors-rechecked", action="store_true",
                        help="with --adopt-selection: the new test files already ran by --recheck; keep survivors")
    parser.add_argument("--out", default="results/cpu-2core/mutation-generated")
    args = parser.parse_args(argv)
    if args.adopt_selection:
        return adopt_selection(args.survivors_rechecked)
    if args.recheck:
        code = recheck(args.recheck, args.only, args.jobs, args.gpu_only)
        if code != 0:
            return code
    elif not args.report_only:
        code = run_mutmut(args.jobs, args.only)
        if code != 0:
            print(f"mutmut run failed (exit status {code}); its cache in mutants/ keeps what it finished")
            return code
    return report(read_results(), ROOT / args.out, args.jobs)


if __name__ == "__main__":
    sys.exit(main())

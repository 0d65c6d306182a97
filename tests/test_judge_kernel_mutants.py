"""Mutants of the judge's own CUDA kernels (kmbench/judge/kernels.py), run on the GPU.

mutmut mutates Python, not the CUDA text inside a string, so this plants the kernels' mutants
itself: every comparison, logical and arithmetic operator, name of the two smallest, constant
and store of the fused scan (its runner-up) and of the warp merge, changed one at a time. Each
mutant runs in its own process (a mutant may fault and take its CUDA context with it) against
tests/test_judge_kernel.py's checks; it is killed if they fail, it faults or it does not compile.
A survivor must be in EQUIVALENT with the reason it cannot change what the judge is given.

Left out on purpose: the signature, the `for (...)` headers and the bounds guards (`i < n`,
`row >= rows`) and the local array's size: a mutant there hangs the GPU or reads past an array,
which the kernels' values cannot show; compute-sanitizer is the check for those
(tests/sanitize_kernels.py).

    KMBENCH_KERNEL_MUTANTS_OUT=results/gpu/kernel-mutants.json make test-gpu   # keeps the table
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kmbench.judge import kernels

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"FUSED_SOURCE": "check_fused", "SCORED_SOURCE": "check_scored"}

# Each token and what it may become.
OPERATORS = {"<": ["<=", ">"], "<=": ["<"], ">": [">=", "<"], ">=": [">"], "==": ["!="], "!=": ["=="],
             "||": ["&&"], "&&": ["||"], "+": ["-"], "-": ["+"], "*": ["+"], "/": ["*"]}
NAMES = {"first": "second", "second": "first", "other_first": "other_second", "other_second": "other_first",
         "fminf": "fmaxf", "__fsub_rn": "__fadd_rn"}
TOKEN = re.compile(r"(?<=\s)(<=|>=|==|!=|\|\||&&|<|>|\+|-|\*|/)(?=\s)"  # binary operators, spaced as written
                   r"|\b(first|second|other_first|other_second|fminf|__fsub_rn)\b"
                   r"|(?<![\w.])(\d+\.\d+f?|\d+)(?![\w.x])"  # literals (not 0xffffffffu)
                   r"|(?<!int )(?<!float )(?<!double )\b((?:first|second|index|d1\[\w+\]|d2\[\w+\]|best\[\w+\]) = [^;]+;)")
# Not mutated: see the module's docstring.
LEFT_OUT = re.compile(r"\bfor \([^)]*\)|\bi < n\b|\brow >= rows\b|\bp\[8\]|0xffffffffu")

# Survivors that cannot change the (d1, d2, nearest) the judge reads, each with its reason.
# The fused kernel's `second`, whatever it starts at, takes the value `first` had (inf) at the first
# centroid whose distance is finite; it could differ only for a point whose every squared distance
# overflows float64, and then its d1 is inf too, so the judge leaves that point open either way.
_SECOND_START = ("every start value of second is overwritten at the first finite distance (by first's inf); "
                 "a point whose every distance overflows has d1 = inf and is left open anyway (seen: an H200)")
EQUIVALENT = {
    ("FUSED_SOURCE", "double first = 1.0 / 0.0, second = 1.0 / 0.0;",
     "double first = 1.0 / 0.0, second = 0.0 / 0.0;"): _SECOND_START,
    ("FUSED_SOURCE", "double first = 1.0 / 0.0, second = 1.0 / 0.0;",
     "double first = 1.0 / 0.0, second = 1.0 * 0.0;"): _SECOND_START,
    ("FUSED_SOURCE", "double first = 1.0 / 0.0, second = 1.0 / 0.0;",
     "double first = 1.0 / 0.0, second = 1.0 / 1.0;"): _SECOND_START,
    ("FUSED_SOURCE", "if (s < first)", "if (s <= first)"):
        "an exact tie then goes to the later centroid, and d2 - d1 = 0 leaves the point open: the judge "
        "scores open points again in float64, lowest index first",
    ("FUSED_SOURCE", "else if (s < second) second = s;", "else if (s <= second) second = s;"):
        "assigns second the value it has",
    ("SCORED_SOURCE", "else if (s < second) second = s;", "else if (s <= second) second = s;"):
        "assigns second the value it has",
    ("SCORED_SOURCE", "if (other_first < first || (other_first == first && other_index < index))",
     "if (other_first < first || (other_first == first && other_index <= index))"):
        "two lanes never hold the same column (they scan disjoint columns), so the indices are never equal",
    ("SCORED_SOURCE", "if (lane == 0)", "if (lane != 0)"):
        "after the xor butterfly every lane of the warp holds the same three values; any lane may store them",
    ("SCORED_SOURCE", "if (lane == 0)", "if (lane == 1)"): "as lane != 0: every lane holds the same values",
    ("FUSED_SOURCE", "int index = 0;", "int index = 1;"):
        "the first index is kept only by a point none of whose distances is below +inf, which finite "
        "float64 data of the fused kernel's low d never gives",
    ("SCORED_SOURCE", "float first = 1.0f / 0.0f, second = 1.0f / 0.0f;",
     "float first = 1.0f / 0.0f, second = 0.0f / 0.0f;"):
        "a NaN start for second acts as +inf: the lane's first score moves first (+inf) into it, and fminf "
        "in the merge drops a NaN for the other operand, which is a first (never NaN)",
}


def mutants() -> list[tuple[str, str, str, str]]:
    """(source's name, the changed statement as it was, as it is, the mutated source) for each mutant."""
    out = []
    for name in SOURCES:
        text = getattr(kernels, name)
        body = text.index("{")  # the signature is left alone
        left_out = [m.span() for m in LEFT_OUT.finditer(text)]
        for match in TOKEN.finditer(text, body):
            start, end = match.span()
            if any(a <= start < b for a, b in left_out):
                continue
            token = match.group()
            if match.group(1):
                changes = OPERATORS[token]
            elif match.group(2):
                changes = [NAMES[token]]
            elif match.group(3):
                changes = [_other_number(token)]
            else:
                changes = [";"]  # the assignment left out
            for change in changes:
                mutated = text[:start] + change + text[end:]
                out.append((name, _statement(text, start, end), _statement(mutated, start, start + len(change)), mutated))
    return out


def _other_number(token: str) -> str:
    if "." in token:
        return ("0.0" if float(token.rstrip("f")) else "1.0") + ("f" if token.endswith("f") else "")
    return str(int(token) + 1)


def _statement(text: str, start: int, end: int) -> str:
    """The smallest piece of the line around a change that names it: from the last '{', ';' or
    line start before it to the next ';', '{' or line end after it."""
    left = max(text.rfind(c, 0, start) for c in "{;\n") + 1
    rights = [i for i in (text.find(c, end) for c in ";{\n") if i >= 0]
    right = min(rights) if rights else len(text)
    piece = text[left:right + (1 if right < len(text) and text[right] == ";" else 0)].strip()
    return piece


CHILD = """
import json, os, sys
from kmbench.judge import kernels
from tests import test_judge_kernel as checks
name, text = json.loads(os.environ["KMBENCH_KERNEL_MUTANT"])
setattr(kernels, name, text)
cases = checks.FUSED_CASES if name == "FUSED_SOURCE" else checks.SCORED_CASES
check = checks.check_fused if name == "FUSED_SOURCE" else checks.check_scored
for case in cases:
    check(*case)
"""


def run_mutant(mutant) -> dict:
    name, was, now, text = mutant
    env = {**os.environ, "KMBENCH_KERNEL_MUTANT": json.dumps([name, text]), "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600)
        code, tail = done.returncode, (done.stderr.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired:
        code, tail = -1, "timed out"
    return {"kernel": name, "from": was, "to": now, "killed": code != 0, "by": tail[:160]}


@pytest.mark.gpu
def test_every_mutant_of_the_kernels_is_killed_or_equivalent():
    for name in SOURCES:  # the kernels as they are pass the checks, or no kill would mean anything
        control = run_mutant((name, "", "", getattr(kernels, name)))
        assert not control["killed"], f"{name} as it is fails its check: {control['by']}"
    planted = mutants()
    assert len(planted) > 60  # every operator of both kernels, not a handful
    with ThreadPoolExecutor(max_workers=4) as pool:  # one GPU takes several small processes at once
        rows = list(pool.map(run_mutant, planted))
    for row in rows:
        row["equivalent"] = None if row["killed"] else EQUIVALENT.get((row["kernel"], row["from"], row["to"]))
    out = os.environ.get("KMBENCH_KERNEL_MUTANTS_OUT")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(rows, indent=1) + "\n")
    killed = sum(row["killed"] for row in rows)
    print(f"{killed} of {len(rows)} mutants of the judge's kernels killed")
    unexplained = [f"{r['kernel']}: {r['from']!r} -> {r['to']!r}" for r in rows if not r["killed"] and not r["equivalent"]]
    assert not unexplained, "mutants of the kernels that no check kills:\n" + "\n".join(unexplained)


def test_the_mutants_are_planted_where_the_docstring_says():
    """(No GPU needed.) Every mutant changes the kernels' text, none touches a loop header or a
    bounds guard, and each listed equivalent is one of the mutants planted (so a stale entry is seen)."""
    planted = mutants()
    assert all(text != getattr(kernels, name) for name, _, _, text in planted)
    for name, _, _, text in planted:  # the loop headers, guards and array sizes as they were
        assert LEFT_OUT.findall(text) == LEFT_OUT.findall(getattr(kernels, name))
    keys = {(name, was, now) for name, was, now, _ in planted}
    assert set(EQUIVALENT) <= keys, set(EQUIVALENT) - keys

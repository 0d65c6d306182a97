"""mutmut's command line, with each mutant's tests handed to pytest fastest first.

mutmut runs a mutant against every test that reaches the mutated function, stopping at the first
failure (-x), but it hands pytest those tests in a set's order: a mutant of `scan.assign`, reached
by 250 tests taking about a minute together, waited on average half a minute for the test that
kills it, often behind the one 13 s test. Handed over fastest first (by the durations mutmut
measured when it collected its stats), the pointed tests that kill most mutants run first. What a
mutant's verdict is does not change: the same tests, the same -x, the same time limit.

    python tools/mutmut_fast_first.py run --max-children N [names...]   # as `mutmut run`
"""

from __future__ import annotations

import sys

import mutmut.__main__ as mutmut_main
from mutmut.state import state


class FastestFirst(set):
    """A set of test ids that iterates in ascending measured duration (unknown ones last)."""

    def __iter__(self):
        durations = state().duration_by_test
        return iter(sorted(set.__iter__(self), key=lambda test: (durations.get(test, float("inf")), test)))


def _ordered(collect):
    def collect_then_order(*args, **kwargs):
        collect(*args, **kwargs)
        tests = state().tests_by_mangled_function_name
        for function in list(tests):
            tests[function] = FastestFirst(tests[function])
    return collect_then_order


mutmut_main.collect_or_load_stats = _ordered(mutmut_main.collect_or_load_stats)

if __name__ == "__main__":
    sys.argv[0] = "mutmut"
    sys.exit(mutmut_main.cli())

"""Find implementations: the built-ins, found by reading the `impls` package (a class that
declares its own `row_order` is a row), and third parties' through the entry-point group
`kmbench.impls` (each entry point names an `Implementation` subclass). Every row declares its
own place (`row_order`), whether reports rank it, and whether it is its task's baseline."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import math
import re
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

from kmbench.errors import UsageError
from kmbench.protocol import Implementation

ENTRY_POINT_GROUP = "kmbench.impls"
# Where the built-in rows live. The harness reaches it only through this name (discovery, never
# an import statement), so it stays a plugin: tests/test_import_graph.py holds the line.
BUILTIN_PACKAGE = "impls"


class Broken(Implementation):
    """Stands in for an implementation whose module failed to import."""

    def __init__(self, name: str, reason: str):
        self.name, self.label, self._reason = name, name, reason
        self.description = "could not be loaded"

    def available(self):
        return False, self._reason


def _declares_a_row(node: ast.stmt) -> bool:
    """A class whose own body sets `row_order`: a row says where it stands. A helper built on a
    row's machinery (the assignment ladder's floor kernel, kmbench-gpu-dask's per-shard worker)
    declares no place and is not a row."""
    return isinstance(node, ast.ClassDef) and any(
        isinstance(statement, ast.Assign) and any(isinstance(target, ast.Name) and target.id == "row_order"
                                                  for target in statement.targets)
        for statement in node.body)


def _names_a_row(text: str, names: set[str]) -> bool:
    """Whether an indented line (a class body) sets `name` to one of these literals: where a row
    called so is declared, seen without parsing the file (kmbench.KMeans's first fit)."""
    return any(re.search(rf"^[ \t]+name\s*=\s*[\"']{re.escape(name)}[\"']", text, re.MULTILINE) for name in names)


def _row_modules(named: set[str] | None = None) -> list[str]:
    """The built-in package's modules that define a row, found by reading the sources, so that
    modules of kernels only (Triton, Numba) are not imported to be looked at; a module that
    does not parse is returned, to fail as a row. `named`: only those that declare a row called
    by one of these names."""
    spec = importlib.util.find_spec(BUILTIN_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return []  # an installation without the built-in rows
    root = Path(list(spec.submodule_search_locations)[0])
    modules = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        if "row_order" not in text:  # most files: no need to parse them
            continue
        if named is not None:
            declares = _names_a_row(text, named)
        else:
            try:
                declares = any(map(_declares_a_row, ast.parse(text, str(path)).body))
            except SyntaxError:
                declares = True
        if declares:
            parts = path.relative_to(root).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            modules.append(".".join((BUILTIN_PACKAGE, *parts)))
    return modules


def _rows_of(module) -> list[type[Implementation]]:
    """The rows a module defines (not those it imports)."""
    return [cls for cls in vars(module).values() if isinstance(cls, type) and issubclass(cls, Implementation)
            and cls.__module__ == module.__name__ and cls.row_order is not None]


def _builtins(modules: list[str] | None = None) -> list[Implementation]:
    found: list[Implementation] = []
    for module_name in _row_modules() if modules is None else modules:
        try:
            rows = _rows_of(importlib.import_module(module_name))
        except Exception as exc:  # a broken module must not take the others down
            found.append(Broken(module_name, f"import failed: {exc}"))
            continue
        for row in rows:
            try:
                found.append(row())
            except Exception as exc:
                found.append(Broken(row.name, f"could not be constructed: {exc}"))
    return found


def discover() -> dict[str, Implementation]:
    """Every implementation by name, available or not, in the order the rows declare (rows
    that declare none keep the order found, after the others); a built-in wins a name clash."""
    found = _builtins()
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            found.append(entry.load()())
        except Exception as exc:
            found.append(Broken(entry.name, f"entry point failed to load: {exc}"))
    everything: dict[str, Implementation] = {}
    for impl in sorted(found, key=lambda impl: math.inf if impl.row_order is None else impl.row_order):
        everything.setdefault(impl.name, impl)
    return everything


def find(names: Iterable[str]) -> dict[str, Implementation]:
    """The implementations called by these names, importing only the built-in modules that
    declare them (discover() parses 25 and imports about 30: kmbench.KMeans's first fit cannot
    wait for that); a name none declares is looked for as discover() looks (an entry point's
    row, a name made at run time). A name nothing is called by is left out."""
    wanted = set(names)
    found: dict[str, Implementation] = {}
    for impl in sorted(_builtins(_row_modules(named=wanted)),
                       key=lambda impl: math.inf if impl.row_order is None else impl.row_order):
        if impl.name in wanted:
            found.setdefault(impl.name, impl)
    if wanted - found.keys():
        everything = discover()
        found.update({name: everything[name] for name in wanted - found.keys() if name in everything})
    return found


def ranked_in_reports(everything: dict[str, Implementation] | None = None) -> list[str]:
    """The rows reports list first, in their declared order."""
    everything = everything if everything is not None else discover()
    return [name for name, impl in everything.items() if impl.ranked_in_reports]


def baseline(task: str, everything: dict[str, Implementation] | None = None) -> str | None:
    """The row that declares itself its task's baseline, every other row's yardstick."""
    everything = everything if everything is not None else discover()
    return next((name for name, impl in everything.items() if impl.baseline and task in impl.tasks), None)


def select(names: str | None, everything: dict[str, Implementation] | None = None,
           task: str = "lloyd") -> list[Implementation]:
    """Parse `--impl a,b` for one task; no names: every implementation of that task. An
    unknown name, or one that serves another task, is a usage error that lists the choices."""
    everything = everything if everything is not None else discover()
    serving = {name: impl for name, impl in everything.items() if task in impl.tasks}
    if not names:
        return list(serving.values())
    chosen = []
    for name in (part.strip() for part in names.split(",")):
        if not name:
            continue
        if name not in everything:
            raise UsageError(f"Unknown implementation {name!r}; known: {', '.join(serving)}.")
        if name not in serving:
            raise UsageError(f"Implementation {name!r} serves the {', '.join(everything[name].tasks)} task, "
                             f"not {task}; {task} implementations: {', '.join(serving)}.")
        chosen.append(serving[name])
    if not chosen:
        raise UsageError("--impl names no implementation.")
    return chosen

"""The harness's layering, defined here and checked on every import statement under kmbench/
(those inside functions too: a lazy import is still a dependency).

    layer  packages and modules                what they are
    0      errors                              the user's errors, imported by everything
    1      data                                datasets, their cache, the record store
    2      protocol, judge                     Problem, Result, the Implementation interface,
                                               timing, the device, the oracle; the certifier
    3      registry, report, progress          finding rows; records to tables and plots;
                                               progress lines
    4      tasks                               each task's problem, judge and view (Lloyd too)
    5      plans                               suites and the plans that run them
    6      cli, estimator, __init__, __main__  the entry points: the commands, kmbench.KMeans

A module may import its own package and anything on a lower layer; packages on one layer may
import each other. protocol and judge share a layer because each needs the other today: the
certifier steps with protocol's float64 reference, and protocol's validate and runner call the
certifier. report sits below tasks and plans because records are what it reads: it needs
nothing of theirs, while each task renders its own tables with report's pieces.

Implementations are never imported: the registry finds the built-ins by reading the package
it names (`impls` today) and loading the modules that declare rows by name (importlib), which
is discovery, not an import statement; that package is the one no harness module may import. An implementation may import
kmbench, never the other way round.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kmbench import registry

ROOT = Path(__file__).resolve().parent.parent / "kmbench"

LAYERS = [
    {"errors"},
    {"data"},
    {"protocol", "judge"},
    {"registry", "report", "progress"},
    {"tasks"},
    {"plans"},
    {"cli", "estimator", "__init__", "__main__"},
]
LAYER = {unit: level for level, units in enumerate(LAYERS) for unit in units}
# Where the built-in rows live, read from the registry, so a renamed package stays covered.
IMPLEMENTATIONS = {"impls", registry.BUILTIN_PACKAGE}


def unit_of(path: Path, root: Path) -> str:
    """The package (protocol, cli, ...) or top-level module (registry, __init__) a file belongs to."""
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def imported(node: ast.AST, path: Path, root: Path) -> list[str]:
    """The dotted names an import statement brings in, relative imports made absolute."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # from . import x, from ..data import y: resolved against the file's package
        package = ("kmbench",) + path.relative_to(root).parent.parts
        base = ".".join(package[:len(package) - node.level + 1])
        module = f"{base}.{node.module}" if node.module else base
    else:
        module = node.module or ""
    # `from kmbench import registry` imports the module kmbench.registry; `from kmbench import
    # KMeans` an attribute of kmbench/__init__.py.
    return [f"{module}.{alias.name}" for alias in node.names] if module == "kmbench" else [module]


def target_of(name: str, root: Path) -> str | None:
    """The layer table's unit a dotted name lies in, "impls" for an implementation, None outside."""
    parts = name.split(".")
    if parts[0] in IMPLEMENTATIONS:
        return "impls"
    if parts[0] != "kmbench":
        return None
    if len(parts) == 1:
        return "__init__"
    placed = parts[1] in LAYER or (root / parts[1]).is_dir() or (root / f"{parts[1]}.py").is_file()
    return parts[1] if placed else "__init__"


def offenders(root: Path = ROOT) -> list[str]:
    """Every import under `root` that reaches an implementation or a layer above its own, and every
    package or module the table does not place, one line each."""
    found = []
    for path in sorted(root.rglob("*.py")):
        unit = unit_of(path, root)
        where = path.relative_to(root.parent)
        if unit not in LAYER:
            found.append(f"{where}: {unit} has no layer in tests/test_import_graph.py's table")
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for name in imported(node, path, root):
                target = target_of(name, root)
                if target == "impls":
                    found.append(f"{where}:{node.lineno} imports {name}, an implementation")
                elif target is not None and target != unit and LAYER.get(target, len(LAYERS)) > LAYER[unit]:
                    found.append(f"{where}:{node.lineno} imports {name}: {target} (layer "
                                 f"{LAYER.get(target, '?')}) is above {unit} (layer {LAYER[unit]})")
    return found


def test_the_harness_imports_no_implementation_and_nothing_above_its_layer():
    found = offenders()
    assert not found, "imports that break the layering:\n" + "\n".join(found)


def test_the_check_sees_imports_inside_functions_and_relative_ones(tmp_path):
    """The checker itself, on a small tree that breaks each rule once."""
    (tmp_path / "protocol").mkdir()
    (tmp_path / "protocol" / "a.py").write_text(
        "import numpy\nfrom kmbench.data import files\n\n"
        "def late():\n    from kmbench.report import export\n    import impls.gpu.cuda\n")
    (tmp_path / "protocol" / "b.py").write_text("from ..cli import app\nfrom . import a\n")
    (tmp_path / "newthing").mkdir()
    (tmp_path / "newthing" / "c.py").write_text("")
    found = offenders(tmp_path)
    assert len(found) == 4, found
    assert "protocol/a.py:5 imports kmbench.report: report (layer 3) is above protocol (layer 2)" in found[1]
    assert "protocol/a.py:6 imports impls.gpu.cuda, an implementation" in found[2]
    assert "protocol/b.py:1 imports kmbench.cli: cli (layer 6) is above protocol (layer 2)" in found[3]
    assert "newthing has no layer" in found[0]

"""The package's layout is its architecture (docs/ARCHITECTURE.md): each subpackage imports only from
its own layer and the layers below it, and no module imports itself back through others."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mosbench"

# Lowest first. A module may import from its own layer or any layer before it, never after.
LAYERS = (
    ("mosbench",),  # leaf helpers at the package's root: errors, cpulist, filenames, gitrepo, native, units
    ("mosbench.store",),
    ("mosbench.machine",),
    ("mosbench.launch",),
    ("mosbench.workloads",),
    ("mosbench.analysis",),
    ("mosbench.run",),
    ("mosbench.report",),
    ("mosbench.guest",),
    ("mosbench.web",),  # mosbench serve: the lab's pages and their JSON, over every layer below
    ("mosbench.cli", "mosbench.commands", "mosbench.__main__"),
    ("mosbench.testing",),  # rigs for tests and benchmarks: above everything, so nothing imports them
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Every mosbench module a file imports, at its top or inside a function (a lazy import is still one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("mosbench")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mosbench"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in known else node.module)
    return found & known


def layer_of(module: str) -> int:
    best = 0
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes if p != "mosbench"):
            best = i
    return best


def packages_above(module: str, known: set[str]) -> set[str]:
    """Importing a.b.c runs a's and a.b's __init__ first: those are edges too."""
    parts = module.split(".")
    return {".".join(parts[:n]) for n in range(1, len(parts))} & known


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    # A module's own packages too: importing mosbench.workloads.scale runs mosbench.workloads' __init__ first.
    return {m: {e for d in (*imports_of(p, known), m) for e in (d, *packages_above(d, known))} - {m}
            for m, p in mods.items()}


def test_no_upward_import() -> None:
    upward = [f"{m} (layer {LAYERS[layer_of(m)][0]}) imports {d} (layer {LAYERS[layer_of(d)][0]})"
              for m, deps in graph().items() for d in deps if layer_of(d) > layer_of(m)]
    assert not upward, "\n".join(upward)


def test_no_import_cycle() -> None:
    g = graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(g[m]):
            if state.get(d) == 1:
                cycles.append([*path[path.index(d):], d] if d in path else [m, d])
            elif d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m, [m])
    assert not cycles, "\n".join(" → ".join(c) for c in cycles)


def test_every_module_has_a_layer() -> None:
    root_modules = [m for m in modules() if m.count(".") == 1 and layer_of(m) == 0]
    # The root holds leaf helpers only: anything bigger belongs to a subpackage that names its part.
    assert sorted(root_modules) == ["mosbench.cpulist", "mosbench.errors", "mosbench.filenames", "mosbench.gitrepo",
                                    "mosbench.native", "mosbench.outfile", "mosbench.printable", "mosbench.procfs",
                                    "mosbench.units"]


@pytest.mark.parametrize("init", sorted(PACKAGE.rglob("__init__.py")), ids=lambda p: module_name(p))
def test_inits_only_say_what_they_hold(init: Path) -> None:
    """An __init__ that imports would make every import of a sibling run it: they hold a docstring, and the
    package's own its version, a constant, beside it."""
    body = ast.parse(init.read_text()).body
    if init.parent == PACKAGE:
        body = [n for n in body if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                                        and [ast.unparse(t) for t in n.targets] == ["__version__"])]
    assert all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body)

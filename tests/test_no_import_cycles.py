"""No import cycles among the project's own modules.

Every ``import`` and ``from ... import`` anywhere in a file counts: at the top, inside a
function, under ``if TYPE_CHECKING:`` (a dependency all the same). Relative imports are
resolved, and ``from pkg import name`` is an import of the module ``pkg.name`` when there is
one (else of ``pkg``). A package's ``__init__`` is the module ``pkg``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "ai", "server", "clients", "tools")
# The packages whose modules must form no cycle. server/ joins once it is restructured
# (issue 16); until then `python -m tests.test_no_import_cycles` lists every cycle.
CHECKED = ("engine", "ai", "server", "clients", "tools")


@dataclass(frozen=True)
class Edge:
    """``importer`` imports ``imported`` at ``line`` of its file."""

    importer: str
    imported: str
    line: int


def project_modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Module name -> file, for every .py file under the packages."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The project module ``name`` is, or lies in (its longest known prefix); None outside."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def imports(module: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """Every import of a project module that ``module``'s file makes, anywhere in it."""
    is_package = path.name == "__init__.py"
    edges = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                base_parts = package[:len(package) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        for target in targets:
            imported = _known(target, modules)
            if imported is not None and imported != module:
                edges.append(Edge(module, imported, node.lineno))
    first = {}  # one edge per imported module: its first import in the file
    for edge in sorted(edges, key=lambda e: e.line):
        first.setdefault(edge.imported, edge)
    return list(first.values())


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, list[Edge]]:
    modules = project_modules(root, packages)
    return {module: imports(module, path, modules) for module, path in modules.items()}


def tangles(graph: dict[str, list[Edge]]) -> list[set[str]]:
    """The groups of modules that import each other, directly or not (the strongly
    connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(start: str) -> None:  # Tarjan's algorithm, iteratively
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            edge = next(edges, None)
            if edge is not None:
                if edge.imported not in index:
                    index[edge.imported] = low[edge.imported] = len(index)
                    stack.append(edge.imported)
                    on_stack.add(edge.imported)
                    work.append((edge.imported, iter(graph[edge.imported])))
                elif edge.imported in on_stack:
                    low[node] = min(low[node], index[edge.imported])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return sorted(components, key=min)


def shortest_cycle(graph: dict[str, list[Edge]], component: set[str]) -> list[Edge]:
    """A shortest cycle through the first module of a tangle, as its imports."""
    start = min(component)
    paths: dict[str, list[Edge]] = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for edge in graph[node]:
                if edge.imported == start:
                    return [*paths[node], edge]
                if edge.imported in component and edge.imported not in paths:
                    paths[edge.imported] = [*paths[node], edge]
                    following.append(edge.imported)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a component always has one


def describe(graph: dict[str, list[Edge]], component: set[str]) -> str:
    """The tangle's modules, a cycle through them, and every import that ties them."""
    def step(edge: Edge) -> str:
        return f"{edge.importer} -> {edge.imported} (line {edge.line})"

    inside = [step(e) for m in sorted(component) for e in graph[m] if e.imported in component]
    return (f"{', '.join(sorted(component))}\n  a cycle: "
            + "; ".join(step(e) for e in shortest_cycle(graph, component))
            + "\n  every import among them:\n    " + "\n    ".join(inside))


def test_no_import_cycles_among_the_checked_packages() -> None:
    graph = import_graph(ROOT, PACKAGES)
    checked = {module: [e for e in edges if e.imported.split(".")[0] in CHECKED]
               for module, edges in graph.items() if module.split(".")[0] in CHECKED}
    assert {m.split(".")[0] for m in checked} == set(CHECKED) and any(checked.values())
    found = tangles(checked)
    assert not found, "import cycles:\n" + "\n".join(describe(checked, c) for c in found)


def test_every_kind_of_import_counts(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from pkg.a import A\n",
        "a.py": "def f():\n    from . import b\n",  # function-local, relative
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.sub.c\n",
        "sub/__init__.py": "",
        "sub/c.py": "from .. import a\n",  # relative, two levels: pkg.a
        "d.py": "from pkg import e\n",  # d -> e (a module), not d -> pkg
        "e.py": "import pkg.d\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = import_graph(tmp_path, ["pkg"])
    assert tangles(graph) == [{"pkg.a", "pkg.b", "pkg.sub.c"}, {"pkg.d", "pkg.e"}]
    assert [e.imported for e in shortest_cycle(graph, {"pkg.a", "pkg.b", "pkg.sub.c"})] == [
        "pkg.b", "pkg.sub.c", "pkg.a"]


if __name__ == "__main__":
    whole = import_graph(ROOT, PACKAGES)
    print("\n".join(describe(whole, c) for c in tangles(whole)) or "no import cycles")

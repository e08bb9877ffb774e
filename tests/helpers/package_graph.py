"""The package's modules and the import graph between them, read from the sources (no import)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"gpu_envs": ROOT / "gpu_envs", "gpu_envs.kernels": ROOT / "kernels",
           "gpu_envs.trainers": ROOT / "trainers"}  # fmt: skip


def package_modules() -> dict[str, Path]:
    """Every module of the installed package by dotted name (``gpu_envs.kernels`` and
    ``gpu_envs.trainers`` are mapped from their own top-level folders)."""
    modules = {}
    for prefix, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if prefix == "gpu_envs" and parts[0] in ("kernels", "trainers"):
                continue
            name = ".".join((prefix, *parts))
            modules[name.removesuffix(".__init__")] = path
    return modules


def _under_type_checking(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(name: str, source: str, is_package: bool = False) -> set[str]:
    """The package's modules that module ``name`` (of text ``source``) imports, anywhere in its
    body (type-only imports aside)."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = set()
    for node in ast.walk(tree):
        if _under_type_checking(node, parents):
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                package = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}"
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {module for module in found if module in MODULES and module != name}


MODULES = package_modules()
#: Module -> the package's modules it imports.
GRAPH = {
    name: imports_of(name, path.read_text("utf8"), path.name == "__init__.py")
    for name, path in MODULES.items()
}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles

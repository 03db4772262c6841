"""The package's own import graph: no cycle and no private name imported from another module.

Every module under trl_rankreward/ is parsed with `ast`, imports inside functions included (they
close cycles at run time as surely as top-level ones); `if TYPE_CHECKING:` blocks are left out, as
they never run. An edge goes from a module to each package module it imports (`from pkg import
mod` imports `pkg.mod`); a name imported from another module must not start with "_".
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "trl_rankreward"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE


def _module_names() -> dict[str, Path]:
    names = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


MODULES = _module_names()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node outside `if TYPE_CHECKING:` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _base(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    is_package = MODULES[module].name == "__init__.py"
    parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
    return ".".join(parts + ([node.module] if node.module else []))


def _graph() -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    private: list[tuple[str, str, str]] = []
    for module, path in MODULES.items():
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges[module] |= {alias.name for alias in node.names if alias.name in MODULES}
                continue
            base = _base(module, node)
            if not base.startswith(PACKAGE):
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in MODULES:
                    edges[module].add(target)
                    continue
                if base in MODULES:
                    edges[module].add(base)
                if alias.name.startswith("_") and not alias.name.startswith("__") and base != module:
                    private.append((module, base, alias.name))
    for module in edges:
        edges[module].discard(module)
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_checker_sees_cycles_and_relative_imports():
    # A three-module ring, and the module names the relative imports of real modules resolve to: a top-level
    # `from .backends.base import ...`, and `from .backends.openai_compatible import ...` inside `build_backend`
    # (both in judging/server_settings.py).
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]
    edges, _ = _graph()
    assert "trl_rankreward.judging.backends.base" in edges["trl_rankreward.judging.server_settings"]
    assert "trl_rankreward.judging.backends.openai_compatible" in edges["trl_rankreward.judging.server_settings"]


def test_no_import_cycle():
    edges, _ = _graph()
    cycles = [sorted(c) for c in _cycles(edges)]
    assert not cycles, f"import cycles (imports inside functions count): {cycles}"


def test_no_private_name_imported_across_modules():
    _, private = _graph()
    offenders = list(private)
    assert not offenders, f"(importer, module, private name): {offenders}"

"""Every package `__init__.py` that exports names lazily (`_EXPORTS` + `lazy_exports`) also imports
them under `if TYPE_CHECKING:`, so IDEs and type checkers see them, while a plain import stays lazy.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "trl_rankreward"
LAZY_INITS = sorted(p for p in PACKAGE.rglob("__init__.py") if "lazy_exports(" in p.read_text(encoding="utf-8"))


def module_name(init: Path) -> str:
    return ".".join(init.parent.relative_to(PACKAGE.parent).parts)


def exports(tree: ast.Module) -> dict[str, str]:
    """The `_EXPORTS` table: name -> relative module."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("no `_EXPORTS = {...}` at module level")


def type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """name -> relative module, of the `from ... import name` statements under `if TYPE_CHECKING:`."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
                for alias in statement.names:
                    found[alias.asname or alias.name] = "." * statement.level + (statement.module or "")
    return found


def test_lazy_packages_found():
    names = {module_name(p) for p in LAZY_INITS}
    assert {"trl_rankreward", "trl_rankreward.judging", "trl_rankreward.rewards", "trl_rankreward.data"} <= names


@pytest.mark.parametrize("init", LAZY_INITS, ids=module_name)
def test_type_checking_block_imports_every_export(init):
    tree = ast.parse(init.read_text(encoding="utf-8"))
    table, seen = exports(tree), type_checking_imports(tree)
    assert seen, f"{init}: no `if TYPE_CHECKING:` block importing the exported names"
    missing = sorted(set(table) - set(seen))
    extra = sorted(set(seen) - set(table))
    moved = sorted(name for name in set(table) & set(seen) if table[name] != seen[name])
    assert not (missing or extra or moved), f"{init}: missing {missing}, not exported {extra}, other module {moved}"


@pytest.mark.parametrize("init", LAZY_INITS, ids=module_name)
def test_every_export_resolves(init):
    package = importlib.import_module(module_name(init))
    table = exports(ast.parse(init.read_text(encoding="utf-8")))
    assert sorted(package.__all__) == sorted(table)
    for name, module in table.items():
        value = getattr(package, name)
        assert getattr(importlib.import_module(module, package.__name__), name) is value, name


def test_importing_a_package_imports_none_of_its_exports():
    # The TYPE_CHECKING imports never run: a fresh interpreter imports each package and no exported module.
    modules = {
        module_name(init): sorted(
            set(
                importlib.util.resolve_name(m, module_name(init))
                for m in exports(ast.parse(init.read_text(encoding="utf-8"))).values()
            )
        )
        for init in LAZY_INITS
    }
    code = (
        "import importlib, sys\n"
        f"for package, targets in {modules!r}.items():\n"
        "    importlib.import_module(package)\n"
        "    loaded = [t for t in targets if t in sys.modules]\n"
        "    print(package, loaded) if loaded else None\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"packages that import their exports eagerly: {out.stdout.strip()}"

"""Every package `__init__.py` that exports names lazily lists each name once, in a
`lazy_exports(__name__, {module: names})` call; a plain import of the package stays lazy.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from trl_rankreward._lazy import lazy_exports

PACKAGE = Path(__file__).resolve().parents[1] / "trl_rankreward"
LAZY_INITS = sorted(p for p in PACKAGE.rglob("__init__.py") if "lazy_exports(" in p.read_text(encoding="utf-8"))


def module_name(init: Path) -> str:
    return ".".join(init.parent.relative_to(PACKAGE.parent).parts)


def exports(tree: ast.Module) -> dict[str, str]:
    """name -> relative module, from the `lazy_exports(__name__, {...})` call's table."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_exports":
            table = ast.literal_eval(node.args[1])
            return {name: module for module, names in table.items() for name in names}
    raise AssertionError("no `lazy_exports(__name__, {...})` call")


def test_lazy_packages_found():
    names = {module_name(p) for p in LAZY_INITS}
    assert {"trl_rankreward", "trl_rankreward.judging", "trl_rankreward.rewards", "trl_rankreward.data"} <= names


@pytest.mark.parametrize("init", LAZY_INITS, ids=module_name)
def test_every_export_resolves(init):
    package = importlib.import_module(module_name(init))
    table = exports(ast.parse(init.read_text(encoding="utf-8")))
    assert sorted(package.__all__) == sorted(table)
    for name, module in table.items():
        value = getattr(package, name)
        assert getattr(importlib.import_module(module, package.__name__), name) is value, name


def test_importing_a_package_imports_none_of_its_exports():
    # A fresh interpreter imports each package and none of the modules it exports from.
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


def test_a_name_exported_from_two_modules_is_an_error():
    with pytest.raises(ValueError, match=r"pkg exports 'X' from both '\.a' and '\.b'; keep one"):
        lazy_exports("pkg", {".a": ("X", "Y"), ".b": ("X",)})


def test_an_unknown_name_is_an_attribute_error():
    getattr_, all_ = lazy_exports("trl_rankreward.judging", {".ledger": ("JudgeLedger",)})
    assert all_ == ["JudgeLedger"]
    with pytest.raises(AttributeError, match="module 'trl_rankreward.judging' has no attribute 'Nope'"):
        getattr_("Nope")

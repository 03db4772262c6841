"""Lazy attribute exports, so `import trl_rankreward.rewards` pulls in neither torch nor trl."""

from __future__ import annotations

import importlib


def lazy_exports(package: str, table: dict[str, str]):
    """Return a module `__getattr__` that imports `name` from `table[name]` on first use."""

    def __getattr__(name: str):
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module, package), name)

    return __getattr__

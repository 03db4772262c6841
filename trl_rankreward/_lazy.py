"""Lazy attribute exports (PEP 562), so `import trl_rankreward.rewards` pulls in neither torch nor trl:
`__getattr__, __all__ = lazy_exports(__name__, {".requests": ("Rubric", "JudgeFailure")})`."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, Sequence[str]]) -> tuple[Callable[[str], Any], list[str]]:
    """Return the package's `__getattr__` and `__all__` for `modules`: {relative module: names it exports}."""
    table: dict[str, str] = {}
    for module, names in modules.items():
        for name in names:
            if name in table:
                raise ValueError(f"{package} exports {name!r} from both {table[name]!r} and {module!r}; keep one")
            table[name] = module

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module, package), name)

    return __getattr__, sorted(table)

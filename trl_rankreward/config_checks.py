"""`CheckedConfig`: the one validation path of the package's config dataclasses.

A config of the package is a dataclass built from mixins (the judge servers' fields, the win rate's,
the critic's, a reward method's options) over a base such as TRL's `GRPOConfig`. Each class states
its own checks once, in a method `check_config(self)` of its own body that never calls `super()`.
`CheckedConfig.__post_init__`, the only `__post_init__` such a config runs, then runs

1. the base's own `__post_init__` (TRL's: the first class of the MRO outside this package that
   defines one), through `base_post_init`, which a mixin may replace (the critic's lets PPO run with
   one generation per prompt);
2. the check of every judge role among the bases (`ROLE.check` of `judging.server_settings`' mixins:
   it also writes the URLs back as a list);
3. every `check_config` in the body of any class of the MRO, the most basic class first.

A check cannot be skipped by accident: nothing depends on a `super()` chain, and a subclass that
defines `__post_init__`, or a base that would put its own `__post_init__` before this one, is a
`TypeError` when the class is created.
"""

from __future__ import annotations


class CheckedConfig:
    """Mixin of the package's configs: `check_config` of every class runs (module docstring)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__post_init__" in cls.__dict__:
            raise TypeError(
                f"{cls.__name__} defines __post_init__; state its checks in `check_config(self)` instead "
                "(CheckedConfig runs every class's, so none is skipped)"
            )
        if cls.__post_init__ is not CheckedConfig.__post_init__:
            owner = next(c for c in cls.__mro__ if "__post_init__" in c.__dict__)
            raise TypeError(
                f"{cls.__name__}: {owner.__name__}.__post_init__ comes before CheckedConfig's in the MRO and would "
                f"skip the checks; put {owner.__name__} after the package's config mixins among the bases"
            )

    def __post_init__(self):
        self.base_post_init()
        for role in _unique(c.__dict__["ROLE"] for c in reversed(type(self).__mro__) if "ROLE" in c.__dict__):
            role.check(self)
        for cls in reversed(type(self).__mro__):
            check = cls.__dict__.get("check_config")
            if check is not None:
                check(self)

    def base_post_init(self) -> None:
        """The base's own `__post_init__` (TRL's), if the config has a base outside this package."""
        for cls in type(self).__mro__:
            if "__post_init__" in cls.__dict__ and not cls.__module__.startswith(_PACKAGE):
                cls.__post_init__(self)
                return


_PACKAGE = __name__.split(".")[0] + "."


def _unique(items):
    seen = []
    for item in items:
        if all(item is not other for other in seen):
            seen.append(item)
    return seen

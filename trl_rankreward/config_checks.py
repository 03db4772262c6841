"""`CheckedConfig`: the one validation path of the package's config dataclasses (mixins over e.g. `GRPOConfig`).

Each class states its checks once, in a `check_config(self)` of its own body that never calls `super()`.
`CheckedConfig.__post_init__`, the only one such a config runs, runs the base's own `__post_init__` (TRL's,
via `base_post_init`, which a mixin may replace), then every judge role's `ROLE.check`, then every
`check_config` of the MRO, most basic first. None can be skipped by accident: a subclass defining
`__post_init__`, or a base whose `__post_init__` comes first, is a `TypeError` at class creation."""

from __future__ import annotations


class CheckedConfig:
    """Mixin of the package's configs: `check_config` of every class runs."""

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
        roles = {id(c.ROLE): c.ROLE for c in reversed(type(self).__mro__) if "ROLE" in c.__dict__}
        for role in roles.values():
            role.check(self)
        for cls in reversed(type(self).__mro__):
            check = cls.__dict__.get("check_config")
            if check is not None:
                check(self)

    def base_post_init(self) -> None:
        """The base's own `__post_init__` (TRL's), if the config has a base outside this package."""
        for cls in type(self).__mro__:
            if "__post_init__" in cls.__dict__ and not cls.__module__.startswith("trl_rankreward."):
                cls.__post_init__(self)
                return

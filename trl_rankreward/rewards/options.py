"""`MethodOptions` and `DataNeeds`: one options dataclass per reward method, the single source of its knobs.

The method reads its options from it (`options_class`); the method's trainer config
(`trainers.judge_reward.method_config(NAME)`) has the same fields, flat, checked by building this
dataclass from them. `data_needs()` tells the config and dataset checks what each row must be.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import Field, dataclass, field, fields
from typing import Any, TypeVar

OptionsT = TypeVar("OptionsT", bound="MethodOptions")


def option(default: Any, help: str, choices: Sequence[Any] | None = None) -> Any:
    """An option's dataclass field: its default, its help (the flag's and docs/config.md's text), its choices."""
    return field(default=default, metadata={"help": help} if choices is None else {"help": help, "choices": choices})


@dataclass(frozen=True)
class DataNeeds:
    """What a reward method needs from the training data, checked before the model loads: non-empty
    `rubrics`, at least `references` ranked references per row, `num_generations >= min_group_size`."""

    rubrics: bool = False
    references: int = 0
    min_group_size: int = 2
    group_size_why: str = "compares the rollouts of a group with each other"


@dataclass
class MethodOptions:
    """Options every group reward method has; subclasses add theirs. A field with `metadata["choices"]`
    must hold one of them (or None where its default is None)."""

    lambda_fmt: float = option(0.0, "Weight of the format reward added to each reward.")

    def __post_init__(self):
        if self.lambda_fmt < 0:
            raise ValueError(f"lambda_fmt must be >= 0, got {self.lambda_fmt}")
        for f in option_fields(type(self)):
            allowed = f.metadata.get("choices")
            value = getattr(self, f.name)
            if allowed is not None and value not in allowed and not (value is None and f.default is None):
                none = "None or " if f.default is None else ""
                raise ValueError(f"{f.name} must be {none}one of {list(allowed)}, got {value!r}")

    @classmethod
    def from_values(cls: type[OptionsT], values: Mapping[str, Any], *, source: str) -> OptionsT:
        """`cls(**values)`; a name that is not an option is one `ValueError` naming `source` and the valid names."""
        names = [f.name for f in option_fields(cls)]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(
                f"{source} sets {unknown}, which {options_class_of(cls).__name__} does not have; its options are: "
                f"{', '.join(names)}"
            )
        return options_class_of(cls)(**values)

    def data_needs(self) -> DataNeeds:
        """What this method, with these options, needs from each row (override where it needs more)."""
        return DataNeeds()


def check_int(name: str, value: Any, low: int, note: str = "") -> None:
    """Raise `ValueError` unless `value` is an integer (not a bool) >= `low`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}{note}, got {value!r}")


def options_class_of(cls: type) -> type[MethodOptions]:
    """`cls` itself, or for a trainer config inheriting options beside the TRL config, that options class."""
    for c in cls.__mro__:
        if c is MethodOptions or (
            issubclass(c, MethodOptions) and all(issubclass(b, MethodOptions) for b in c.__bases__)
        ):
            return c
    raise TypeError(f"{cls.__name__} holds no MethodOptions")


def option_fields(cls: type) -> tuple[Field, ...]:
    """The option fields of `cls` (an options class or a trainer config inheriting one), TRL's excluded."""
    return fields(options_class_of(cls))


def option_values(options: MethodOptions) -> dict[str, Any]:
    """`{name: value}` of every option of `options` (a trainer config: its option fields only)."""
    return {f.name: getattr(options, f.name) for f in option_fields(type(options))}

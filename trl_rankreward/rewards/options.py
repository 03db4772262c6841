"""`MethodOptions` and `DataNeeds`: one options dataclass per reward method, the single source of its knobs.

Each reward method module declares `XOptions(MethodOptions)`: its fields, defaults, help
texts and checks. The method class reads its options from it (`options_class`), its trainer
config inherits the same fields, and `reward_method=NAME` with `reward_method_kwargs` builds
the same dataclass, so both routes give the same method with the same defaults by
construction. `data_needs()` tells the dataset checks what each training row must carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields


@dataclass(frozen=True)
class DataNeeds:
    """What a reward method needs from the training data, checked before the model loads.

    `rubrics`: every row needs a non-empty `rubrics` list; `references`: the least number of
    ranked reference answers per row (0: none needed); `min_group_size`: the least
    `num_generations` the method can rank.
    """

    rubrics: bool = False
    references: int = 0
    min_group_size: int = 2


@dataclass
class MethodOptions:
    """Options every group reward method has; subclasses add theirs (see the module docstring).

    A field with `metadata["choices"]` must hold one of them (or None where its default is None).
    """

    lambda_fmt: float = field(default=0.0, metadata={"help": "Weight of the format reward added to each reward."})

    def __post_init__(self):
        if self.lambda_fmt < 0:
            raise ValueError(f"lambda_fmt must be >= 0, got {self.lambda_fmt}")
        for f in fields(self):
            allowed = f.metadata.get("choices")
            value = getattr(self, f.name)
            if allowed is not None and value not in allowed and not (value is None and f.default is None):
                none = "None or " if f.default is None else ""
                raise ValueError(f"{f.name} must be {none}one of {list(allowed)}, got {value!r}")

    def data_needs(self) -> DataNeeds:
        """What this method, with these options, needs from each row (override where it needs more)."""
        return DataNeeds()

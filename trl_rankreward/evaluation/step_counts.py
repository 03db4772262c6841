"""How much one optimizer step of a GRPO run judges, for the trainers' start-up block and `config_cost`.

Counting (TRL 1.16): an optimizer step trains on `per_device_train_batch_size x processes x
gradient_accumulation_steps` completions, G per query, each generation batch reused `num_iterations` times; so
it judges completions / (G x num_iterations) groups per step, and an epoch is `queries / queries_per_step` steps.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepCounts:
    completions: int  # trained on per optimizer step
    queries: float  # groups of G judged per optimizer step
    steps_per_epoch: float | None  # None: the number of training queries is not known


def step_counts(
    *,
    per_device_batch: int,
    processes: int,
    gradient_accumulation: int,
    num_generations: int,
    num_iterations: int,
    dataset_queries: int | None = None,
) -> StepCounts:
    """The counts of the module docstring; `dataset_queries`: training queries per epoch (None: unknown)."""
    completions = per_device_batch * processes * gradient_accumulation
    queries = completions / (num_generations * num_iterations)
    return StepCounts(completions, queries, dataset_queries / queries if dataset_queries else None)

"""What a run prints when it starts and when it resumes, so a user sees what it is doing.

`startup_message` is the block the main process prints before the first step: processes,
completions and queries per optimizer step (counted as `evaluation.step_counts` counts them for
a config's cost estimate), steps per epoch, the method and the judge. A method's judge calls per
step depend on its verdicts (RankBuffer's on where rollouts fall among the anchors), so the block
points to where they are counted instead of guessing. `resume_message` says what a resume
restored. Both are plain text from plain values; the trainers print them.
"""

from __future__ import annotations

from ..evaluation.step_counts import step_counts
from .reward_state import Restored


def startup_message(
    *,
    processes: int,
    per_device_batch: int,
    gradient_accumulation: int,
    num_generations: int,
    num_iterations: int,
    queries: int | None,
    max_steps: int,
    method: str,
    judge: str,
) -> str:
    """The start-up block (module docstring). `queries`: training queries per epoch (None: not known)."""
    counts = step_counts(per_device_batch=per_device_batch, processes=processes,
                         gradient_accumulation=gradient_accumulation, num_generations=num_generations,
                         num_iterations=num_iterations, dataset_queries=queries)  # fmt: skip
    completions, groups = counts.completions, counts.queries
    reuse = f", each batch trained on {num_iterations} times" if num_iterations > 1 else ""
    lines = [
        "trl-rankreward: training run",
        f"  processes:              {processes}",
        f"  completions per step:   {completions} ({per_device_batch} per device x {processes} processes x "
        f"{gradient_accumulation} accumulation)",
        f"  queries per step:       {_count(groups)} group{'' if groups == 1 else 's'} of G={num_generations} "
        f"judged{reuse}",
    ]
    if counts.steps_per_epoch is not None:
        lines.append(f"  steps per epoch:        {_count(counts.steps_per_epoch)} ({queries} queries); max_steps {max_steps}")
    else:
        lines.append(f"  max_steps:              {max_steps}")
    lines += [
        f"  reward method:          {method}",
        f"  judge:                  {judge}",
        "  judge calls per step:   on the console line at each log (estimate: trl-rankreward bench --config)",
    ]
    return "\n".join(lines)


def resume_message(restored: Restored, step: int, method: str) -> str:
    """What a resume restored: the checkpoint, the method's state, the judge totals, the neutral groups."""
    lines = [f"trl-rankreward: resumed from {restored.checkpoint} at step {step}"]
    if restored.method_state:
        stats = ", ".join(f"{key} {_count(value)}" for key, value in restored.method_summary.items() if value)
        state = stats or "restored (no statistics)"  # e.g. "buffer/count 4, buffer/size_mean 5.25"
        lines.append(f"  {method} state:  {state}")
    else:
        lines.append(f"  {method} state:  none in the checkpoint; started afresh")
    totals = restored.judge_totals
    if totals is not None:
        tokens = totals.get("prompt_tokens", 0) + totals.get("completion_tokens", 0)
        failed = sum(totals.get("failures", {}).values())
        lines.append(f"  judge totals:  {totals.get('calls', 0):,} calls, {tokens:,} tokens, {failed:,} failed; "
                     f"{restored.neutral_groups:,} neutral groups")  # fmt: skip
    else:
        lines.append("  judge totals:  none in the checkpoint; counted from 0")
    return "\n".join(lines)


def _count(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.2f}"

"""The per-step counts the trainers' start-up block and the config cost estimate share."""

from trl_rankreward.evaluation.step_counts import StepCounts, step_counts


def test_counts_per_step_and_per_epoch():
    # 4 per device x 8 processes x 2 accumulation = 64 completions; G=8 and 2 iterations: 64 / 16 = 4 queries
    # judged per step; 1000 queries / 4 = 250 steps per epoch.
    counts = step_counts(per_device_batch=4, processes=8, gradient_accumulation=2, num_generations=8,
                         num_iterations=2, dataset_queries=1000)  # fmt: skip
    assert counts == StepCounts(completions=64, queries=4.0, steps_per_epoch=250.0)
    # Without the dataset size there is no epoch length.
    assert step_counts(per_device_batch=4, processes=1, gradient_accumulation=1, num_generations=8,
                       num_iterations=1).steps_per_epoch is None  # fmt: skip

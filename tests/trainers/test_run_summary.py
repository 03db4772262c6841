"""trainers/reward_state.py: the start-up block and the resume message, from plain values."""

from trl_rankreward.trainers.reward_state import Restored, resume_message, startup_message


def test_startup_block_counts_per_step_and_per_epoch():
    text = startup_message(processes=8, per_device_batch=4, gradient_accumulation=4, num_generations=8,
                           num_iterations=1, queries=1000, max_steps=200, method="rank_buffer",
                           judge="LLMJudge(model='judge')")  # fmt: skip
    # 4 per device x 8 processes x 4 accumulation = 128 completions = 16 groups of 8 per step;
    # an epoch of 1,000 queries x 8 completions / 128 = 62.5 steps.
    assert "processes:              8" in text
    assert "completions per step:   128 (4 per device x 8 processes x 4 accumulation)" in text
    assert "queries per step:       16 groups of G=8 judged" in text
    assert "steps per epoch:        62.50 (1000 queries); max_steps 200" in text
    assert "judge:                  LLMJudge(model='judge')" in text
    assert text.endswith(
        "judge calls per step:   on the console line at each log (estimate: trl-rankreward bench --config)"
    )


def test_startup_block_with_reused_batches_and_one_process():
    text = startup_message(processes=1, per_device_batch=16, gradient_accumulation=1, num_generations=8,
                           num_iterations=2, queries=None, max_steps=40, method="pointwise", judge="j")  # fmt: skip
    # 16 completions = 2 groups, each generation batch trained on twice: 1 new group per step.
    assert "processes:              1" in text  # an `accelerate launch` that started one process shows here
    assert "queries per step:       1 group of G=8 judged, each batch trained on 2 times" in text
    assert "steps per epoch" not in text and "max_steps:              40" in text


def test_resume_message_says_what_was_restored():
    restored = Restored("out/checkpoint-10", True, {"buffer/count": 4.0, "buffer/size_mean": 10.75,
                                                    "buffer/anchors_llm": 0.0},
                        {"calls": 201, "prompt_tokens": 68000, "completion_tokens": 1072, "failures": {"timeout": 2}},
                        3)  # fmt: skip
    assert resume_message(restored, 10, "rank_buffer").splitlines() == [
        "trl-rankreward: resumed from out/checkpoint-10 at step 10",
        "  rank_buffer state:  buffer/count 4, buffer/size_mean 10.75",  # zero counts left out
        "  judge totals:  201 calls, 69,072 tokens, 2 failed; 3 neutral groups",  # 68,000 + 1,072 tokens
    ]
    fresh = resume_message(Restored("out/checkpoint-3", False), 3, "pointwise")
    assert "pointwise state:  none in the checkpoint; started afresh" in fresh
    assert "judge totals:  none in the checkpoint; counted from 0" in fresh

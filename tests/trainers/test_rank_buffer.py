"""RankBufferGRPOTrainer: config -> RankBufferReward, buffers in checkpoints, the embedded judge path."""

import json
import shutil
from functools import partial

import pytest

from tests.trainers.helpers import moved, snapshot, tiny_config, tiny_trainer
from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.rewards.base import RunContext
from trl_rankreward.rewards.rank_buffer import RankBufferOptions, RankBufferReward
from trl_rankreward.rewards.registry import make_reward_method
from trl_rankreward.trainers.judge_reward import METHOD_STATE_NAME, RankBufferGRPOConfig, RankBufferGRPOTrainer

#: the tiny dataset has 3 references per query; K0=2 keeps the best and the worst
config = partial(tiny_config, RankBufferGRPOConfig, k0=2)


def distinct_chars(query_id: str, text: str) -> float:
    """Deterministic latent quality: the number of distinct characters."""
    return float(len(set(text)))


def make_trainer(model_dir, dataset_path, args, judge="simulated"):
    if judge == "simulated":
        judge = SimulatedJudge(distinct_chars)  # noise=0: the same request always gets the same verdict
    return tiny_trainer(RankBufferGRPOTrainer, model_dir, dataset_path, args, judge=judge)


def test_rank_buffer_trains_and_logs_buffer_metrics(tiny_model_dir, tiny_dataset, tmp_path):
    trainer = make_trainer(tiny_model_dir, tiny_dataset, config(tmp_path / "out"))
    before = snapshot(trainer.model)
    trainer.train()
    assert moved(before, trainer.model)

    logs = [e for e in trainer.state.log_history if "judge/calls" in e]
    assert len(logs) == 3
    for key in ("judge/calls_total", "buffer/size_mean", "buffer/size_max", "buffer/anchors_references",
                "rank/coarse_position_mean", "reward/neutral_groups"):  # fmt: skip
        assert all(key in e for e in logs), key
    # references init with K0=2: step 1 scores 2 fresh queries, so each buffer starts with 2 reference anchors.
    assert logs[0]["buffer/anchors_references"] == 4 and logs[0]["buffer/count"] == 2
    assert all(0.0 <= e["rank/coarse_position_mean"] <= 1.0 for e in logs)
    assert (tmp_path / "out" / "anchors.sqlite").exists()
    assert trainer.reward_method.anchors("q0") or trainer.reward_method.anchors("q1")


def test_resume_restores_buffers_and_next_rewards(tiny_model_dir, tiny_dataset, tmp_path, caplog):
    full = make_trainer(tiny_model_dir, tiny_dataset, config(tmp_path / "full", save_strategy="steps", save_steps=2))
    full.train()
    saved = json.loads((tmp_path / "full" / "checkpoint-2" / METHOD_STATE_NAME).read_text())
    assert saved["schema"] == "trl_rankreward.method_state/1" and saved["method"] == "rank_buffer"
    assert "texts" not in saved["state"]  # SQLite store: the state holds keys, the checkpoint's anchors.sqlite texts

    # The checkpoint folder alone resumes: move it elsewhere and delete the run's own anchor store.
    checkpoint = tmp_path / "moved" / "checkpoint-2"
    shutil.copytree(tmp_path / "full" / "checkpoint-2", checkpoint)
    (tmp_path / "full" / "anchors.sqlite").unlink()
    resumed = make_trainer(tiny_model_dir, tiny_dataset, config(tmp_path / "resumed"))
    with caplog.at_level("WARNING"):
        resumed.train(resume_from_checkpoint=str(checkpoint))
    # It says what it does: the start-up block (1 process, 8 completions = 2 groups of G=4 per step, 4 queries
    # = 2 steps per epoch), then what the resume restored (4 query buffers after 2 steps of 2 fresh queries).
    assert "processes:              1" in caplog.text and "steps per epoch:        2 (4 queries)" in caplog.text
    assert f"resumed from {checkpoint} at step 2" in caplog.text and "buffer/count 4" in caplog.text
    assert f"judge totals:  {json.loads((checkpoint / 'judge_usage.json').read_text())['calls']:,} calls" in caplog.text

    # Step 3 (epoch 1, after a resume at the epoch boundary) generates from the restored weights,
    # RNG and data order, and is ranked against the restored buffers: same rewards, same buffers.
    assert resumed.reward_method.state_dict() == full.reward_method.state_dict()
    assert resumed.reward_method.export_buffers() == full.reward_method.export_buffers()  # every buffer, not totals
    keys = ("rewards/rank_buffer/mean", "rewards/rank_buffer/std", "rank/coarse_position_mean", "judge/calls_total")
    step3 = [[{k: e[k] for k in keys} for e in t.state.log_history if e.get("step") == 3 and "loss" in e]
             for t in (full, resumed)]  # fmt: skip
    assert len(step3[0]) == 1 and step3[1] == step3[0]


def test_embedded_judge_from_config_reads_references(tiny_model_dir, tiny_dataset, tmp_path):
    # No judge_base_urls and no judge=: the trainer builds EmbeddingJudge and hands it each query's references.
    trainer = make_trainer(tiny_model_dir, tiny_dataset, config(tmp_path / "out", max_steps=1), judge=None)
    trainer.train()
    judge = trainer.reward_method.judge
    assert type(judge).__name__ == "EmbeddingJudge"
    seen = [q for q in ("q0", "q1", "q2", "q3") if trainer.reward_method.anchors(q)]
    assert len(seen) == 2  # one step of 2 groups
    assert judge.references(seen[0])[0].startswith("Blue is a colour")
    assert [e for e in trainer.state.log_history if "judge/calls" in e][0]["judge/calls"] > 0


def test_config_checks_name_both_fields(tmp_path):
    with pytest.raises(ValueError, match="bootstrap.*k0=8.*num_generations=4"):
        config(tmp_path, buffer_init="bootstrap", k0=8)
    with pytest.raises(ValueError, match="buffer_manager='llm'.*buffer_variant='static'"):
        config(tmp_path, buffer_manager="llm", buffer_variant="static")
    with pytest.raises(ValueError, match="anchor_store_path.*anchor_store='memory'"):
        config(tmp_path, anchor_store="memory", anchor_store_path="a.sqlite")
    with pytest.raises(ValueError, match="reward_method='pointwise'"):
        config(tmp_path, reward_method="pointwise")
    with pytest.raises(ValueError, match="buffer_variant must be one of"):
        config(tmp_path, buffer_variant="nope")
    assert config(tmp_path).lambda_fmt == 0.2  # the paper's default (Section 4.1)


def test_the_config_builds_the_options_it_inherits(tmp_path):
    # The config's RankBuffer fields are RankBufferOptions's (inherited: one source of defaults), so a config
    # with k0=4 gives RankBufferOptions(k0=4), the SQLite store put in the output directory when no path is set.
    def built_options(args):
        run = RunContext(output_dir=args.output_dir)
        return RankBufferReward.for_run(SimulatedJudge({}), args.method_options(), run).options

    sqlite = built_options(config(tmp_path / "out", k0=4))
    assert sqlite == RankBufferOptions(k0=4, anchor_store_path=str(tmp_path / "out" / "anchors.sqlite"))
    assert built_options(config(tmp_path, k0=4, anchor_store="memory")) == RankBufferOptions(
        k0=4, anchor_store="memory"
    )
    # The method built by name (the registry) reads the same dataclass.
    built = make_reward_method("rank_buffer", SimulatedJudge({}), k0=4, anchor_store="memory")
    assert built.options == RankBufferOptions(k0=4, anchor_store="memory")


def test_evaluation_judges_against_the_buffers_but_leaves_them_unchanged(tiny_model_dir, tiny_dataset, tmp_path):
    # Train 3 steps (2 of the 4 queries per step, so every query has a buffer by the end), then evaluate on
    # all 4 queries: the eval groups are placed among the existing anchors (judge calls are made and logged),
    # yet RankBufferReward.frozen_state() must leave every buffer as training left it.
    args = config(tmp_path / "out", per_device_eval_batch_size=8)
    trainer = make_trainer(tiny_model_dir, tiny_dataset, args)
    trainer.train()
    before = json.dumps([trainer.reward_method.state_dict(), trainer.reward_method.export_buffers()], sort_keys=True)
    metrics = trainer.evaluate(eval_dataset=trainer.train_dataset)
    assert metrics["eval_judge/calls"] > 0 and "eval_rank/coarse_position_mean" in metrics
    after = [trainer.reward_method.state_dict(), trainer.reward_method.export_buffers()]
    assert json.dumps(after, sort_keys=True) == before

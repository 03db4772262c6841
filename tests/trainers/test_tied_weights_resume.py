"""Resuming a model with tied embeddings (the tiny Qwen3, Qwen3-0.6B ...) says nothing about the tied key."""

from torch.nn.modules.module import _IncompatibleKeys
from transformers import trainer as transformers_trainer

from tests.trainers.test_ppo import low_token_share, ppo_config, prompts
from trl_rankreward.trainers.base import CriticPPOTrainer


def test_the_tied_lm_head_is_expected_missing_and_other_keys_are_still_reported(tiny_model_dir, tmp_path, monkeypatch):
    trainer = CriticPPOTrainer(tiny_model_dir, reward_funcs=low_token_share, args=ppo_config(tmp_path),
                               train_dataset=prompts())  # fmt: skip
    assert trainer.model.config.tie_word_embeddings  # lm_head.weight is saved once, as model.embed_tokens.weight
    warned = []
    monkeypatch.setattr(transformers_trainer.logger, "warning", warned.append)
    trainer._issue_warnings_after_load(_IncompatibleKeys(missing_keys=["lm_head.weight"], unexpected_keys=[]))
    assert warned == []
    trainer._issue_warnings_after_load(
        _IncompatibleKeys(missing_keys=["lm_head.weight", "model.norm.weight"], unexpected_keys=[])
    )
    assert len(warned) == 1 and "['model.norm.weight']" in warned[0] and "lm_head" not in warned[0]

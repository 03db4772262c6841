"""PPO's rollout and update path in the trainer, against numbers worked out by hand.

`test_advantages.py` checks the pure math; these check that the trainer feeds it right: which
token positions the values come from, the sign of the KL penalty, gamma and lambda in their
places, tool tokens and unscored rows, the order of the policy's and the critic's backward,
values and returns fixed across PPO's updates on one rollout, and activation checkpointing.
"""

import pytest
import torch

from tests.trainers.test_ppo import low_token_share, ppo_config, prompts
from trl_rankreward.trainers.base import CriticPPOTrainer

NAN = float("nan")


class PositionCritic:
    """A critic engine whose value at sequence position i is 0.1 * i: a one-token shift shows."""

    def values(self, ids, mask):
        return 0.1 * torch.arange(ids.size(1), dtype=torch.float32).expand(ids.size(0), -1)


@pytest.fixture
def trainer(tiny_model_dir, tmp_path):
    args = ppo_config(tmp_path, gamma=0.9, lam=0.5, kl_in_reward_coef=0.1, whiten_advantages=False)
    trainer = CriticPPOTrainer(tiny_model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())
    trainer._ppo.engine = PositionCritic()
    trainer.model.train()  # as during training: metrics go to "train"
    return trainer


def test_rollout_advantages_returns_and_value_mask_worked_by_hand(trainer):
    # 3 completions after a 3-token prompt (completion token t sits at sequence position 3 + t;
    # its value is that of the state before it: position 2 + t -> V_t = 0.2 + 0.1 t).
    # row 0: 3 tokens + padding, score 2, KL [0.5, -1, 0]
    # row 1: 4 tokens, tokens 1-2 are a tool's output (tool_mask 0), score 1, KL 5 on the tool tokens only
    # row 2: no reward function scored it (NaN)
    output = {
        "prompt_ids": torch.ones(3, 3, dtype=torch.long),
        "prompt_mask": torch.ones(3, 3, dtype=torch.long),
        "completion_ids": torch.ones(3, 4, dtype=torch.long),
        "completion_mask": torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]]),
        "tool_mask": torch.tensor([[1, 1, 1, 1], [1, 0, 0, 1], [1, 1, 1, 1]]),
        "old_per_token_logps": torch.tensor([[-1.0, -2.0, -0.5, 0.0], [-1.0, 3.0, 3.0, -1.0], [0.0] * 4]),
        "ref_per_token_logps": torch.tensor([[-1.5, -1.0, -0.5, 0.0], [-1.0, -2.0, -2.0, -1.0], [0.0] * 4]),
    }
    metrics = trainer._ppo.replace_advantages(output, torch.tensor([[2.0], [1.0], [NAN]]))
    # row 0, gamma 0.9, lam 0.5, V = [0.2, 0.3, 0.4], rewards = [-0.1*0.5, -0.1*(-1), 2 - 0] = [-0.05, 0.1, 2]:
    #   t=2: delta = 2 + 0 - 0.4 = 1.6                      A = 1.6
    #   t=1: delta = 0.1 + 0.9*0.4 - 0.3 = 0.16             A = 0.16 + 0.45*1.6 = 0.88
    #   t=0: delta = -0.05 + 0.9*0.3 - 0.2 = 0.02           A = 0.02 + 0.45*0.88 = 0.416
    #   returns = A + V = [0.616, 1.18, 2.0]
    # row 1, V = [0.2, -, -, 0.5], rewards [0, -, -, 1] (KL 0 on its own tokens; the tool tokens' KL ignored):
    #   t=3: delta = 1 - 0.5 = 0.5                          A = 0.5
    #   t=0: next generated token is t=3: delta = 0 + 0.9*0.5 - 0.2 = 0.25, A = 0.25 + 0.45*0.5 = 0.475
    #   returns = [0.675, 0, 0, 1.0]
    expected_advantages = torch.tensor([[0.416, 0.88, 1.6, 0.0], [0.475, 0.0, 0.0, 0.5], [0.0] * 4])
    expected_returns = torch.tensor([[0.616, 1.18, 2.0, 0.0], [0.675, 0.0, 0.0, 1.0], [0.0] * 4])
    torch.testing.assert_close(output["advantages"], expected_advantages)
    torch.testing.assert_close(output["returns"], expected_returns)
    torch.testing.assert_close(
        output["old_values"], torch.tensor([[0.2, 0.3, 0.4, 0.0], [0.2, 0.0, 0.0, 0.5], [0.2, 0.3, 0.0, 0.0]])
    )
    expected_mask = torch.tensor([[1.0, 1, 1, 0], [1, 0, 0, 1], [0, 0, 0, 0]])
    torch.testing.assert_close(output["value_mask"], expected_mask)
    # the mean KL over the value mask's 5 tokens: (0.5 - 1 + 0 + 0 + 0) / 5
    assert metrics["ppo/kl_in_reward"] == pytest.approx(-0.1)


def test_value_loss_reads_the_values_at_the_completion_states_and_only_the_value_mask(trainer):
    # New values (PositionCritic): [0.2, 0.3] for a 2-token completion after a 3-token prompt.
    inputs = {
        "prompt_ids": torch.ones(2, 3, dtype=torch.long),
        "prompt_mask": torch.ones(2, 3, dtype=torch.long),
        "completion_ids": torch.ones(2, 2, dtype=torch.long),
        "completion_mask": torch.ones(2, 2, dtype=torch.long),
        "old_values": torch.tensor([[0.2, 0.3], [0.0, 0.0]]),
        "returns": torch.tensor([[1.2, 0.3], [50.0, 50.0]]),
        "value_mask": torch.tensor([[1.0, 1.0], [0.0, 0.0]]),  # row 1: unscored, its returns must not count
    }
    loss, metrics = trainer._ppo.value_loss(inputs)
    # token 0: V = 0.2 (= V_old, clip changes nothing): (0.2 - 1.2)^2 = 1; token 1: (0.3 - 0.3)^2 = 0
    # loss = 0.5 * mean(1, 0) = 0.25. Values read one position late ([0.3, 0.4]) would give
    # 0.5 * mean(max((0.3-1.2)^2, (0.3-1.2)^2), max((0.4-0.3)^2, ...)) = 0.5 * (0.81 + 0.01) / 2 = 0.205.
    assert loss.item() == pytest.approx(0.25)
    # One process: the logged loss is this one; no token's value moved past the clip (V = V_old).
    assert metrics == {"ppo/value_loss": pytest.approx(0.25), "ppo/value_clip_frac": 0.0}


def test_the_critic_trains_after_the_policy_backward(tiny_model_dir, tmp_path):
    """Peak activation memory is max(policy, critic): the critic's graph is built only once the policy's is freed."""
    trainer = CriticPPOTrainer(tiny_model_dir, reward_funcs=low_token_share, train_dataset=prompts(),
                               args=ppo_config(tmp_path, max_steps=1))  # fmt: skip
    events = []
    trainer.model.get_input_embeddings().register_full_backward_hook(lambda *_: events.append("policy backward"))
    trainer.critic.register_forward_hook(
        lambda *_: events.append("critic forward") if torch.is_grad_enabled() else None
    )
    trainer.train()
    # one micro-batch: the critic's forward with gradients (its training pass) follows the policy's backward
    assert events == ["policy backward", "critic forward"]


def test_ppo_updates_on_one_rollout_keep_its_values_and_returns(tiny_model_dir, tmp_path):
    # steps_per_generation 2 x num_iterations 2: each rollout of 16 completions feeds 4 optimizer steps
    # on slices of 8: slice A, slice B, then A and B again. 8 steps: 2 rollouts (the second one's values
    # are no longer the zero-initialized head's). Values and returns are computed once per rollout and
    # reused; the critic's own values move between the updates, so the value clip has something to clip.
    args = ppo_config(tmp_path, max_steps=8, steps_per_generation=2, num_iterations=2, critic_learning_rate=0.05)
    trainer = CriticPPOTrainer(tiny_model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())
    rollouts, seen = [], []
    ppo = trainer._ppo
    replace, value_loss = ppo.replace_advantages, ppo.value_loss
    ppo.replace_advantages = lambda output, columns: (rollouts.append(1), replace(output, columns))[1]
    ppo.value_loss = lambda inputs: (seen.append({k: inputs[k].clone() for k in ("old_values", "returns")}),
                                     value_loss(inputs))[1]  # fmt: skip
    trainer.train()
    assert len(rollouts) == 2 and len(seen) == 8
    for first, again in ((4, 6), (5, 7)):  # the same slice of the second rollout in PPO's first and second epoch
        for key in ("old_values", "returns"):
            torch.testing.assert_close(seen[first][key], seen[again][key])
    assert seen[4]["old_values"].abs().sum() > 0 and not torch.equal(seen[4]["old_values"], seen[5]["old_values"])
    clip = [e["ppo/value_clip_frac"] for e in trainer.state.log_history if "ppo/value_clip_frac" in e]
    assert clip[0] == 0.0 and clip[4] == 0.0  # each rollout's first update starts at the old values
    assert max(clip[1:4]) > 0.0 and max(clip[5:]) > 0.0


def test_activation_checkpointing_reaches_the_critic_and_it_still_learns(tiny_model_dir, tmp_path):
    args = ppo_config(tmp_path, max_steps=2, activation_checkpointing=True)
    trainer = CriticPPOTrainer(tiny_model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())
    backbone = trainer.critic.backbone
    assert backbone.is_gradient_checkpointing and backbone.training  # in eval mode HF skips the checkpointing
    before = {n: p.detach().clone() for n, p in backbone.named_parameters()}
    recomputed = []
    inside = backbone.layers[0].mlp  # inside the checkpointed forward, so its hook fires again on recomputation
    inside.register_forward_pre_hook(lambda *_: recomputed.append(torch.is_grad_enabled()))
    trainer.train()
    moved = [n for n, p in backbone.named_parameters() if not torch.equal(before[n], p.detach())]
    assert any(n.startswith("layers.0.") for n in moved)  # gradients flow through the checkpointed layers
    # per training step the first layer runs twice with gradients on: forward, then its recomputation
    # in the backward (rollouts run under no_grad)
    assert recomputed.count(True) == 2 * 2

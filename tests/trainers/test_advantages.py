"""PPO's advantage and value math (`trainers.ppo`) on hand-computed examples."""

import math

import pytest
import torch

from trl_rankreward.trainers.ppo import (
    clipped_value_loss,
    explained_variance,
    generalized_advantages,
    global_mean_std,
    masked_whiten,
    token_rewards,
)


def test_token_rewards_put_the_score_on_the_last_real_token_and_the_kl_on_every_token():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    kl = torch.tensor([[0.1, 0.2, 0.3, 9.0], [0.5, 9.0, 9.0, 9.0], [9.0, 9.0, 9.0, 9.0]])
    rewards = token_rewards(torch.tensor([1.0, -2.0, 5.0]), mask, kl, kl_coef=0.5)
    # row 0: -0.5*kl on 3 real tokens, +1 on token 2: [-0.05, -0.1, 1 - 0.15, 0]
    # row 1: one token: -2 - 0.25; row 2: no real token, nothing (its score 5 is dropped)
    expected = torch.tensor([[-0.05, -0.1, 0.85, 0.0], [-2.25, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(rewards, expected)


def test_gae_matches_the_recursion_worked_by_hand():
    # One completion of 3 real tokens and one padding token; reward 1 on the last real token.
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0]])
    values = torch.tensor([[0.5, 0.2, 0.4, 7.0]])  # 7.0 sits on padding: must be ignored
    mask = torch.tensor([[1, 1, 1, 0]])
    gamma, lam = 0.9, 0.8
    # delta_2 = 1 + 0.9*0 - 0.4 = 0.6                  A_2 = 0.6
    # delta_1 = 0 + 0.9*0.4 - 0.2 = 0.16               A_1 = 0.16 + 0.72*0.6 = 0.592
    # delta_0 = 0 + 0.9*0.2 - 0.5 = -0.32              A_0 = -0.32 + 0.72*0.592 = 0.10624
    advantages, returns = generalized_advantages(rewards, values, mask, gamma, lam)
    torch.testing.assert_close(advantages, torch.tensor([[0.10624, 0.592, 0.6, 0.0]]))
    # returns = A + V: [0.60624, 0.792, 1.0, 0]
    torch.testing.assert_close(returns, torch.tensor([[0.60624, 0.792, 1.0, 0.0]]))


def test_gae_with_gamma_and_lambda_one_is_the_reward_to_go_minus_the_value():
    rewards = torch.tensor([[0.1, -0.2, 2.0]])
    values = torch.tensor([[0.3, 0.1, -0.4]])
    advantages, returns = generalized_advantages(rewards, values, torch.ones(1, 3), 1.0, 1.0)
    # reward-to-go: [1.9, 1.8, 2.0]; advantages = rtg - V = [1.6, 1.7, 2.4]; returns = rtg
    torch.testing.assert_close(advantages, torch.tensor([[1.6, 1.7, 2.4]]))
    torch.testing.assert_close(returns, torch.tensor([[1.9, 1.8, 2.0]]))


def test_clipped_value_loss_takes_the_larger_error_and_counts_clipped_tokens():
    old = torch.tensor([[0.0, 0.0, 5.0]])
    new = torch.tensor([[1.0, 0.1, 0.0]])
    returns = torch.tensor([[1.0, 1.0, 0.0]])
    mask = torch.tensor([[1, 1, 0]])
    # token 0: unclipped (1-1)^2 = 0, clipped V = 0.2 -> (0.2-1)^2 = 0.64 -> 0.64 (clipped larger)
    # token 1: unclipped (0.1-1)^2 = 0.81, clipped V = 0.1 -> 0.81 -> 0.81 (equal: not counted)
    # loss = 0.5 * mean(0.64, 0.81) = 0.3625; clip fraction 1/2
    loss, fraction = clipped_value_loss(new, old, returns, mask, clip=0.2)
    assert loss.item() == pytest.approx(0.3625)
    assert fraction.item() == pytest.approx(0.5)


def test_whitening_and_explained_variance():
    x = torch.tensor([[1.0, 3.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    # mean 2, std 1 over the real tokens -> [-1, 1, 0]
    torch.testing.assert_close(
        masked_whiten(x, mask, torch.tensor(2.0), torch.tensor(1.0)), torch.tensor([[-1.0, 1.0, 0.0]])
    )
    returns = torch.tensor([[0.0, 2.0, 4.0]])
    ones = torch.ones(1, 3)
    assert explained_variance(returns, returns, ones) == pytest.approx(1.0)
    # predicting the mean: residual variance = return variance -> 0
    assert explained_variance(torch.full((1, 3), 2.0), returns, ones) == pytest.approx(0.0)
    assert math.isnan(explained_variance(ones, ones, ones))


def _two_process_statistics(rank: int, init_file: str, results) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)

    def reduce_sum(t):
        t = t.clone()
        dist.all_reduce(t)
        return t

    x, mask, values = TWO_RANKS[rank]
    mean, std = global_mean_std(x, mask, reduce_sum)
    results[rank] = (mean.item(), std.item(), masked_whiten(x, mask, mean, std).tolist(),
                     explained_variance(values, x, mask, reduce_sum))  # fmt: skip
    dist.destroy_process_group()


# rank 0 holds real tokens [1, 3] (9 on padding), rank 1 holds [5, 7, 9] (100 on padding)
TWO_RANKS = [
    (torch.tensor([[1.0, 3.0, 9.0]]), torch.tensor([[1.0, 1.0, 0.0]]), torch.tensor([[1.0, 5.0, 0.0]])),
    (
        torch.tensor([[5.0, 7.0, 9.0, 100.0]]),
        torch.tensor([[1.0, 1.0, 1.0, 0.0]]),
        torch.tensor([[5.0, 7.0, 9.0, 0.0]]),
    ),
]


def test_whitening_statistics_are_global_over_processes_and_skip_padding(tmp_path):
    import torch.multiprocessing as mp

    results = mp.Manager().dict()
    mp.spawn(_two_process_statistics, args=(str(tmp_path / "init"), results), nprocs=2)
    # the 5 real tokens of both ranks: 1, 3, 5, 7, 9 -> mean 5, population variance (16+4+0+4+16)/5 = 8
    # (rank-local statistics would be mean 2 / std 1 and mean 7 / std sqrt(8/3); padding included, other numbers)
    std = 8**0.5
    for rank in (0, 1):
        mean, got_std, whitened, variance = results[rank]
        assert mean == pytest.approx(5.0) and got_std == pytest.approx(std)
        # explained variance: residuals R - V are [0, -2] and [0, 0, 0]: mean -0.4, variance (0.16*4 + 2.56)/5
        # = 0.64 -> 1 - 0.64 / 8 = 0.92
        assert variance == pytest.approx(0.92)
    assert results[0][2][0] == pytest.approx([-4 / std, -2 / std, 0.0])
    assert results[1][2][0] == pytest.approx([0.0, 2 / std, 4 / std, 0.0])

"""PPO's advantage and value math on completion tokens: pure functions on (B, T) tensors.

Shapes: B completions, T completion tokens (right-padded); `mask` is 1 on the tokens the policy
generated and 0 on padding and on tool-result tokens inside a completion (TRL's `tool_mask`).
`values[b, t]` is the critic's estimate of the return from token t on (the state before
completion token t is generated); a completion's scalar reward arrives at its last masked-in
token (the classic RLHF setting: Ouyang et al. 2022; Stiennon et al. 2020).

Generalized Advantage Estimation (Schulman et al., 2016, arXiv:1506.02438), per token, over
the masked-in tokens only (a tool result is skipped: the next token of the recursion is the
next one the policy generated, as verl does):

    delta_t = r_t + gamma * V_next - V_t           (V after the last real token is 0)
    A_t     = delta_t + gamma * lam * A_next
    R_t     = A_t + V_t                            (the critic's regression target)

With gamma = lam = 1, A_t = (reward-to-go) - V_t and R_t is the reward-to-go: the score minus
the KL penalties still ahead. With lam < 1 and a critic that still predicts about 0, token t of
a completion of length L gets about lam^(L-1-t) of the score.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

#: sums a 1-D tensor over every process (the identity on one process)
ReduceSum = Callable[[torch.Tensor], torch.Tensor]


def token_rewards(
    scores: torch.Tensor, mask: torch.Tensor, kl: torch.Tensor | None = None, kl_coef: float = 0.0
) -> torch.Tensor:
    """Per-token rewards (B, T): `scores` (B,) at each completion's last masked-in token, minus
    `kl_coef * kl` on every masked-in token (the per-token KL penalty of RLHF PPO, folded into
    the reward). A completion with no masked-in token gets nothing."""
    mask = mask.float()
    rewards = torch.zeros_like(mask)
    positions = torch.arange(mask.size(1), device=mask.device).expand_as(mask)
    last = (positions * mask).argmax(dim=1)  # the highest masked-in position of each row
    rows = mask.sum(dim=1) > 0
    rewards[rows, last[rows]] = scores[rows].float()
    if kl is not None and kl_coef:
        rewards = rewards - kl_coef * kl.float() * mask
    return rewards


def generalized_advantages(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), both (B, T) and zero where `mask` is 0; see the module docstring.

    Masked-out tokens are stepped over: the value and the advantage carried backwards pass
    through them unchanged, so padding after a completion means episode end (V = 0) and a tool
    result in the middle links the tokens on either side of it.
    """
    mask = mask.float()
    values = values.float() * mask
    rewards = rewards.float() * mask
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(running)
    for t in reversed(range(rewards.size(1))):
        real = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = real * (delta + gamma * lam * running) + (1 - real) * running
        next_value = real * values[:, t] + (1 - real) * next_value
        advantages[:, t] = running * real
    return advantages, (advantages + values) * mask


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def global_mean_std(x: torch.Tensor, mask: torch.Tensor, reduce_sum: ReduceSum) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and (population) std of `x` over the masked-in tokens of every process: one sum of
    (sum, sum of squares, count) across processes, so every rank gets the same two numbers."""
    mask = mask.float()
    sums = reduce_sum(torch.stack([(x * mask).sum(), (x * x * mask).sum(), mask.sum()]).double())
    total, square, count = sums.tolist()
    count = max(count, 1.0)
    mean = total / count
    variance = max(square / count - mean * mean, 0.0)
    return torch.tensor(mean, device=x.device), torch.tensor(variance**0.5, device=x.device)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """(x - mean) / std on masked-in tokens, 0 elsewhere. `mean` and `std` are given (from
    `global_mean_std`) so that all ranks whiten alike."""
    return (x - mean) / (std + 1e-8) * mask


def clipped_value_loss(
    new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, clip: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, clip fraction): PPO's clipped value loss, `0.5 * max((V - R)^2, (V_clip - R)^2)`
    averaged over masked-in tokens, where `V_clip = V_old + clamp(V - V_old, -clip, clip)`; the
    clip fraction is the share of masked-in tokens where the clipped term is the larger one."""
    clipped = old_values + (new_values - old_values).clamp(-clip, clip)
    unclipped_loss = (new_values - returns) ** 2
    clipped_loss = (clipped - returns) ** 2
    loss = 0.5 * masked_mean(torch.maximum(unclipped_loss, clipped_loss), mask)
    fraction = masked_mean((clipped_loss > unclipped_loss).float(), mask)
    return loss, fraction


def explained_variance(
    values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, reduce_sum: ReduceSum = lambda t: t
) -> float:
    """1 - Var(R - V) / Var(R) over the masked-in tokens of every process (`reduce_sum`): 1 is a
    perfect critic, 0 one that predicts the mean, below 0 worse than that; NaN when the returns
    do not vary."""
    _, returns_std = global_mean_std(returns, mask, reduce_sum)
    _, residual_std = global_mean_std(returns - values, mask, reduce_sum)
    if returns_std.item() == 0:
        return float("nan")
    return float(1.0 - residual_std**2 / returns_std**2)

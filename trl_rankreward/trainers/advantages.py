"""PPO's advantage and value math on completion tokens: pure functions on (B, T) tensors.

Shapes: B completions, T completion tokens (right-padded); `mask` is 1 on real tokens.
`values[b, t]` is the critic's estimate of the return from token t on (the state before
completion token t is generated); a completion's scalar reward arrives at its last real
token (the classic RLHF setting: Ouyang et al. 2022; Stiennon et al. 2020).

Generalized Advantage Estimation (Schulman et al., 2016, arXiv:1506.02438), per token:

    delta_t = r_t + gamma * V_{t+1} - V_t          (V after the last real token is 0)
    A_t     = delta_t + gamma * lam * A_{t+1}
    R_t     = A_t + V_t                            (the critic's regression target)
"""

from __future__ import annotations

import torch


def token_rewards(
    scores: torch.Tensor, mask: torch.Tensor, kl: torch.Tensor | None = None, kl_coef: float = 0.0
) -> torch.Tensor:
    """Per-token rewards (B, T): `scores` (B,) at each completion's last real token, minus
    `kl_coef * kl` on every real token (the per-token KL penalty of RLHF PPO, folded into the
    reward). A completion with no real token gets nothing."""
    rewards = torch.zeros_like(mask, dtype=torch.float32)
    lengths = mask.sum(dim=1).long()
    has_tokens = lengths > 0
    rows = torch.arange(mask.size(0), device=mask.device)[has_tokens]
    rewards[rows, lengths[has_tokens] - 1] = scores[has_tokens].float()
    if kl is not None and kl_coef:
        rewards = rewards - kl_coef * kl.float() * mask
    return rewards


def generalized_advantages(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), both (B, T) and zero on padding; see the module docstring.

    Padding is assumed to come after the real tokens of a row (right padding), so the value
    following a completion's last token is a padding position, taken as 0 (episode end).
    """
    mask = mask.float()
    values = values.float() * mask
    rewards = rewards.float() * mask
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.size(1))):
        next_value = values[:, t + 1] if t + 1 < rewards.size(1) else torch.zeros_like(running)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = (delta + gamma * lam * running) * mask[:, t]
        advantages[:, t] = running
    return advantages, (advantages + values) * mask


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """(x - mean) / std on real tokens, 0 on padding. `mean` and `std` are given (gathered over
    every process by the trainer) so that all ranks whiten alike."""
    return (x - mean) / (std + 1e-8) * mask


def clipped_value_loss(
    new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, clip: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, clip fraction): PPO's clipped value loss, `0.5 * max((V - R)^2, (V_clip - R)^2)`
    averaged over real tokens, where `V_clip = V_old + clamp(V - V_old, -clip, clip)`; the clip
    fraction is the share of real tokens where the clipped term is the larger one."""
    clipped = old_values + (new_values - old_values).clamp(-clip, clip)
    unclipped_loss = (new_values - returns) ** 2
    clipped_loss = (clipped - returns) ** 2
    loss = 0.5 * masked_mean(torch.maximum(unclipped_loss, clipped_loss), mask)
    fraction = masked_mean((clipped_loss > unclipped_loss).float(), mask)
    return loss, fraction


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var(R - V) / Var(R) over real tokens: 1 is a perfect critic, 0 one that predicts the
    mean, below 0 worse than that; NaN when the returns do not vary."""
    returns_var = masked_mean((returns - masked_mean(returns, mask)) ** 2, mask)
    residual = returns - values
    residual_var = masked_mean((residual - masked_mean(residual, mask)) ** 2, mask)
    if returns_var.item() == 0:
        return float("nan")
    return float(1.0 - residual_var / returns_var)

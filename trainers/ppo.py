"""PPO / A2C pieces as pure tensor functions: GAE, masked statistics and the losses.

Conventions (NEXT_STEP autoreset): step ``t`` holds the observation ``obs_t`` the action was taken
in, ``values[t] = V(obs_t)``, the reward ``r_t`` and the flags of that transition. When an episode
ends at step ``t`` the env returns the episode's final observation, so ``values[t + 1]`` (or
``next_value`` at the rollout's end) is ``V(final obs)``: the bootstrap value a truncation needs.
The step after the end is the env's reset step; it is invalid and masked out of the losses.
"""

from __future__ import annotations

import torch


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_value: torch.Tensor,
    terminated: torch.Tensor,
    done: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates and returns, [T, ...] each.

    ``terminated[t]``: the transition at ``t`` ended the episode by a rule: no bootstrap.
    ``done[t]``: the episode ended at ``t`` (terminated or truncated): the advantage recursion
    stops there, but a truncation (done and not terminated) still bootstraps from
    ``V(final obs) = values[t + 1]``.
    """
    steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(next_value)
    keep_value = 1.0 - terminated.to(rewards.dtype)
    keep_trace = 1.0 - done.to(rewards.dtype)
    for t in reversed(range(steps)):
        following = next_value if t == steps - 1 else values[t + 1]
        delta = rewards[t] + gamma * following * keep_value[t] - values[t]
        last = delta + gamma * gae_lambda * keep_trace[t] * last
        advantages[t] = last
    return advantages, advantages + values


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the entries where ``mask`` (float 0/1) is 1; 0 when there are none."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def masked_std(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Unbiased standard deviation of ``x`` over the masked entries."""
    mean = masked_mean(x, mask)
    return (((x - mean) ** 2 * mask).sum() / (mask.sum() - 1.0).clamp(min=1.0)).sqrt()


def explained_variance(
    values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """1 - Var[returns - values] / Var[returns] over the masked entries (NaN when Var[returns] = 0)."""
    var_returns = masked_std(returns, mask) ** 2
    return 1.0 - masked_std(returns - values, mask) ** 2 / var_returns


def mean_weights(mask: torch.Tensor) -> torch.Tensor:
    """Per-entry weights of the masked mean: ``mask / count`` (all 0 when no entry is valid).

    Computed once per minibatch, they turn every masked mean of the losses into one dot product.
    """
    return mask / mask.sum().clamp(min=1.0)


def weighted_mean(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``sum(x * weights)`` of 1-D tensors: ``masked_mean(x, mask)`` with ``weights = mean_weights(mask)``."""
    return torch.dot(x, weights)


def policy_loss(
    new_log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    clip_param: float,
    clipped: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate (``clipped``) or the plain policy gradient (A2C), weighted by ``weights``.

    Returns ``(loss, log_ratio)``; the log-ratio feeds ``ratio_statistics`` and ``max_ratio_deviation``.
    """
    log_ratio = new_log_prob - old_log_prob
    if clipped:
        ratio = log_ratio.exp()
        surrogate = torch.max(
            -advantages * ratio, -advantages * ratio.clamp(1.0 - clip_param, 1.0 + clip_param)
        )
    else:
        surrogate = -advantages * new_log_prob
    return weighted_mean(surrogate, weights), log_ratio


@torch.no_grad()
def ratio_statistics(
    log_ratio: torch.Tensor, weights: torch.Tensor, clip_param: float
) -> dict[str, torch.Tensor]:
    """The approximate KL divergence ``E[(r - 1) - log r]`` and the fraction of ratios outside the clip range."""
    deviation = log_ratio.exp() - 1.0
    return {
        "approx_kl": weighted_mean(deviation - log_ratio, weights),
        "clip_fraction": weighted_mean((deviation.abs() > clip_param).to(weights.dtype), weights),
    }


@torch.no_grad()
def max_ratio_deviation(log_ratio: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``max |ratio - 1|`` over the entries of nonzero weight: 0 on the first minibatch of an update,
    where the old log-probabilities were stored at rollout time by the same network."""
    return torch.where(weights > 0, log_ratio.exp() - 1.0, 0.0).abs().max()


def value_loss(
    new_value: torch.Tensor,
    old_value: torch.Tensor,
    returns: torch.Tensor,
    weights: torch.Tensor,
    clip_param: float,
    clip_vloss: bool,
) -> torch.Tensor:
    """0.5 * squared error to the returns; with ``clip_vloss`` the max of the clipped and plain error."""
    error = (new_value - returns) ** 2
    if clip_vloss:
        clipped = old_value + (new_value - old_value).clamp(-clip_param, clip_param)
        error = torch.max(error, (clipped - returns) ** 2)
    return 0.5 * weighted_mean(error, weights)


def normalize(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Advantages shifted and scaled to mean 0, std 1 over the masked entries."""
    return (advantages - masked_mean(advantages, mask)) / (masked_std(advantages, mask) + 1e-8)

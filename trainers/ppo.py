"""PPO and A2C: GAE, the losses, ``update`` (the learning of one policy from its rollout) and
``learn`` (one iteration's learning of every policy, as rsl_rl's ``PPO.update``: anneal the
learning rates, ``update`` each policy, stop with ``NonFiniteError`` when a loss diverged).

``update(group, buf)`` reads top to bottom as one iteration of CleanRL's ``ppo.py`` after the
rollout: advantages and returns by GAE, the rollout flattened into one batch, then
``update_epochs`` epochs of ``num_minibatches`` shuffled minibatches (A2C: one full-batch step),
each one call of the policy's gradient step (``group.step``, chosen once by
``learner.make_step``) on ``minibatch_loss``; a step that trains several whole-batch epochs in one
call (``FusedAdamStep.epochs``) gets them all at once.

Conventions (NEXT_STEP autoreset): step ``t`` holds the observation ``obs_t`` the action was taken
in, ``values[t] = V(obs_t)``, the reward ``r_t`` and the flags of that transition. When an episode
ends at step ``t`` the env returns the episode's final observation, so ``values[t + 1]`` (or
``next_value`` at the rollout's end) is ``V(final obs)``: the bootstrap value a truncation needs.
The step after the end is the env's reset step; it is invalid and masked out of the losses.

Every torch call costs microseconds on a CPU whatever its size, so the update keeps their number
low: masked means are dot products with per-minibatch weights, a whole-batch minibatch is prepared
once for all epochs, and the step statistics (``STEP_STATISTICS``, by name) are summed as one
stacked tensor.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from gpu_envs.runs.config import PolicyConfig
from gpu_envs.runs.metrics import LEARNER_METRICS
from gpu_envs.trainers.policy import log_prob_entropy
from gpu_envs.trainers.rollout import PolicyGroup, RolloutBuffer


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
    keep_value = 1.0 - terminated.to(rewards.dtype)
    following = torch.cat([values[1:], next_value.unsqueeze(0)])
    deltas = rewards + gamma * following * keep_value - values  # the whole rollout at once
    trace = gamma * gae_lambda * (1.0 - done.to(rewards.dtype))
    advantages = torch.empty_like(rewards)
    last = torch.zeros_like(next_value)
    for t in reversed(range(rewards.shape[0])):  # the recursion: two torch calls per step
        last = deltas[t] + trace[t] * last
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
    """1 - Var[returns - values] / Var[returns] over the masked entries (NaN if Var[returns] is
    0)."""
    var_returns = masked_std(returns, mask) ** 2
    return 1.0 - masked_std(returns - values, mask) ** 2 / var_returns


def mean_weights(mask: torch.Tensor) -> torch.Tensor:
    """Per-entry weights of the masked mean: ``mask / count`` (all 0 when no entry is valid).

    Computed once per minibatch, they turn every masked mean of the losses into one dot product.
    """
    return mask / mask.sum().clamp(min=1.0)


def weighted_mean(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``sum(x * weights)`` of 1-D tensors: ``masked_mean(x, mask)`` when
    ``weights = mean_weights(mask)``."""
    return torch.dot(x, weights)


def policy_loss(
    new_log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    clip_param: float,
    clipped: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate (``clipped``) or the plain policy gradient (A2C), weighted by
    ``weights``.

    Returns ``(loss, log_ratio)``; the log-ratio feeds ``ratio_statistics`` and
    ``max_ratio_deviation``.
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
    """The approximate KL divergence ``E[(r - 1) - log r]`` and the fraction of ratios outside the
    clip range."""
    deviation = log_ratio.exp() - 1.0
    return {
        "approx_kl": weighted_mean(deviation - log_ratio, weights),
        "clip_fraction": weighted_mean((deviation.abs() > clip_param).to(weights.dtype), weights),
    }


@torch.no_grad()
def max_ratio_deviation(log_ratio: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``max |ratio - 1|`` over the entries of nonzero weight: 0 on the first minibatch of an
    update, where the old log-probabilities were stored at rollout time by the same network."""
    return torch.where(weights > 0, log_ratio.exp() - 1.0, 0.0).abs().max()


def value_loss(
    new_value: torch.Tensor,
    old_value: torch.Tensor,
    returns: torch.Tensor,
    weights: torch.Tensor,
    clip_param: float,
    clip_vloss: bool,
) -> torch.Tensor:
    """0.5 * squared error to the returns; with ``clip_vloss`` the larger of the clipped value's
    error and the plain one."""
    error = (new_value - returns) ** 2
    if clip_vloss:
        clipped = old_value + (new_value - old_value).clamp(-clip_param, clip_param)
        error = torch.max(error, (clipped - returns) ** 2)
    return 0.5 * weighted_mean(error, weights)


def normalize(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Advantages shifted and scaled to mean 0, std 1 over the masked entries."""
    return (advantages - masked_mean(advantages, mask)) / (masked_std(advantages, mask) + 1e-8)


#: The statistics of one gradient step, by name, in the order ``minibatch_loss`` stacks them.
STEP_STATISTICS = (
    "total_loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
)


def minibatch_loss(
    model: torch.nn.Module, mb: dict[str, torch.Tensor], nvec, cfg: PolicyConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The loss of one minibatch (prepared by ``prepare``), to backpropagate.

    Returns ``(loss, statistics, log_ratio)``: the statistics are the detached
    ``STEP_STATISTICS`` as one tensor, in that order. A pure
    function of its inputs, so ``trainer.compile`` can hand it to ``torch.compile`` as it is.
    """
    weights, is_ppo = mb["weights"], cfg.algorithm == "PPO"
    logits, new_values = model(mb["obs"])
    new_log_probs, entropy = log_prob_entropy(logits, mb["actions"], nvec)
    pg_loss, log_ratio = policy_loss(
        new_log_probs, mb["log_probs"], mb["advantages"], weights, cfg.clip_param, is_ppo
    )
    v_loss = value_loss(
        new_values, mb["values"], mb["returns"], weights, cfg.clip_param, cfg.clip_vloss and is_ppo
    )
    entropy_mean = weighted_mean(entropy, weights)
    loss = pg_loss + cfg.vf_loss_coeff * v_loss
    if cfg.entropy_coeff:  # a zero coefficient would still backpropagate through the entropy
        loss = loss - cfg.entropy_coeff * entropy_mean
    ratio_stats = ratio_statistics(log_ratio, weights, cfg.clip_param)
    with torch.no_grad():
        named = {
            "total_loss": loss,
            "policy_loss": pg_loss,
            "value_loss": v_loss,
            "entropy": entropy_mean,
            **ratio_stats,
        }
        statistics = torch.stack([named[name] for name in STEP_STATISTICS]).float()
    return loss, statistics, log_ratio


def max_grad_norm(cfg: PolicyConfig) -> float:
    """The bound of the global gradient norm: ``max_grad_norm``, or none without
    ``clip_grad_norm``."""
    return cfg.max_grad_norm if cfg.clip_grad_norm else float("inf")


def anneal_learning_rate(group: PolicyGroup, iteration: int, num_iterations: int) -> None:
    """Linear annealing from ``lr`` to 0 over the run when ``anneal_lr`` (iterations count from
    1)."""
    cfg = group.config
    lr = cfg.lr * (1.0 - (iteration - 1.0) / num_iterations) if cfg.anneal_lr else cfg.lr
    for param_group in group.optimizer.param_groups:
        param_group["lr"] = lr


def update(group: PolicyGroup, buf: RolloutBuffer) -> dict[str, torch.Tensor]:
    """Train ``group`` on ``buf`` (unless it is frozen: ``group.step`` is None); returns its
    ``LEARNER_METRICS`` as 0-d device tensors, read on the host at log time."""
    cfg = group.config
    advantages, returns = compute_gae(
        buf.rewards, buf.values, buf.next_value, buf.terminated, buf.done, cfg.gamma, cfg.gae_lambda
    )
    data = flatten(buf, advantages, returns)
    result = _batch_statistics(data)
    if group.step is None:
        nan = torch.tensor(float("nan"), device=data["valid"].device)
        result.update({key: nan for key in _TRAIN_METRICS})
        return {key: result[key].float() for key in LEARNER_METRICS}

    size = data["valid"].shape[0]
    epochs, minibatches, minibatch_size = schedule(cfg, size)
    whole_batch = prepare(data, cfg) if minibatches == 1 else None
    totals, first_ratio_deviation, steps = None, None, 0
    if whole_batch is not None and epochs > 1 and hasattr(group.step, "epochs"):
        totals, first_ratio_deviation = group.step.epochs(whole_batch, epochs)
        epochs, steps = 0, epochs
    for _ in range(epochs):
        order = torch.randperm(size, device=data["valid"].device) if minibatches > 1 else None
        for start in range(0, size, minibatch_size):
            if whole_batch is not None:  # one minibatch (order is None): the whole batch
                mb = whole_batch
            else:
                assert order is not None  # (several minibatches)
                indices = order[start : start + minibatch_size]
                mb = prepare({key: value[indices] for key, value in data.items()}, cfg)
            statistics, grad_norm, log_ratio = group.step(mb)
            if first_ratio_deviation is None:
                first_ratio_deviation = max_ratio_deviation(log_ratio, mb["weights"])
            statistics = torch.cat([statistics, grad_norm.reshape(1)])
            totals = statistics if totals is None else totals + statistics
            steps += 1
    # (update_epochs >= 1: at least one step ran)
    assert isinstance(totals, torch.Tensor) and first_ratio_deviation is not None
    result.update(zip((*STEP_STATISTICS, "grad_norm"), (totals / steps).unbind()))
    result["first_ratio_deviation"] = first_ratio_deviation
    result["cur_lr"] = torch.tensor(
        group.optimizer.param_groups[0]["lr"], device=data["valid"].device
    )
    return {key: result[key].float() for key in LEARNER_METRICS}


_TRAIN_METRICS = ("cur_lr", "first_ratio_deviation", *STEP_STATISTICS, "grad_norm")


def flatten(
    buf: RolloutBuffer, advantages: torch.Tensor, returns: torch.Tensor
) -> dict[str, torch.Tensor]:
    """The rollout as one batch of transitions, [T * E * n, ...] per entry."""
    return {
        "obs": buf.obs.reshape(-1, buf.obs.shape[-1]),
        "actions": buf.actions.reshape(-1, buf.actions.shape[-1]),
        "log_probs": buf.log_probs.reshape(-1),
        "values": buf.values.reshape(-1),
        "advantages": advantages.reshape(-1),
        "returns": returns.reshape(-1),
        "valid": buf.valid.reshape(-1),
        "rewards": buf.rewards.reshape(-1),
    }


def schedule(cfg: PolicyConfig, size: int) -> tuple[int, int, int]:
    """Epochs, minibatches and minibatch size for an update of ``size`` samples: the config's for
    PPO, one full-batch step for A2C."""
    epochs, minibatches = (
        (cfg.update_epochs, cfg.num_minibatches) if cfg.algorithm == "PPO" else (1, 1)
    )
    return epochs, minibatches, -(-size // minibatches)


def prepare(batch: dict[str, torch.Tensor], cfg: PolicyConfig) -> dict[str, torch.Tensor]:
    """``batch`` with the weights of its masked means and, with ``normalize_advantage``, its
    advantages normalised."""
    valid, advantages = batch["valid"], batch["advantages"]
    if cfg.normalize_advantage:
        advantages = normalize(advantages, valid)
    return {**batch, "advantages": advantages, "weights": mean_weights(valid)}


def minibatches_of_each_size(buf: RolloutBuffer, cfg: PolicyConfig) -> Iterator[dict]:
    """One minibatch of every size an update of ``buf`` makes (for compiling a gradient step on
    its shapes); the rollout's values stand in for the advantages and returns."""
    data = flatten(buf, buf.values, buf.values)
    size = data["valid"].shape[0]
    _, _, minibatch_size = schedule(cfg, size)
    for length in sorted({min(minibatch_size, size - s) for s in range(0, size, minibatch_size)}):
        yield prepare({key: value[:length] for key, value in data.items()}, cfg)


@torch.no_grad()
def _batch_statistics(data: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    valid, rewards = data["valid"], data["rewards"]
    return {
        "explained_variance": explained_variance(data["values"], data["returns"], valid),
        "value_mean": masked_mean(data["values"], valid),
        "advantage_mean": masked_mean(data["advantages"], valid),
        "norm_advantage_mean": masked_mean(normalize(data["advantages"], valid), valid),
        "return_mean": masked_mean(data["returns"], valid),
        "reward_mean": masked_mean(rewards, valid),
        "reward_max": torch.where(valid > 0, rewards, -float("inf")).max(),
        "reward_min": torch.where(valid > 0, rewards, float("inf")).min(),
    }


def learn(
    groups: list[PolicyGroup], buffers: dict, iteration: int, num_iterations: int
) -> dict[str, dict[str, torch.Tensor]]:
    """One iteration's learning: anneal every trained policy's learning rate, update every policy
    on its rollout (``update``), then ``check_finite``. Returns each policy's statistics."""
    for group in groups:
        if group.optimizer is not None:
            anneal_learning_rate(group, iteration, num_iterations)
    stats = {group.tag: update(group, buffers[group.tag]) for group in groups}
    check_finite(groups, stats, iteration)
    return stats


class NonFiniteError(RuntimeError):
    """A policy's loss or gradient norm is NaN or infinite: the training diverged."""


_WATCHED = ("total_loss", "grad_norm")


def check_finite(
    groups: list[PolicyGroup], stats: dict[str, dict[str, torch.Tensor]], iteration: int
) -> None:
    """Raise ``NonFiniteError`` if a trained policy's loss or gradient norm of this iteration is
    not finite.

    The values are the update's minibatch averages (any NaN or inf step makes them non-finite);
    one host read for all policies, once per iteration.
    """
    trained = [g for g in groups if g.optimizer is not None]
    if not trained:
        return
    values = torch.stack([stats[g.tag][name] for g in trained for name in _WATCHED])
    if bool(torch.isfinite(values).all()):
        return
    index = int((~torch.isfinite(values)).nonzero()[0])
    group, name = trained[index // len(_WATCHED)], _WATCHED[index % len(_WATCHED)]
    raise NonFiniteError(
        f"training diverged at iteration {iteration}: policy '{group.tag}' {name} is "
        f"{float(values[index])}. Stopped without saving this iteration; the checkpoints already "
        f"written hold finite weights. Lower policy.{group.tag}.lr (now {group.config.lr:g}), "
        f"keep policy.{group.tag}.clip_grad_norm on, or check the env's rewards and observations "
        f"for NaN or inf"
    )

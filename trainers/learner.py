"""One policy's update from its rollout: GAE, then PPO epochs of shuffled minibatches or one A2C step.

Returns the iteration's learner statistics as 0-d device tensors (read on the host at log time);
``check_finite`` stops the run when a loss or gradient norm among them is NaN or infinite.
"""

from __future__ import annotations

import warnings

import torch

from gpu_envs.trainers import fused_step, ppo
from gpu_envs.trainers.config import PolicyConfig
from gpu_envs.trainers.policy import log_prob_entropy
from gpu_envs.trainers.rollout import PolicyGroup, RolloutBuffer

LEARNER_METRICS = (
    "cur_lr",
    "total_loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "grad_norm",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "first_ratio_deviation",
    "value_mean",
    "advantage_mean",
    "norm_advantage_mean",
    "return_mean",
    "reward_mean",
    "reward_max",
    "reward_min",
)


class NonFiniteError(RuntimeError):
    """A policy's loss or gradient norm is NaN or infinite: the training diverged."""


_WATCHED = ("total_loss", "grad_norm")


def check_finite(
    groups: list[PolicyGroup], stats: dict[str, dict[str, torch.Tensor]], iteration: int
) -> None:
    """Raise ``NonFiniteError`` if a trained policy's loss or gradient norm of this iteration is not finite.

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
        f"training diverged at iteration {iteration}: policy '{group.tag}' {name} is {float(values[index])}. "
        f"Stopped without saving this iteration; the checkpoints already written hold finite weights. "
        f"Lower policy.{group.tag}.lr (now {group.config.lr:g}), keep policy.{group.tag}.clip_grad_norm on, "
        f"or check the env's rewards and observations for NaN or inf"
    )


def set_learning_rate(group: PolicyGroup, iteration: int, num_iterations: int) -> float:
    """Linear annealing from ``lr`` to 0 over the run when ``anneal_lr`` (iteration counts from 1)."""
    cfg = group.config
    lr = cfg.lr * (1.0 - (iteration - 1.0) / num_iterations) if cfg.anneal_lr else cfg.lr
    for param_group in group.optimizer.param_groups:
        param_group["lr"] = lr
    return lr


def update(fabric, group: PolicyGroup, buf: RolloutBuffer, nvec) -> dict[str, torch.Tensor]:
    """Train ``group`` on ``buf`` (unless it is frozen) and return its learner statistics (device)."""
    cfg = group.config
    advantages, returns = ppo.compute_gae(
        buf.rewards, buf.values, buf.next_value, buf.terminated, buf.done, cfg.gamma, cfg.gae_lambda
    )
    data = _flatten(buf, advantages, returns)
    result = _batch_statistics(data)
    if group.optimizer is None:
        nan = torch.tensor(float("nan"), device=data["valid"].device)
        result.update({key: nan for key in _TRAIN_METRICS})
    else:
        result.update(_optimise(fabric, group, data, nvec))
    return {key: result[key].float() for key in LEARNER_METRICS}


def compile_losses(
    fabric,
    groups: list[PolicyGroup],
    buffers: dict[str, RolloutBuffer],
    nvec,
    fuse_optimizer: bool = False,
) -> None:
    """``trainer.compile``: compile every trained policy's training now, on its rollout buffer's shapes.

    ``fuse_optimizer`` (one process, a plain Adam): the whole gradient step (``fused_step``);
    otherwise the loss alone, its backward and the optimizer step staying eager.
    """
    for group in groups:
        if group.config.to_train:
            compile_loss(fabric, group, buffers[group.tag], nvec, fuse_optimizer)


def compile_loss(
    fabric, group: PolicyGroup, buf: RolloutBuffer, nvec, fuse_optimizer: bool = False
) -> None:
    """Compile ``group``'s gradient step (``fuse_optimizer``) or its ``minibatch_loss`` now.

    The step runs once for every minibatch size an update of ``buf`` makes, without moving the
    weights or the optimizer (the fused step on copies; the loss's gradients are discarded). If
    torch cannot compile here (no C++ compiler, say), it warns and the policy trains eagerly.
    """
    cfg = group.config
    data = _flatten(
        buf, buf.values, buf.values
    )  # any [T, E, n] tensors stand in for the advantages and returns
    size = data["valid"].shape[0]
    _, _, minibatch_size = _schedule(cfg, size)
    optimizer = getattr(group.optimizer, "optimizer", group.optimizer)  # unwrap Fabric's optimizer
    if fuse_optimizer and fused_step.supports(optimizer):
        group.fused_step = fused_step.FusedAdamStep(group.module, optimizer, minibatch_loss)
    else:
        group.loss_fn = torch.compile(minibatch_loss)
    try:
        for length in sorted(
            {min(minibatch_size, size - start) for start in range(0, size, minibatch_size)}
        ):
            mb = _minibatch(
                {key: value[:length] for key, value in data.items()}, cfg.normalize_advantage
            )
            if group.fused_step is not None:
                group.fused_step.compile_for(mb, nvec, cfg, _max_norm(cfg))
            else:
                loss, _, _ = group.loss_fn(group.model, mb, nvec, cfg)
                fabric.backward(loss)
    except Exception as error:
        warnings.warn(
            f"trainer.compile: torch.compile failed for policy {group.tag!r} "
            f"({type(error).__name__}: {error}); it trains without compiling",
            stacklevel=2,
        )
        group.loss_fn = group.fused_step = None
    for parameter in group.module.parameters():
        parameter.grad = None


def _flatten(
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


_STEP_METRICS = (
    "total_loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "grad_norm",
)
_TRAIN_METRICS = ("cur_lr", "first_ratio_deviation", *_STEP_METRICS)


@torch.no_grad()
def _batch_statistics(data: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    valid, rewards = data["valid"], data["rewards"]
    return {
        "explained_variance": ppo.explained_variance(data["values"], data["returns"], valid),
        "value_mean": ppo.masked_mean(data["values"], valid),
        "advantage_mean": ppo.masked_mean(data["advantages"], valid),
        "norm_advantage_mean": ppo.masked_mean(ppo.normalize(data["advantages"], valid), valid),
        "return_mean": ppo.masked_mean(data["returns"], valid),
        "reward_mean": ppo.masked_mean(rewards, valid),
        "reward_max": torch.where(valid > 0, rewards, -float("inf")).max(),
        "reward_min": torch.where(valid > 0, rewards, float("inf")).min(),
    }


def _optimise(
    fabric, group: PolicyGroup, data: dict[str, torch.Tensor], nvec
) -> dict[str, torch.Tensor]:
    """PPO: ``update_epochs`` passes of ``num_minibatches`` shuffled minibatches; A2C: one full step.

    Every torch call costs microseconds on a CPU whatever its size, so the step keeps their number
    low: masked means are dot products with per-minibatch weights, a whole-batch minibatch is
    prepared once for all epochs, and the step statistics are summed as one stacked tensor.
    """
    cfg = group.config
    size = data["valid"].shape[0]
    epochs, minibatches, minibatch_size = _schedule(cfg, size)
    max_norm = _max_norm(cfg)
    parameters = [p for p in group.module.parameters() if p.requires_grad]
    whole_batch = _minibatch(data, cfg.normalize_advantage) if minibatches == 1 else None
    totals, first_ratio_deviation, steps = None, None, 0
    for _ in range(epochs):
        order = torch.randperm(size, device=data["valid"].device) if minibatches > 1 else None
        for start in range(0, size, minibatch_size):
            mb = (
                whole_batch
                if order is None
                else _minibatch(
                    {k: v[order[start : start + minibatch_size]] for k, v in data.items()},
                    cfg.normalize_advantage,
                )
            )
            if group.fused_step is not None:
                step, grad_norm, log_ratio = group.fused_step(mb, nvec, cfg, max_norm)
            else:
                step, grad_norm, log_ratio = _gradient_step(
                    fabric, group, parameters, mb, nvec, max_norm
                )
            if first_ratio_deviation is None:
                first_ratio_deviation = ppo.max_ratio_deviation(log_ratio, mb["weights"])
            step = torch.cat([step, grad_norm.reshape(1)])
            totals = step if totals is None else totals + step
            steps += 1
    result = dict(zip(_STEP_METRICS, totals / steps))
    result["first_ratio_deviation"] = first_ratio_deviation
    result["cur_lr"] = torch.tensor(
        group.optimizer.param_groups[0]["lr"], device=data["valid"].device
    )
    return result


def _gradient_step(
    fabric,
    group: PolicyGroup,
    parameters: list[torch.Tensor],
    mb: dict[str, torch.Tensor],
    nvec,
    max_norm: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One eager optimizer step on ``mb`` (the loss possibly compiled); returns (statistics, grad norm, log ratio)."""
    loss, statistics, log_ratio = (group.loss_fn or minibatch_loss)(
        group.model, mb, nvec, group.config
    )
    group.optimizer.zero_grad(set_to_none=True)
    fabric.backward(loss)
    grad_norm = clip_gradients(parameters, max_norm)
    group.optimizer.step()
    return statistics, grad_norm, log_ratio


def _max_norm(cfg: PolicyConfig) -> float:
    return cfg.max_grad_norm if cfg.clip_grad_norm else float("inf")


def minibatch_loss(
    model: torch.nn.Module, mb: dict[str, torch.Tensor], nvec, cfg: PolicyConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The loss of one minibatch (prepared by ``_minibatch``), to backpropagate.

    Returns ``(loss, statistics, log_ratio)``: the statistics are the detached total loss, policy
    loss, value loss, mean entropy, approximate KL and clip fraction as one [6] tensor. A pure
    function of its inputs, so ``trainer.compile`` can hand it to ``torch.compile`` as it is.
    """
    weights, is_ppo = mb["weights"], cfg.algorithm == "PPO"
    logits, new_values = model(mb["obs"])
    new_log_probs, entropy = log_prob_entropy(logits, mb["actions"], nvec)
    pg_loss, log_ratio = ppo.policy_loss(
        new_log_probs, mb["log_probs"], mb["advantages"], weights, cfg.clip_param, is_ppo
    )
    v_loss = ppo.value_loss(
        new_values, mb["values"], mb["returns"], weights, cfg.clip_param, cfg.clip_vloss and is_ppo
    )
    entropy_mean = ppo.weighted_mean(entropy, weights)
    loss = pg_loss + cfg.vf_loss_coeff * v_loss
    if cfg.entropy_coeff:  # a zero coefficient would still backpropagate through the entropy
        loss = loss - cfg.entropy_coeff * entropy_mean
    ratio_stats = ppo.ratio_statistics(log_ratio, weights, cfg.clip_param)
    with torch.no_grad():
        statistics = torch.stack(
            [
                loss,
                pg_loss,
                v_loss,
                entropy_mean,
                ratio_stats["approx_kl"],
                ratio_stats["clip_fraction"],
            ]
        ).float()
    return loss, statistics, log_ratio


def _schedule(cfg: PolicyConfig, size: int) -> tuple[int, int, int]:
    """Epochs, minibatches and minibatch size for an update of ``size`` samples: the config's for
    PPO, one full-batch step for A2C."""
    epochs, minibatches = (
        (cfg.update_epochs, cfg.num_minibatches) if cfg.algorithm == "PPO" else (1, 1)
    )
    return epochs, minibatches, -(-size // minibatches)


def _minibatch(
    batch: dict[str, torch.Tensor], normalize_advantage: bool
) -> dict[str, torch.Tensor]:
    """``batch`` with the weights of its masked means and, if asked, its advantages normalised."""
    valid = batch["valid"]
    advantages = (
        ppo.normalize(batch["advantages"], valid) if normalize_advantage else batch["advantages"]
    )
    return {**batch, "advantages": advantages, "weights": ppo.mean_weights(valid)}


def clip_gradients(parameters: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale the gradients to a total 2-norm of at most ``max_norm``; return the norm before clipping.

    torch's two foreach calls (about 140 us on the CPU for a small network) rather than
    ``Fabric.clip_gradients`` (280 us): the trainers run in 32-bit precision, where Fabric's version
    adds nothing but overhead, and under DDP the gradients are already averaged after ``backward``.
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = torch.nn.utils.get_total_norm(grads, foreach=True)
    if max_norm != float("inf"):
        torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=True)
    return total_norm


def action_std(buf: RolloutBuffer) -> torch.Tensor:
    """[H, 3]: std of each action index over agents, envs and time (valid entries only, averaged)."""
    actions = buf.actions.to(torch.float32)  # [T, E, n, H]
    valid = buf.valid.unsqueeze(-1)
    out = []
    for dim in (2, 1, 0):
        count = valid.sum(dim).clamp(min=1.0)
        mean = (actions * valid).sum(dim, keepdim=True) / count.unsqueeze(dim)
        var = (((actions - mean) ** 2) * valid).sum(dim) / count
        out.append(var.sqrt().mean(dim=tuple(range(var.dim() - 1))))
    return torch.stack(out, dim=-1)

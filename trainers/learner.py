"""One policy's update from its rollout: GAE, then PPO epochs of shuffled minibatches or one A2C step.

Returns the iteration's learner statistics as 0-d device tensors (read on the host at log time).
"""

from __future__ import annotations

import torch

from gpu_envs.trainers import ppo
from gpu_envs.trainers.policy import log_prob_entropy
from gpu_envs.trainers.rollout import PolicyGroup, RolloutBuffer

LEARNER_METRICS = ("cur_lr", "total_loss", "policy_loss", "value_loss", "entropy", "grad_norm",
                   "approx_kl", "clip_fraction", "explained_variance", "first_ratio_deviation",
                   "value_mean", "advantage_mean", "norm_advantage_mean", "return_mean",
                   "reward_mean", "reward_max", "reward_min")


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
    advantages, returns = ppo.compute_gae(buf.rewards, buf.values, buf.next_value, buf.terminated,
                                          buf.done, cfg.gamma, cfg.gae_lambda)
    data = {
        "obs": buf.obs.reshape(-1, buf.obs.shape[-1]),
        "actions": buf.actions.reshape(-1, buf.actions.shape[-1]),
        "log_probs": buf.log_probs.reshape(-1),
        "values": buf.values.reshape(-1),
        "advantages": advantages.reshape(-1),
        "returns": returns.reshape(-1),
        "valid": buf.valid.reshape(-1),
        "rewards": buf.rewards.reshape(-1),
    }
    result = _batch_statistics(data)
    if group.optimizer is None:
        nan = torch.tensor(float("nan"), device=data["valid"].device)
        result.update({key: nan for key in _TRAIN_METRICS})
    else:
        result.update(_optimise(fabric, group, data, nvec))
    return {key: result[key].float() for key in LEARNER_METRICS}


_TRAIN_METRICS = ("cur_lr", "total_loss", "policy_loss", "value_loss", "entropy", "grad_norm",
                  "approx_kl", "clip_fraction", "first_ratio_deviation")


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


def _optimise(fabric, group: PolicyGroup, data: dict[str, torch.Tensor], nvec) -> dict[str, torch.Tensor]:
    """PPO: ``update_epochs`` passes of ``num_minibatches`` shuffled minibatches; A2C: one full step."""
    cfg = group.config
    size = data["valid"].shape[0]
    is_ppo = cfg.algorithm == "PPO"
    epochs, minibatches = (cfg.update_epochs, cfg.num_minibatches) if is_ppo else (1, 1)
    minibatch_size = -(-size // minibatches)
    max_norm = cfg.max_grad_norm if cfg.clip_grad_norm else float("inf")
    sums: dict[str, torch.Tensor] = {}
    first_ratio_deviation = None
    steps = 0
    for _ in range(epochs):
        order = torch.randperm(size, device=data["valid"].device) if minibatches > 1 else None
        for start in range(0, size, minibatch_size):
            mb = data if order is None else {k: v[order[start:start + minibatch_size]] for k, v in data.items()}
            mask = mb["valid"]
            logits, new_values = group.model(mb["obs"])
            new_log_probs, entropy = log_prob_entropy(logits, mb["actions"], nvec)
            adv = ppo.normalize(mb["advantages"], mask) if cfg.normalize_advantage else mb["advantages"]
            pg_loss, stats = ppo.policy_loss(new_log_probs, mb["log_probs"], adv, mask, cfg.clip_param, is_ppo)
            v_loss = ppo.value_loss(new_values, mb["values"], mb["returns"], mask, cfg.clip_param,
                                    cfg.clip_vloss and is_ppo)
            entropy_mean = ppo.masked_mean(entropy, mask)
            loss = pg_loss - cfg.entropy_coeff * entropy_mean + cfg.vf_loss_coeff * v_loss
            group.optimizer.zero_grad(set_to_none=True)
            fabric.backward(loss)
            grad_norm = fabric.clip_gradients(group.model, group.optimizer, max_norm=max_norm,
                                              error_if_nonfinite=False)
            group.optimizer.step()
            if first_ratio_deviation is None:
                first_ratio_deviation = stats["max_ratio_deviation"]
            step_stats = {"total_loss": loss, "policy_loss": pg_loss, "value_loss": v_loss,
                          "entropy": entropy_mean, "grad_norm": grad_norm,
                          "approx_kl": stats["approx_kl"], "clip_fraction": stats["clip_fraction"]}
            for key, value in step_stats.items():
                sums[key] = sums.get(key, 0.0) + value.detach().float()
            steps += 1
    result = {key: value / steps for key, value in sums.items()}
    result["first_ratio_deviation"] = first_ratio_deviation
    result["cur_lr"] = torch.tensor(group.optimizer.param_groups[0]["lr"], device=data["valid"].device)
    return result


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

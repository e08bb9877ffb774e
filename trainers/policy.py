"""The actor-critic network and the pure functions on its action-distribution parameters.

``ActorCritic.forward(obs) -> (logits, value)`` is the module's only entry point, so the model can
be wrapped by DDP (Lightning raises on other methods that run submodules). Action sampling,
log-probabilities and entropies are functions of the "logits" (the distribution parameters),
outside the module. Two action kinds:

- MultiDiscrete (``action_nvec`` a sequence of ints): one categorical head per action index; the
  logits are [B, sum(nvec)] and actions [B, H] int64.
- Box (``action_nvec`` a ``ContinuousActions``): a diagonal Gaussian with a state-independent
  log-std parameter (CleanRL's ``ppo_continuous_action``); the logits are ``[mean | log_std]``,
  [B, 2 * D], and actions [B, D] float32, log-probabilities and entropies summed over the D dims.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from gpu_envs.runs.checkpoint import CheckpointError, load_model_weights
from gpu_envs.runs.config import ModelConfig, PolicyConfig

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class ContinuousActions(tuple):
    """A Box action space of ``dims`` dimensions, seen through the trainer's ``action_nvec`` lens.

    As a tuple it is ``(2,) * dims``: ``len`` is the number of action dims (one "head" each) and
    ``sum`` the width of the distribution parameters (a mean and a log-std per dim), so code that
    sizes buffers and metrics from ``action_nvec`` works unchanged.
    """

    def __new__(cls, dims: int) -> ContinuousActions:
        if dims < 1:
            raise ValueError(f"a continuous action space needs at least one dimension, got {dims}")
        return super().__new__(cls, (2,) * dims)

    def __repr__(self) -> str:
        return f"ContinuousActions({len(self)})"


def is_continuous(nvec: Sequence[int]) -> bool:
    """Whether ``nvec`` describes Box actions (a Gaussian head) rather than MultiDiscrete ones."""
    return isinstance(nvec, ContinuousActions)


def action_dtype(nvec: Sequence[int]) -> torch.dtype:
    """The dtype of the actions of ``nvec``: float32 for Box actions, int64 for MultiDiscrete."""
    return torch.float32 if is_continuous(nvec) else torch.int64


def _layer(inputs: int, outputs: int, gain: float, ortho: bool) -> nn.Linear:
    layer = nn.Linear(inputs, outputs)
    if ortho:
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer


class ActorCritic(nn.Module):
    """MLP torso, an actor head and a value head.

    The actor is one linear head per MultiDiscrete action dimension (``action_nvec``), or for
    ``ContinuousActions`` a linear mean head plus a ``log_std`` parameter (initialised to 0).
    Orthogonal init (CleanRL's gains: sqrt(2) torso, 0.01 actor, 1.0 critic) when
    ``model.ortho_init``.
    """

    def __init__(self, obs_dim: int, action_nvec: Sequence[int], model: ModelConfig):
        super().__init__()
        self.obs_dim = int(obs_dim)
        self.action_nvec = (
            action_nvec if is_continuous(action_nvec) else tuple(int(n) for n in action_nvec)
        )
        ortho = model.ortho_init
        layers: list[nn.Module] = []
        width = self.obs_dim
        for dim in model.fc_dims:
            layers += [_layer(width, dim, math.sqrt(2), ortho), _ACTIVATIONS[model.activation]()]
            width = dim
        self.torso = nn.Sequential(*layers)
        if is_continuous(self.action_nvec):
            self.actor = _layer(width, len(self.action_nvec), 0.01, ortho)
            self.log_std = nn.Parameter(torch.zeros(len(self.action_nvec)))
        else:
            self.actor = _layer(width, sum(self.action_nvec), 0.01, ortho)
        self.critic = _layer(width, 1, 1.0, ortho)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits [B, sum(action_nvec)] and values [B] for observations [B, obs_dim]."""
        hidden = self.torso(obs)
        logits = self.actor(hidden)
        if is_continuous(self.action_nvec):
            logits = torch.cat([logits, self.log_std.expand_as(logits)], dim=-1)
        return logits, self.critic(hidden).squeeze(-1)


def make_network(
    obs_dim: int, action_nvec: Sequence[int], cfg: PolicyConfig, tag: str
) -> ActorCritic:
    """Policy ``tag``'s ``ActorCritic``: its initial weights from ``model.model_ckpt_filepath`` when
    set, and frozen (no gradients) unless ``to_train``."""
    network = ActorCritic(obs_dim, action_nvec, cfg.model)
    if cfg.model.model_ckpt_filepath:
        network.load_state_dict(load_model_weights(cfg.model.model_ckpt_filepath, tag))
    if not cfg.to_train:
        network.requires_grad_(False)
    return network


def gaussian_parameters(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean and log-std ([B, D] each) of Gaussian-head logits [B, 2 * D]."""
    mean, log_std = logits.chunk(2, dim=-1)
    return mean, log_std


def _gaussian_log_prob(
    mean: torch.Tensor, log_std: torch.Tensor, actions: torch.Tensor
) -> torch.Tensor:
    z = (actions - mean) * torch.exp(-log_std)
    return (-0.5 * z * z - log_std - _LOG_SQRT_2PI).sum(-1)


def _gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    return (log_std + 0.5 + _LOG_SQRT_2PI).sum(-1)


def split_logits(logits: torch.Tensor, nvec: Sequence[int]) -> tuple[torch.Tensor, ...]:
    """Per-head normalised log-probabilities ([B, n_h] each) of MultiDiscrete logits."""
    return tuple(torch.log_softmax(part, dim=-1) for part in logits.split(tuple(nvec), dim=-1))


def _joint_log_prob(parts: tuple[torch.Tensor, ...], actions: torch.Tensor) -> torch.Tensor:
    per_head = [
        logp.gather(-1, actions[:, head : head + 1]).squeeze(-1) for head, logp in enumerate(parts)
    ]
    return sum(per_head[1:], per_head[0])


def log_prob(logits: torch.Tensor, actions: torch.Tensor, nvec: Sequence[int]) -> torch.Tensor:
    """Joint log-probability [B] of ``actions`` [B, H] (sum over heads or action dims)."""
    if is_continuous(nvec):
        return _gaussian_log_prob(*gaussian_parameters(logits), actions)
    return _joint_log_prob(split_logits(logits, nvec), actions)


def log_prob_entropy(
    logits: torch.Tensor, actions: torch.Tensor, nvec: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Joint log-probability [B] of ``actions`` [B, H] and the joint entropy [B] (sums over
    heads)."""
    if is_continuous(nvec):
        mean, log_std = gaussian_parameters(logits)
        return _gaussian_log_prob(mean, log_std, actions), _gaussian_entropy(log_std)
    parts = split_logits(logits, nvec)
    entropies = [(logp.exp() * logp).sum(-1).neg() for logp in parts]
    return _joint_log_prob(parts, actions), sum(entropies[1:], entropies[0])


def greedy_actions(logits: torch.Tensor, nvec: Sequence[int]) -> torch.Tensor:
    """The most probable action: every head's argmax, [B, H] int64, or the Gaussian's mean,
    [B, D]."""
    if is_continuous(nvec):
        return gaussian_parameters(logits)[0]
    return torch.stack([part.argmax(-1) for part in logits.split(tuple(nvec), dim=-1)], dim=-1)


def network_from_checkpoint(path: Path, state: dict, tag: str) -> ActorCritic:
    """Policy ``tag``'s trained network of a loaded trainer checkpoint ``state`` (read from
    ``path``), in eval mode without gradients."""
    saved = state["config"]["policy"][tag]["model"]
    model = ModelConfig(
        fc_dims=list(saved["fc_dims"]), activation=saved["activation"], ortho_init=False
    )
    spaces = state["spaces"]
    heads = (
        ContinuousActions(len(spaces["action_nvec"]))
        if spaces.get("continuous")
        else spaces["action_nvec"]
    )
    network = ActorCritic(spaces["obs_dim"], heads, model)
    try:
        network.load_state_dict(state["policies"][tag]["model"])
    except RuntimeError as error:
        raise CheckpointError(
            f"checkpoint {path}: policy '{tag}' does not fit its config: {error}"
        ) from None
    return network.eval().requires_grad_(False)

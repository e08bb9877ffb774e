"""The actor-critic network and the pure functions on its MultiDiscrete action logits.

``ActorCritic.forward(obs) -> (logits, value)`` is the module's only entry point, so the model can
be wrapped by DDP (Lightning raises on other methods that run submodules). Action sampling,
log-probabilities and entropies are functions of the logits, outside the module.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from gpu_envs.trainers.config import ModelConfig

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def _layer(inputs: int, outputs: int, gain: float, ortho: bool) -> nn.Linear:
    layer = nn.Linear(inputs, outputs)
    if ortho:
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer


class ActorCritic(nn.Module):
    """MLP torso, one linear head per action dimension (``action_nvec``) and a value head.

    Orthogonal init (CleanRL's gains: sqrt(2) torso, 0.01 actor, 1.0 critic) when
    ``model.ortho_init``.
    """

    def __init__(self, obs_dim: int, action_nvec: Sequence[int], model: ModelConfig):
        super().__init__()
        self.obs_dim = int(obs_dim)
        self.action_nvec = tuple(int(n) for n in action_nvec)
        ortho = model.ortho_init
        layers: list[nn.Module] = []
        width = self.obs_dim
        for dim in model.fc_dims:
            layers += [_layer(width, dim, math.sqrt(2), ortho), _ACTIVATIONS[model.activation]()]
            width = dim
        self.torso = nn.Sequential(*layers)
        self.actor = _layer(width, sum(self.action_nvec), 0.01, ortho)
        self.critic = _layer(width, 1, 1.0, ortho)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits [B, sum(action_nvec)] and values [B] for observations [B, obs_dim]."""
        hidden = self.torso(obs)
        return self.actor(hidden), self.critic(hidden).squeeze(-1)


def split_logits(logits: torch.Tensor, nvec: Sequence[int]) -> tuple[torch.Tensor, ...]:
    """Per-head normalised log-probabilities ([B, n_h] each)."""
    return tuple(torch.log_softmax(part, dim=-1) for part in logits.split(tuple(nvec), dim=-1))


def _joint_log_prob(parts: tuple[torch.Tensor, ...], actions: torch.Tensor) -> torch.Tensor:
    per_head = [logp.gather(-1, actions[:, head:head + 1]).squeeze(-1) for head, logp in enumerate(parts)]
    return sum(per_head[1:], per_head[0])


def log_prob(logits: torch.Tensor, actions: torch.Tensor, nvec: Sequence[int]) -> torch.Tensor:
    """Joint log-probability [B] of ``actions`` [B, H] (sum over heads)."""
    return _joint_log_prob(split_logits(logits, nvec), actions)


def log_prob_entropy(logits: torch.Tensor, actions: torch.Tensor,
                     nvec: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Joint log-probability [B] of ``actions`` [B, H] and the joint entropy [B] (sums over heads)."""
    parts = split_logits(logits, nvec)
    entropies = [(logp.exp() * logp).sum(-1).neg() for logp in parts]
    return _joint_log_prob(parts, actions), sum(entropies[1:], entropies[0])


def greedy_actions(logits: torch.Tensor, nvec: Sequence[int]) -> torch.Tensor:
    """The most probable index of every head, [B, H] int64."""
    return torch.stack([part.argmax(-1) for part in logits.split(tuple(nvec), dim=-1)], dim=-1)

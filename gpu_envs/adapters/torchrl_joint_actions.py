"""Tag for TorchRL's MARL trainers: one categorical action per agent (optional extra ``torchrl``).

BenchMARL's discrete-action algorithms (and TorchRL's multi-agent PPO recipe with a ``Categorical``
policy) sample one index per agent, while a Tag agent picks two (acceleration index ``a`` in
``[0, A]``, turn index ``r`` in ``[0, R]``). :class:`JointActions` gives each agent one index over
the ``(A+1) * (R+1)`` pairs, ``k = a * (R+1) + r``, and splits it before the step;
:func:`joint_action_tag_env` is :class:`~gpu_envs.adapters.torchrl.TagTorchRLEnv` with it: the
groups
"tagger" and "runner" after the batch dimension, ``(group, "action")`` [E, n_group] int64.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torchrl.data import Categorical, Composite
from torchrl.envs import Transform, TransformedEnv

from gpu_envs.adapters.torchrl import TagTorchRLEnv
from gpu_envs.games.tag.env import TEAMS

__all__ = ["JointActions", "joint_action_tag_env"]


class JointActions(Transform):
    """Each group's ``(group, "action")`` as one index ``k`` of ``nvec[0] * nvec[1]`` choices, given
    to the env underneath (``categorical_action_encoding=True``) as ``(k // nvec[1], k % nvec[1])``;
    ``groups``: the env's groups (its ``group_map``; the teams by default).
    """

    def __init__(self, nvec: tuple[int, int], groups: Iterable[str] = TEAMS):
        keys = [(group, "action") for group in groups]
        super().__init__(in_keys=[], out_keys=[], in_keys_inv=keys, out_keys_inv=keys)
        self.nvec = (int(nvec[0]), int(nvec[1]))

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        return torch.stack((action // self.nvec[1], action % self.nvec[1]), dim=-1)

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        for key in self.in_keys_inv:
            pair = action_spec[key]
            action_spec[key] = Categorical(
                self.nvec[0] * self.nvec[1],
                shape=pair.shape[:-1],
                dtype=torch.int64,
                device=pair.device,
            )
        return action_spec


def joint_action_tag_env(
    num_envs: int = 1,
    device: str | torch.device = "cpu",
    *,
    seed: int | None = None,
    **params: Any,
) -> TransformedEnv:
    """``num_envs`` games of Tag with one categorical action per agent (seeded with ``seed`` at the
    first reset when given); ``params`` are the Tag parameters (docs/spec-tag.md) and
    ``TagTorchRLEnv``'s options (``group_map``: ``MarlGroupMapType.ALL_IN_ONE_GROUP`` gives
    TorchRL's MARL tutorial's one group ``"agents"``)."""
    env = TagTorchRLEnv(num_envs, device, categorical_action_encoding=True, **params)
    try:
        if seed is not None:
            env.set_seed(seed)
        return TransformedEnv(env, JointActions(env.batched_env.action_nvec, env.group_map))
    except BaseException:
        env.close()  # a refused seed leaves no env holding its buffers
        raise

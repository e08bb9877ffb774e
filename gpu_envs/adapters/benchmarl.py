"""Tag as a BenchMARL task (extra ``benchmarl``; see docs/using-with-marl.md for the versions).

``TagTask.TAG.get_task(config)`` is a BenchMARL ``TaskClass`` whose config holds the Tag parameters
of docs/spec-tag.md by name (``{}``: :class:`~gpu_envs.games.tag.params.TagParams`' defaults). Its
envs
are :func:`~gpu_envs.adapters.torchrl_joint_actions.joint_action_tag_env`: ``num_envs`` games
batched on
BenchMARL's sampling device (BenchMARL collects from them without ``SerialEnv``), with the groups
"tagger" and "runner", each trained as its own group, and one categorical action per agent, as
BenchMARL's discrete algorithms sample. Runners tagged in a game where they exit stay in the batch
(out-of-game observation, reward 0) until the game ends, so the groups keep their size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

try:
    from benchmarl.environments.common import Task, TaskClass
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError(
        f"gpu_envs.adapters.benchmarl needs BenchMARL with a torchrl it supports ({error}); "
        "see docs/using-with-marl.md"
    ) from error
from torchrl.data import Composite
from torchrl.envs import EnvBase

from gpu_envs.adapters.torchrl_joint_actions import joint_action_tag_env
from gpu_envs.games.tag.env import TEAMS
from gpu_envs.games.tag.params import TagParams

__all__ = ["TagTask", "TagTaskClass"]


class TagTaskClass(TaskClass):
    """Tag for BenchMARL: ``config`` holds the Tag parameters by name."""

    def get_env_fun(
        self,
        num_envs: int,
        continuous_actions: bool,
        seed: int | None,
        device: str | torch.device,
    ) -> Callable[[], EnvBase]:
        params = dict(self.config)
        return lambda: joint_action_tag_env(num_envs, device, seed=seed, **params)

    def supports_continuous_actions(self) -> bool:
        return False

    def supports_discrete_actions(self) -> bool:
        return True

    def max_steps(self, env: EnvBase) -> int:
        return TagParams(**self.config).episode_length

    def has_render(self, env: EnvBase) -> bool:
        return False

    def group_map(self, env: EnvBase) -> dict[str, list[str]]:
        return env.group_map

    def observation_spec(self, env: EnvBase) -> Composite:
        """Each group's ``observation``: the policies' input (``active`` stays in the data)."""
        spec = env.full_observation_spec_unbatched.clone()
        for team in TEAMS:
            del spec[team, "active"]
        return spec

    def info_spec(self, env: EnvBase) -> Composite | None:
        return None

    def state_spec(self, env: EnvBase) -> Composite | None:
        return None

    def action_spec(self, env: EnvBase) -> Composite:
        return env.full_action_spec_unbatched

    def action_mask_spec(self, env: EnvBase) -> Composite | None:
        return None

    @staticmethod
    def env_name() -> str:
        return "gpu_envs"


class TagTask(Task):
    """The gpu-envs tasks for BenchMARL: ``TagTask.TAG.get_task(config)``."""

    TAG = None

    @staticmethod
    def associated_class() -> type[TaskClass]:
        return TagTaskClass

    def get_task(self, config: dict[str, Any] | None = None) -> TaskClass:
        """The task with ``config`` (Tag parameters of docs/spec-tag.md; None: TagParams'
        defaults)."""
        return self.associated_class()(name=self.name, config=dict(config or {}))

"""The games the trainer runs, behind one batched multi-agent face.

Every game is seen as ``num_envs`` envs of ``num_agents`` agents: observations [E, N, obs_dim],
actions [E, N, H], rewards [E, N], per-env ``terminated`` and ``truncated`` [E], and ``active``
[E, N] (agents still in the game). Actions are MultiDiscrete (``action_nvec`` of ints, int64
actions) or Box (``action_nvec`` a ``ContinuousActions``, float32 actions). CartPole is the case
N = 1, H = 1; Pendulum is N = 1 with one continuous action dim, clipped here to the env's bounds.
The envs run with NEXT_STEP autoreset and without action validation (the trainer samples valid
actions on the device).
"""

from __future__ import annotations

from typing import Any

import torch

from gpu_envs.trainers.config import ConfigError, game_of
from gpu_envs.trainers.policy import ContinuousActions


class _OneAgentGame:
    """A gymnasium vector env seen as one agent per env (``self.env``, set by the subclass)."""

    title = ""

    def _init_agents(self, num_envs: int, device: torch.device, episode_length: int) -> None:
        self.num_envs, self.num_agents = num_envs, 1
        self.obs_dim = self.env.single_observation_space.shape[0]
        self.episode_length = self.env.max_episode_steps or episode_length
        self.active = torch.ones((num_envs, 1), dtype=torch.bool, device=device)

    def default_agent_map(self, tags: list[str]) -> dict[str, list[int]]:
        if len(tags) != 1:
            raise ConfigError(
                f"policy: {self.title} has one agent per env, so exactly one policy; got {tags}"
            )
        return {tags[0]: [0]}

    def reset(self, seed: int | None) -> torch.Tensor:
        obs, _ = self.env.reset(seed=seed)
        return obs.unsqueeze(1)

    def step(self, actions: torch.Tensor):
        obs, rewards, terminated, truncated, _ = self.env.step(self._env_actions(actions))
        return obs.unsqueeze(1), rewards.unsqueeze(1), terminated, truncated, self.active

    def _env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """The env's actions from the trainer's [E, 1, H]."""
        raise NotImplementedError

    def render(self):
        return self.env.render()[0]

    def close(self) -> None:
        self.env.close()


class CartPoleGame(_OneAgentGame):
    """``gpu_envs.CartPoleVectorEnv`` seen as one agent per env."""

    title = "CartPole"

    def __init__(
        self,
        num_envs: int,
        device: torch.device,
        env_kwargs: dict[str, Any],
        render_mode: str | None = None,
    ):
        from gpu_envs.cartpole import CartPoleVectorEnv

        try:
            self.env = CartPoleVectorEnv(
                num_envs,
                device=device,
                autoreset_mode="next_step",
                validate_actions=False,
                render_mode=render_mode,
                **env_kwargs,
            )
        except TypeError as error:
            raise ConfigError(f"env: {error}") from None
        self._init_agents(num_envs, device, 500)
        self.action_nvec = (2,)

    def _env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        return actions[:, 0, 0]


class PendulumGame(_OneAgentGame):
    """``gpu_envs.PendulumVectorEnv`` seen as one agent per env with a Gaussian-headed torque.

    ``step`` clips the sampled torques to the action space's bounds (the log-probabilities stay
    those of the unclipped draws, as in CleanRL), so the env never sees an out-of-range action.
    """

    title = "Pendulum"

    def __init__(
        self,
        num_envs: int,
        device: torch.device,
        env_kwargs: dict[str, Any],
        render_mode: str | None = None,
    ):
        from gpu_envs.pendulum import PendulumVectorEnv

        try:
            self.env = PendulumVectorEnv(
                num_envs,
                device=device,
                autoreset_mode="next_step",
                validate_actions=False,
                render_mode=render_mode,
                **env_kwargs,
            )
        except TypeError as error:
            raise ConfigError(f"env: {error}") from None
        self._init_agents(num_envs, device, 200)
        space = self.env.single_action_space
        self.action_nvec = ContinuousActions(space.shape[0])
        self._low = torch.as_tensor(space.low, device=device)
        self._high = torch.as_tensor(space.high, device=device)

    def _env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        return torch.clamp(actions[:, 0], self._low, self._high)


class TagGame:
    """``gpu_envs.tag.TagEnv`` (the batched multi-agent Tag) as it is."""

    def __init__(
        self,
        num_envs: int,
        device: torch.device,
        env_kwargs: dict[str, Any],
        render_mode: str | None = None,
    ):
        from gpu_envs.tag import TagEnv

        extra = {"render_mode": render_mode} if render_mode else {}
        try:
            self.env = TagEnv(
                num_envs,
                device=device,
                autoreset_mode="next_step",
                validate_actions=False,
                **env_kwargs,
                **extra,
            )
        except TypeError as error:
            raise ConfigError(f"env: {error}") from None
        self.num_envs, self.num_agents = num_envs, self.env.num_agents
        self.obs_dim, self.action_nvec = self.env.obs_dim, tuple(self.env.action_nvec)
        self.episode_length = self.env.episode_length

    @property
    def active(self) -> torch.Tensor:
        """[E, N] agents in the game now (before the next step)."""
        return self.env.active

    def default_agent_map(self, tags: list[str]) -> dict[str, list[int]]:
        teams = {"tagger": list(self.env.taggers), "runner": list(self.env.runners)}
        if set(tags) == set(teams):
            return {tag: teams[tag] for tag in tags}
        if len(tags) == 1:
            return {tags[0]: list(range(self.num_agents))}
        raise ConfigError(
            f"policy: Tag policies are 'tagger' and 'runner' (or one shared policy); got {tags}"
        )

    def reset(self, seed: int | None) -> torch.Tensor:
        obs, _ = self.env.reset(seed=seed)
        return obs

    def step(self, actions: torch.Tensor):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        return obs, rewards, terminated, truncated, info["active"]

    def render(self):
        return self.env.render()[0]

    def close(self) -> None:
        self.env.close()


def make_game(
    name: str,
    num_envs: int,
    device: torch.device,
    env_kwargs: dict[str, Any],
    render_mode: str | None = None,
):
    """The game of config ``name`` with ``num_envs`` envs on ``device``."""
    kind = {"cartpole": CartPoleGame, "pendulum": PendulumGame, "tag": TagGame}[game_of(name)]
    return kind(num_envs, device, dict(env_kwargs), render_mode)

"""The games the trainer runs, behind one batched multi-agent face.

Every game is seen as ``num_envs`` envs of ``num_agents`` agents with MultiDiscrete actions:
observations [E, N, obs_dim], actions [E, N, H], rewards [E, N], per-env ``terminated`` and
``truncated`` [E], and ``active`` [E, N] (agents still in the game). CartPole is the case N = 1,
H = 1. Both envs run with NEXT_STEP autoreset and without action validation (the trainer samples
valid actions on the device).
"""

from __future__ import annotations

from typing import Any

import torch

from gpu_envs.trainers.config import ConfigError, game_of


class CartPoleGame:
    """``gpu_envs.CartPoleVectorEnv`` seen as one agent per env."""

    def __init__(self, num_envs: int, device: torch.device, env_kwargs: dict[str, Any],
                 render_mode: str | None = None):
        from gpu_envs.cartpole import CartPoleVectorEnv

        try:
            self.env = CartPoleVectorEnv(num_envs, device=device, autoreset_mode="next_step",
                                         validate_actions=False, render_mode=render_mode, **env_kwargs)
        except TypeError as error:
            raise ConfigError(f"env: {error}") from None
        self.num_envs, self.num_agents = num_envs, 1
        self.obs_dim, self.action_nvec = 4, (2,)
        self.episode_length = self.env.max_episode_steps or 500
        self.active = torch.ones((num_envs, 1), dtype=torch.bool, device=device)

    def default_agent_map(self, tags: list[str]) -> dict[str, list[int]]:
        if len(tags) != 1:
            raise ConfigError(f"policy: CartPole has one agent per env, so exactly one policy; got {tags}")
        return {tags[0]: [0]}

    def reset(self, seed: int | None) -> torch.Tensor:
        obs, _ = self.env.reset(seed=seed)
        return obs.unsqueeze(1)

    def step(self, actions: torch.Tensor):
        obs, rewards, terminated, truncated, _ = self.env.step(actions[:, 0, 0])
        return obs.unsqueeze(1), rewards.unsqueeze(1), terminated, truncated, self.active

    def render(self):
        return self.env.render()[0]

    def close(self) -> None:
        self.env.close()


class TagGame:
    """``gpu_envs.tag.TagEnv`` (the batched multi-agent Tag) as it is."""

    def __init__(self, num_envs: int, device: torch.device, env_kwargs: dict[str, Any],
                 render_mode: str | None = None):
        from gpu_envs.tag import TagEnv

        extra = {"render_mode": render_mode} if render_mode else {}
        try:
            self.env = TagEnv(num_envs, device=device, autoreset_mode="next_step",
                              validate_actions=False, **env_kwargs, **extra)
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
        raise ConfigError(f"policy: Tag policies are 'tagger' and 'runner' (or one shared policy); got {tags}")

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


def make_game(name: str, num_envs: int, device: torch.device, env_kwargs: dict[str, Any],
              render_mode: str | None = None):
    """The game of config ``name`` with ``num_envs`` envs on ``device``."""
    kind = {"cartpole": CartPoleGame, "tag": TagGame}[game_of(name)]
    return kind(num_envs, device, dict(env_kwargs), render_mode)

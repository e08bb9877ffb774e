"""The games the trainer runs, behind one batched multi-agent face.

Every game is seen as ``num_envs`` envs of ``num_agents`` agents: observations [E, N, obs_dim],
actions [E, N, H], rewards [E, N], per-env ``terminated`` and ``truncated`` [E], and ``active``
[E, N] (agents still in the game). Actions are MultiDiscrete (``action_nvec`` of ints, int64
actions) or Box (``action_nvec`` a ``ContinuousActions``, float32 actions). The single-agent games
(``gpu_envs.games``: CartPole, Acrobot, MountainCar: N = 1, H = 1; Pendulum, MountainCarContinuous:
N = 1 with one continuous action dim, clipped here to the env's bounds) are the case N = 1, and
so is a game registered from outside (``gpu_envs.games.register_game``) with the ``discrete`` or
``continuous`` face: any gymnasium ``VectorEnv`` of torch tensors with a ``Discrete`` or ``Box``
action space whose constructor takes ``(num_envs, device=, autoreset_mode=, validate_actions=,
render_mode=)`` and the config's ``env`` keywords, as the engine's envs do.

A game wraps an env built with NEXT_STEP autoreset (the rollout's bootstrap relies on it) and
turns the env's action validation off: the trainer samples valid actions on the device.
``make_game`` builds the env of a config's game; ``TagGame(env)`` also wraps one built by the
caller (Lightning's flow).
"""

from __future__ import annotations

from typing import Any, TypeVar

import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from gpu_envs import games
from gpu_envs.runs.config import ConfigError, game_of
from gpu_envs.trainers.policy import ContinuousActions

SpaceT = TypeVar("SpaceT", bound=spaces.Space)


class _Game:
    """What every game does with its env: NEXT_STEP autoreset, no action validation, rendering."""

    def __init__(self, env):
        if env.autoreset_mode != AutoresetMode.NEXT_STEP:
            raise ValueError(
                "env: the trainer needs autoreset_mode='next_step', "
                f"got {env.autoreset_mode.value!r}"
            )
        env.validate_actions = False
        self.env = env
        self.num_envs = env.num_envs

    def render(self):
        return self.env.render()[0]

    def close(self) -> None:
        self.env.close()


class _OneAgentGame(_Game):
    """A gymnasium vector env seen as one agent per env.

    With ``observation_scale`` ``(center, scale)`` the policy sees ``(obs - center) / scale``
    (``gpu_envs.games.Game.observation_scale``). With ``potential`` (``"module:function"``,
    ``Game.potential``) :meth:`potential` gives its value on the policy's observations.
    """

    def __init__(
        self,
        env,
        episode_length: int | None = None,
        observation_scale: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
        potential: str = "",
    ):
        super().__init__(env)
        self._potential = games.load(potential) if potential else None
        self.num_agents = 1
        self.obs_dim = env.single_observation_space.shape[0]
        self.episode_length = getattr(env, "max_episode_steps", None) or episode_length
        if not self.episode_length:
            raise ConfigError(
                f"env: {type(env).__name__} states no episode length, which the trainer's "
                "evaluations play to: give the env a max_episode_steps attribute, or its game "
                "record max_episode_steps (gpu_envs.games.Game)"
            )
        self.active = torch.ones((self.num_envs, 1), dtype=torch.bool, device=env.device)
        self._obs_scale: tuple[torch.Tensor, torch.Tensor] | None = None
        if observation_scale is not None:
            center, scale = (
                torch.tensor(values, dtype=torch.float32, device=env.device)
                for values in observation_scale
            )
            self._obs_scale = (center, scale)

    def _single_action_space(self, kind: type[SpaceT]) -> SpaceT:
        """The env's single action space, which this face needs of type ``kind`` (else a
        ``ConfigError`` naming the ``Game.trainer_face`` that fits)."""
        space = self.env.single_action_space
        if not isinstance(space, kind):
            face = "continuous" if isinstance(space, spaces.Box) else "discrete"
            raise ConfigError(
                f"name: {type(self.env).__name__} has the action space {space}, which the "
                f"trainer's {type(self).__name__} does not take; its game record needs "
                f"trainer_face={face!r} (gpu_envs.games.Game)"
            )
        return space

    def default_agent_map(self, tags: list[str]) -> dict[str, list[int]]:
        if len(tags) != 1:
            raise ConfigError(
                f"policy: {type(self.env).__name__} has one agent per env, so exactly one policy; "
                f"got {tags}"
            )
        return {tags[0]: [0]}

    def reset(self, seed: int | None) -> torch.Tensor:
        obs, _ = self.env.reset(seed=seed)
        return self.policy_obs(obs)

    def step(self, actions: torch.Tensor):
        obs, rewards, terminated, truncated, _ = self.env.step(self.env_actions(actions))
        return self.policy_obs(obs), rewards.unsqueeze(1), terminated, truncated, self.active

    def potential(self, obs: torch.Tensor) -> torch.Tensor:
        """The game's potential [E, 1] of the policy's observations [E, 1, obs_dim]."""
        if self._obs_scale is not None:
            center, scale = self._obs_scale
            obs = obs * scale + center
        if self._potential is None:
            raise ValueError(f"{type(self.env).__name__}: its game declares no Game.potential")
        return self._potential(obs)

    def policy_obs(self, obs: torch.Tensor) -> torch.Tensor:
        """The env's [E, obs_dim] observations as the policy's [E, 1, obs_dim]."""
        if self._obs_scale is not None:
            center, scale = self._obs_scale
            obs = (obs - center) / scale
        return obs.unsqueeze(1)

    def env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """The env's actions from the trainer's [E, 1, H]."""
        raise NotImplementedError


class DiscreteGame(_OneAgentGame):
    """A vector env with a ``Discrete(n)`` action space (CartPole, Acrobot, MountainCar) seen as
    one agent per env with one categorical action."""

    def __init__(self, env, **kwargs: Any):
        super().__init__(env, **kwargs)
        self.action_nvec = (int(self._single_action_space(spaces.Discrete).n),)

    def env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        return actions[:, 0, 0]


class ContinuousGame(_OneAgentGame):
    """A vector env with a ``Box`` action space (Pendulum, MountainCarContinuous) seen as one
    agent per env with a Gaussian-headed action.

    ``step`` clips the sampled actions to the action space's bounds (the log-probabilities stay
    those of the unclipped draws, as in CleanRL), so the env never sees an out-of-range action.
    """

    def __init__(self, env, **kwargs: Any):
        super().__init__(env, **kwargs)
        space = self._single_action_space(spaces.Box)
        self.action_nvec = ContinuousActions(space.shape[0])
        self._low = torch.as_tensor(space.low, device=env.device)
        self._high = torch.as_tensor(space.high, device=env.device)

    def env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        return torch.clamp(actions[:, 0], self._low, self._high)


class TagGame(_Game):
    """``gpu_envs.games.tag.env.TagEnv`` (the batched multi-agent Tag) as it is."""

    def __init__(self, env):
        super().__init__(env)
        self.num_agents = env.num_agents
        self.obs_dim, self.action_nvec = env.obs_dim, tuple(env.action_nvec)
        self.episode_length = env.episode_length

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


#: ``gpu_envs.games.Game.trainer_face`` -> the face's class.
FACES = {"discrete": DiscreteGame, "continuous": ContinuousGame, "tag": TagGame}


def make_game(
    name: str,
    num_envs: int,
    device: torch.device,
    env_kwargs: dict[str, Any],
    render_mode: str | None = None,
):
    """The game of config ``name``: its env built with ``num_envs`` envs on ``device`` and the
    config's ``env_kwargs`` (an unknown keyword is a ``ConfigError`` naming it)."""
    record = games.GAMES[game_of(name)]
    path = record.trainer_env or record.vector_env
    try:
        env_type = games.load(path)
    except (ImportError, AttributeError) as error:
        raise ConfigError(
            f"name: the env {path!r} of game {record.name!r} does not load: {error}"
        ) from error
    try:
        env = env_type(
            num_envs,
            device=device,
            autoreset_mode="next_step",
            validate_actions=False,
            render_mode=render_mode,
            **env_kwargs,
        )
    except TypeError as error:
        raise ConfigError(f"env: {error}") from None
    if record.trainer_face == "tag":
        return TagGame(env)
    face = FACES[record.trainer_face]
    return face(
        env,
        episode_length=record.max_episode_steps,
        observation_scale=record.observation_scale,
        potential=record.potential,
    )

"""rl_games' ``IVecEnv`` over our batched envs (optional extra ``rl-games``).

rl_games builds its envs by name: ``register_rl_games_env("gpu_cartpole",
"gpu_envs/CartPole-v1", device="cuda")`` registers a vec-env type and an env configuration, and a
config with ``env_name: gpu_cartpole`` and ``num_actors: N`` then trains on
``RlGamesVecEnv(gym.make_vec("gpu_envs/CartPole-v1", num_envs=N, device="cuda",
autoreset_mode=SAME_STEP))`` (``env_config`` entries are passed to ``gym.make_vec``).

``RlGamesVecEnv.step(actions)`` returns ``(obs, rewards [N] float32, dones [N] bool, infos)`` on
the env's device (rl_games keeps torch observations and actions on the device when the env hands
it tensors); the envs that ended are already reset in ``obs``; ``infos["time_outs"]`` [N] bool
marks the envs truncated and not terminated, on which rl_games' PPO bootstraps
(``value_bootstrap``, on by default), and ``infos["final_obs"]`` holds the last observation of the
episodes that ended. rl_games must run on the env's device (``config["device"]``): actions from
another device are refused.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium.vector import VectorEnv

from gpu_envs.adapters.same_step import SameStepCore, same_step_vec_env

try:
    from rl_games.common import env_configurations, vecenv
    from rl_games.common.ivecenv import IVecEnv
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError(
        "gpu_envs.adapters.rl_games needs rl_games: pip install 'gpu-envs[rl-games]'"
    ) from error

#: The rl_games vec-env type that :func:`register_rl_games_env` registers.
VECENV_TYPE = "gpu_envs"


class RlGamesVecEnv(IVecEnv):
    """An rl_games ``IVecEnv`` of a single-agent SAME_STEP vector env (see the module docstring).

    Args:
        env: the vector env (see :class:`~gpu_envs.adapters.same_step.SameStepCore`).
        device: the device rl_games runs on; must be the env's (default).
    """

    def __init__(self, env: VectorEnv, device: str | torch.device | None = None):
        self._core = SameStepCore(env, "rl_games", device)
        self.device = self._core.device
        self._next_seed: int | None = None

    @property
    def env(self) -> VectorEnv:
        """The vector env underneath."""
        return self._core.env

    def seed(self, seed: int) -> None:
        """Seed the next reset: env ``i`` gets ``seed + i``."""
        self._next_seed = int(seed)

    def reset(self) -> torch.Tensor:
        """Reset every env; the ``[N, *obs_shape]`` observations."""
        seed, self._next_seed = self._next_seed, None
        return self._core.reset(seed)

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        out = self._core.step(actions)
        infos = {"time_outs": out.time_outs, "final_obs": out.final_obs}
        return out.obs, out.rewards, out.terminated | out.truncated, infos

    def get_number_of_agents(self) -> int:
        return 1

    def get_env_info(self) -> dict[str, Any]:
        """The per-env spaces, as rl_games reads them."""
        return {
            "observation_space": self._core.observation_space,
            "action_space": self._core.action_space,
            "agents": 1,
            "value_size": 1,
        }

    def close(self) -> None:
        self._core.close()


def register_rl_games_env(
    name: str, env_id: str = "gpu_envs/CartPole-v1", **make_kwargs: Any
) -> None:
    """Make ``env_name: name`` in an rl_games config build :class:`RlGamesVecEnv` of
    ``gym.make_vec(env_id, num_envs=num_actors, autoreset_mode=SAME_STEP, **make_kwargs,
    **env_config)`` (``device`` defaults to "cpu"; a ``seed`` in ``env_config``, which rl_games'
    ``Runner`` sets from its own, seeds the first reset)."""
    if VECENV_TYPE not in vecenv.vecenv_config:
        vecenv.register(VECENV_TYPE, _create_vec_env)
    env_configurations.register(
        name,
        {
            "vecenv_type": VECENV_TYPE,
            "env_creator": lambda num_envs, **kwargs: _make(env_id, num_envs, make_kwargs, kwargs),
        },
    )


def _make(env_id: str, num_envs: int, make_kwargs: dict, env_config: dict) -> RlGamesVecEnv:
    kwargs = {"device": "cpu", **make_kwargs, **env_config}
    seed = kwargs.pop("seed", None)  # rl_games' Runner puts its seed in env_config
    env = RlGamesVecEnv(same_step_vec_env(env_id, num_envs, **kwargs))
    if seed is not None:
        env.seed(seed)
    return env


def _create_vec_env(config_name: str, num_actors: int, **kwargs: Any) -> RlGamesVecEnv:
    creator = env_configurations.configurations[config_name]["env_creator"]
    return creator(num_envs=num_actors, **kwargs)

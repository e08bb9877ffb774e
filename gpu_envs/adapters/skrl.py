"""skrl's env wrapper over our batched envs (optional extra ``skrl``).

``SkrlVecEnv(env)`` takes a single-agent vector env built with ``autoreset_mode=SAME_STEP``
(``make_skrl_env`` builds one) and gives skrl's trainers and agents what its Isaac Lab wrapper
gives them: ``observation_space`` / ``action_space`` are the per-env spaces, ``reset()`` resets
the batch once (later calls return the current observations: a vectorized env resets itself),
and ``step(actions)`` returns ``(obs [N, *obs_shape], rewards [N, 1] float32, terminated [N, 1],
truncated [N, 1], info)`` on the env's device, the envs that ended already reset in ``obs`` and
their last observation in ``info["final_obs"]``. skrl's PPO bootstraps the truncated steps with
``time_limit_bootstrap=True``. Discrete actions come as skrl's categorical models give them,
[N, 1] indices.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import VectorEnv

from gpu_envs.adapters.same_step import SameStepCore, same_step_vec_env

try:
    from skrl.envs.wrappers.torch import Wrapper
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError("gpu_envs.adapters.skrl needs skrl: pip install 'gpu-envs[skrl]'") from error


class SkrlVecEnv(Wrapper):
    """An skrl ``Wrapper`` of a single-agent SAME_STEP vector env (see the module docstring).

    Args:
        env: the vector env (see :class:`~gpu_envs.adapters.same_step.SameStepCore`).
        device: the device skrl's agent runs on; must be the env's (default).
        seed: the seed of the first reset (env ``i`` gets ``seed + i``; None: the env's own).
    """

    def __init__(
        self, env: VectorEnv, device: str | torch.device | None = None, seed: int | None = None
    ):
        self._core = SameStepCore(env, "skrl", device)
        super().__init__(env)
        self._device = self._core.device
        self._seed = seed
        self._obs: torch.Tensor | None = None

    @property
    def observation_space(self) -> gym.Space:
        """The observation space of one env."""
        return self._core.observation_space

    @property
    def action_space(self) -> gym.Space:
        """The action space of one env."""
        return self._core.action_space

    @property
    def state_space(self) -> None:
        """No separate state (the critic sees the observations)."""
        return None

    @property
    def num_envs(self) -> int:
        return self._core.num_envs

    @property
    def num_agents(self) -> int:
        return 1

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset the batch on the first call; afterwards the current observations."""
        if self._obs is None:
            self._obs = self._core.reset(self._seed)
        return self._obs, {}

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        out = self._core.step(actions)
        self._obs = out.obs
        info = {**out.info, "final_obs": out.final_obs}
        return (
            out.obs,
            out.rewards.unsqueeze(-1),
            out.terminated.unsqueeze(-1),
            out.truncated.unsqueeze(-1),
            info,
        )

    def state(self) -> None:
        """No separate state."""
        return None

    def render(self, *args, **kwargs) -> Any:
        return self._env.render()

    def close(self) -> None:
        self._core.close()


def make_skrl_env(
    env_id: str = "gpu_envs/CartPole-v1",
    num_envs: int = 64,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    **kwargs: Any,
) -> SkrlVecEnv:
    """``SkrlVecEnv`` of ``gym.make_vec(env_id, num_envs, device=device,
    autoreset_mode=SAME_STEP, **kwargs)``, first reset with ``seed``."""
    return SkrlVecEnv(same_step_vec_env(env_id, num_envs, device, **kwargs), seed=seed)

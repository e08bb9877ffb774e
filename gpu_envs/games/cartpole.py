"""CartPole-v1 as a batched gymnasium ``VectorEnv`` (torch tensors) and as a single
``gymnasium.Env``.

The dynamics are gymnasium's CartPole-v1 (see docs/spec-cartpole.md and docs/cartpole.md), stepped
by ``gpu_envs.kernels.cartpole_logic`` on the CPU (njit) or a CUDA GPU.

Spaces:

- Observation: ``Box(-high, high, (4,), float32)`` with ``high = [4.8, inf, 0.41887903, inf]``:
  cart position, cart velocity, pole angle (rad), pole angular velocity.
- Action: ``Discrete(2)``: 0 pushes the cart left, 1 pushes it right (force 10 N).

Rewards and episode end: +1 per step, including the terminating one (``sutton_barto_reward=True``: 0
per step, -1 on termination). Terminated when ``|x| > 2.4`` or ``|theta| > 12 deg``; truncated
after ``max_episode_steps`` (500).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from gpu_envs.engine.classic_control import (
    GAME_DEFAULT,
    ClassicControlVectorEnv,
    GameDefault,
    reset_bounds,
)
from gpu_envs.engine.kernel_env import episode_buffers
from gpu_envs.engine.single import SingleEnv
from gpu_envs.engine.validation import as_bool
from gpu_envs.games import GAMES
from gpu_envs.kernels import cartpole_logic as logic

_OBS_HIGH = np.array([2.4 * 2, np.inf, 12 * 2 * math.pi / 360 * 2, np.inf], dtype=np.float32)
_GAME = GAMES["cartpole"]


# gymnasium's VectorEnv among the direct bases: skrl's wrap_env detects gymnasium envs by them
class CartPoleVectorEnv(ClassicControlVectorEnv, VectorEnv):
    """``num_envs`` CartPole-v1 games stepped together on ``device``; tensors in, tensors out.

    Args:
        num_envs: number of games.
        device: "cpu", "cuda", "cuda:N" or "auto" (CUDA when usable, else CPU).
        dtype: state precision, float64 (CPU default, bit-exact with gymnasium) or float32 (CUDA
            default). Observations and rewards are float32 either way.
        max_episode_steps: truncation horizon (0 or None: never truncate); by default
            gymnasium's registration's.
        sutton_barto_reward: 0 per step and -1 on termination instead of +1 per step.
        autoreset_mode: ``AutoresetMode`` NEXT_STEP (default), SAME_STEP or DISABLED.
        render_mode: None or "rgb_array" (``render()`` returns one frame per env).
        validate_actions: check the action values (and stepping a finished env in DISABLED mode)
            before each step; shapes and dtypes are always checked. On CUDA the value check costs
            one host synchronisation per step; trainers that sample valid actions on the device may
            turn it off.

    ``state`` is the live [num_envs, 4] state (x, x_dot, theta, theta_dot), assignable.
    """

    game = "cartpole"
    logic = logic
    state_size = 4
    default_bounds = (-0.05, 0.05)
    renderer = "gymnasium.envs.classic_control.cartpole:CartPoleEnv"
    default_max_episode_steps = _GAME.max_episode_steps
    scratch_buffers = ("trig",)
    metadata = {
        "render_modes": ["rgb_array"],
        "render_fps": _GAME.render_fps,
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        dtype=None,
        max_episode_steps: int | None | GameDefault = GAME_DEFAULT,
        sutton_barto_reward: bool = False,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        validate_actions: bool = True,
    ):
        self.sutton_barto_reward = as_bool(sutton_barto_reward, "sutton_barto_reward")
        super().__init__(
            num_envs,
            device,
            dtype,
            max_episode_steps,
            autoreset_mode,
            render_mode,
            validate_actions,
        )

    def make_spaces(self) -> tuple[gym.Space, gym.Space]:
        return gym.spaces.Box(-_OBS_HIGH, _OBS_HIGH, dtype=np.float32), gym.spaces.Discrete(2)

    def make_consts(self) -> np.ndarray:
        return logic.make_consts(self.real_dtype)

    def buffer_layout(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """The state component-major (``state[k, i]``, see ``cartpole_logic``), outputs (float32
        rewards), scratch."""
        n = self.num_envs
        return {
            "trig": ((2, n), self.real_dtype),  # scratch: cos and sin of every pole angle
            "state": ((4, n), self.real_dtype),
            "elapsed": ((n,), np.dtype(np.int32)),
            **episode_buffers(n, (4,)),
        }

    def settings(self) -> dict[str, Any]:
        return {
            "max_episode_steps": self.max_episode_steps,
            "sutton_barto_reward": self.sutton_barto_reward,
            "autoreset_mode": self.autoreset_code,
        }

    @staticmethod
    def draw_start_state(
        np_random: np.random.Generator, options: dict[str, Any] | None
    ) -> np.ndarray:
        """gymnasium's draw: uniform in [low, high)^4 from the env's seeded ``np_random``."""
        low, high = reset_bounds(options, *CartPoleVectorEnv.default_bounds)
        return np_random.uniform(low=low, high=high, size=(4,))

    @staticmethod
    def observation_of(state: np.ndarray) -> np.ndarray:
        """The float32 observation of a float64 state."""
        return np.array(state, dtype=np.float32)


class CartPoleEnv(SingleEnv):
    """A single CartPole-v1 game (NumPy in and out), a drop-in for gymnasium's ``CartPoleEnv``:
    ``reset(seed=s)`` starts where gymnasium's does (see :mod:`gpu_envs.engine.single`)."""

    vector_class = CartPoleVectorEnv

    def __init__(self, sutton_barto_reward: bool = False, render_mode: str | None = None):
        super().__init__(render_mode=render_mode, sutton_barto_reward=sutton_barto_reward)
        self._sutton_barto_reward = sutton_barto_reward

    def reward_after_termination(self, reward: float) -> float:
        """Gymnasium's CartPole: 0 (``sutton_barto_reward``: -1) on each step after termination."""
        return -1.0 if self._sutton_barto_reward else 0.0

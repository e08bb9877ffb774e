"""Acrobot-v1 as a batched gymnasium ``VectorEnv`` (torch tensors) and as a single
``gymnasium.Env``.

The dynamics are gymnasium's Acrobot-v1 (see ``docs/acrobot.md``), stepped by
``gpu_envs.kernels.acrobot_logic`` on the CPU (njit) or a CUDA GPU.

The game: two links hang in a chain from a fixed pivot; the joint between them is actuated, the
pivot is not. Starting near hanging straight down, the agent swings the chain until the free end
rises above a line one link length over the pivot.

Spaces:

- Observation: ``Box(-high, high, (6,), float32)`` with ``high = [1, 1, 1, 1, 4 pi, 9 pi]``:
  ``[cos(theta1), sin(theta1), cos(theta2), sin(theta2), dtheta1, dtheta2]``; theta1 is the first
  link's angle from straight down, theta2 the second link's angle relative to the first.
- Action: ``Discrete(3)``: torque -1, 0 or +1 N m on the joint between the links.

Dynamics: the equations of motion of Sutton and Barto's book, integrated by one fourth-order
Runge-Kutta step of 0.2 s; the angles are wrapped into [-pi, pi], the angular velocities bounded
to [-4 pi, 4 pi] and [-9 pi, 9 pi].

Reward -1 per step, 0 on the terminating one. Terminated when
``-cos(theta1) - cos(theta2 + theta1) > 1``; truncated after ``max_episode_steps`` (500). Start
state: each of the four values uniform in [-0.1, 0.1) (reset options ``low``/``high``), rounded to
float32 as gymnasium's.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from gpu_envs.engine.classic_control import ClassicControlVectorEnv, reset_bounds
from gpu_envs.engine.single import SingleEnv
from gpu_envs.games import GAMES
from gpu_envs.kernels import acrobot_logic as logic

_OBS_HIGH = np.array([1.0, 1.0, 1.0, 1.0, 4 * math.pi, 9 * math.pi], dtype=np.float32)
_GAME = GAMES["acrobot"]


# gymnasium's VectorEnv among the direct bases: skrl's wrap_env detects gymnasium envs by them
class AcrobotVectorEnv(ClassicControlVectorEnv, VectorEnv):
    """``num_envs`` Acrobot-v1 games stepped together on ``device``; tensors in, tensors out.

    Arguments as :class:`~gpu_envs.engine.classic_control.ClassicControlVectorEnv`
    (``max_episode_steps`` 500 by default). Actions are an int tensor of shape [num_envs] in
    {0, 1, 2}. ``state`` is the live [num_envs, 4] state (theta1, theta2, dtheta1, dtheta2),
    assignable.
    """

    game = "acrobot"
    logic = logic
    state_size = 4
    default_bounds = (-0.1, 0.1)
    renderer = "gymnasium.envs.classic_control.acrobot:AcrobotEnv"
    default_max_episode_steps = _GAME.max_episode_steps
    metadata = {
        "render_modes": ["rgb_array"],
        "render_fps": _GAME.render_fps,
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def make_spaces(self) -> tuple[gym.Space, gym.Space]:
        return gym.spaces.Box(-_OBS_HIGH, _OBS_HIGH, dtype=np.float32), gym.spaces.Discrete(3)

    def make_consts(self) -> np.ndarray:
        return logic.make_consts(self.real_dtype)

    @staticmethod
    def draw_start_state(np_random: np.random.Generator, options) -> np.ndarray:
        """gymnasium's draw: uniform in [low, high)^4 from ``np_random``, rounded to float32."""
        low, high = reset_bounds(options, *AcrobotVectorEnv.default_bounds)
        return np_random.uniform(low=low, high=high, size=(4,)).astype(np.float32)

    @staticmethod
    def observation_of(state: np.ndarray) -> np.ndarray:
        """gymnasium's observation of the state, in float32."""
        theta1, theta2, dtheta1, dtheta2 = np.asarray(state, dtype=np.float64)
        return np.array(
            [np.cos(theta1), np.sin(theta1), np.cos(theta2), np.sin(theta2), dtheta1, dtheta2],
            dtype=np.float32,
        )


class AcrobotEnv(SingleEnv):
    """A single Acrobot-v1 game (NumPy in and out), a drop-in for gymnasium's ``AcrobotEnv``:
    ``reset(seed=s)`` starts where gymnasium's does (see :mod:`gpu_envs.engine.single`)."""

    vector_class = AcrobotVectorEnv

    def __init__(self, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)

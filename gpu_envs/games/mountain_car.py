"""MountainCar-v0 and MountainCarContinuous-v0 as batched gymnasium ``VectorEnv``\\ s (torch
tensors) and as single ``gymnasium.Env``\\ s.

The dynamics are gymnasium's (see ``docs/mountain-car.md``), stepped by
``gpu_envs.kernels.mountain_car_logic`` on the CPU (njit) or a CUDA GPU.

The game: a car sits in a valley between two hills, on the track ``y = sin(3 x)``; its engine is
too weak to climb the right hill directly, so it must rock back and forth to build momentum and
reach the flag on the right hilltop.

Spaces (both games):

- Observation: ``Box([-1.2, -0.07], [0.6, 0.07], (2,), float32)``: ``[position, velocity]``.
- Action: MountainCar-v0 ``Discrete(3)``: accelerate left (0), not at all (1), right (2).
  MountainCarContinuous-v0 ``Box(-1, 1, (1,), float32)``: the force (clipped to [-1, 1] by the
  step; the vector env with ``validate_actions=True`` refuses values outside it instead).

Dynamics: ``velocity += push - 0.0025 cos(3 position)`` with ``push = (action - 1) * 0.001``
(discrete) or ``force * 0.0015`` (continuous); the velocity is limited to [-0.07, 0.07], the
position to [-1.2, 0.6], and the car stops at the left end.

Rewards and episode end: MountainCar-v0 -1 per step; terminated when ``position >= 0.5`` (and
``velocity >= goal_velocity``, 0); truncated after 200 steps. MountainCarContinuous-v0
``-0.1 force**2`` per step plus 100 on reaching ``position >= 0.45``; truncated after 999 steps.
Start: position uniform in [-0.6, -0.4) (reset options ``low``/``high``), velocity 0.
MountainCarContinuous-v0 keeps its state in float32, as gymnasium does.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

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
from gpu_envs.engine.single import SingleEnv
from gpu_envs.engine.validation import as_finite_real
from gpu_envs.games import GAMES
from gpu_envs.kernels import mountain_car_logic as logic

_OBS_LOW = np.array([-1.2, -0.07], dtype=np.float32)
_OBS_HIGH = np.array([0.6, 0.07], dtype=np.float32)


def mechanical_energy(obs: torch.Tensor) -> torch.Tensor:
    """The car's energy ``U + v**2 / 2`` per unit mass, ``U(x) = 0.0025 / 3 * sin(3 x)`` (the
    gravity term of the dynamics), in units of ``0.0025 / 3`` and less its value at the flag at
    rest (``x = 0.5``): about -2 in the valley, 0 at the flag, so the 0 of a terminal state is no
    jump. MountainCar-v0's potential of ``trainer.reward_shaping`` ([..., 2] -> [...])."""
    position, velocity = obs[..., 0], obs[..., 1]
    return torch.sin(3.0 * position) + velocity * velocity * (1.5 / 0.0025) - math.sin(1.5)


# gymnasium's VectorEnv among the direct bases: skrl's wrap_env detects gymnasium envs by them
class MountainCarVectorEnv(ClassicControlVectorEnv, VectorEnv):
    """``num_envs`` MountainCar-v0 games stepped together on ``device``; tensors in, tensors out.

    Arguments as :class:`~gpu_envs.engine.classic_control.ClassicControlVectorEnv`
    (``max_episode_steps`` 200 by default), and ``goal_velocity`` (gymnasium's, default 0).
    Actions are an int tensor of shape [num_envs] in {0, 1, 2}. ``state`` is the live
    [num_envs, 2] state (position, velocity), assignable.
    """

    game = "mountain_car"
    logic = logic.DISCRETE
    continuous = False
    state_size = 2
    default_bounds = (-0.6, -0.4)
    renderer = "gymnasium.envs.classic_control.mountain_car:MountainCarEnv"
    default_max_episode_steps = GAMES["mountaincar"].max_episode_steps
    metadata = {
        "render_modes": ["rgb_array"],
        "render_fps": GAMES["mountaincar"].render_fps,
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        dtype=None,
        max_episode_steps: int | None | GameDefault = GAME_DEFAULT,
        goal_velocity: float = 0.0,
        **kwargs: Any,
    ):
        self.goal_velocity = as_finite_real(goal_velocity, "goal_velocity")
        super().__init__(num_envs, device, dtype, max_episode_steps, **kwargs)

    def make_spaces(self) -> tuple[gym.Space, gym.Space]:
        return gym.spaces.Box(_OBS_LOW, _OBS_HIGH, dtype=np.float32), self.make_action_space()

    def make_consts(self) -> np.ndarray:
        return logic.make_consts(self.continuous, self.goal_velocity)

    @staticmethod
    def make_action_space() -> gym.Space:
        """The game's single action space."""
        return gym.spaces.Discrete(3)

    @classmethod
    def draw_start_state(cls, np_random: np.random.Generator, options) -> np.ndarray:
        """gymnasium's draw: position uniform in [low, high) from ``np_random``, velocity 0."""
        low, high = reset_bounds(options, *cls.default_bounds)
        return np.array([np_random.uniform(low=low, high=high), 0])

    @staticmethod
    def observation_of(state: np.ndarray) -> np.ndarray:
        """The float32 observation of the state."""
        return np.array(state, dtype=np.float32)


# gymnasium's VectorEnv among the direct bases: skrl's wrap_env detects gymnasium envs by them
class MountainCarContinuousVectorEnv(MountainCarVectorEnv, VectorEnv):
    """``num_envs`` MountainCarContinuous-v0 games; as :class:`MountainCarVectorEnv`, with actions
    a float tensor of shape [num_envs, 1] (the force, used as float32) and
    ``max_episode_steps`` 999 by default."""

    game = "mountain_car_continuous"
    logic = logic.CONTINUOUS
    continuous = True
    renderer = "gymnasium.envs.classic_control.continuous_mountain_car:Continuous_MountainCarEnv"
    default_max_episode_steps = GAMES["mountaincar-continuous"].max_episode_steps
    metadata = {
        **MountainCarVectorEnv.metadata,
        "render_fps": GAMES["mountaincar-continuous"].render_fps,
    }

    @staticmethod
    def make_action_space() -> gym.Space:
        return gym.spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)


class MountainCarEnv(SingleEnv):
    """A single MountainCar-v0 game (NumPy in and out), a drop-in for gymnasium's
    ``MountainCarEnv``: ``reset(seed=s)`` starts where gymnasium's does (see
    :mod:`gpu_envs.engine.single`)."""

    vector_class: ClassVar[type[MountainCarVectorEnv]] = MountainCarVectorEnv
    #: Whether the vector env refuses out-of-range actions (the continuous game clips them).
    validates_actions: ClassVar[bool] = True

    def __init__(self, render_mode: str | None = None, goal_velocity: float = 0.0):
        super().__init__(
            render_mode=render_mode,
            goal_velocity=goal_velocity,
            validate_actions=self.validates_actions,
        )


class MountainCarContinuousEnv(MountainCarEnv):
    """A single MountainCarContinuous-v0 game, a drop-in for gymnasium's
    ``Continuous_MountainCarEnv``; forces outside [-1, 1] are clipped as gymnasium clips them."""

    vector_class = MountainCarContinuousVectorEnv
    validates_actions = False

    def step(self, action):
        """One step with the force ``action`` (shape (1,)), used as float32 like the action
        space."""
        return super().step(np.asarray(action, dtype=np.float32))

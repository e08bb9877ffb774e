"""Pendulum-v1 as a batched gymnasium ``VectorEnv`` (torch tensors) and as a single
``gymnasium.Env``.

The dynamics are gymnasium's Pendulum-v1 (see ``docs/pendulum.md``), stepped by
``gpu_envs.kernels.pendulum_logic`` on the CPU (njit) or a CUDA GPU, written only through the
engine's public API (:class:`~gpu_envs.engine.kernel_env.KernelEnv`).

Spaces:

- Observation: ``Box([-1, -1, -8], [1, 1, 8], (3,), float32)``: ``[cos(theta), sin(theta),
  theta_dot]``.
- Action: ``Box(-2, 2, (1,), float32)``: the torque. The step clips it to [-2, 2] like gymnasium;
  the vector env with ``validate_actions=True`` refuses values outside it instead.

Reward ``-(angle**2 + 0.1 * theta_dot**2 + 0.001 * torque**2)`` (angle normalised to [-pi, pi));
never terminates; truncated after ``max_episode_steps`` (200).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.classic_control.utils import verify_number_and_cast
from gymnasium.vector import AutoresetMode, VectorEnv

from gpu_envs.engine.classic_control import GAME_DEFAULT, ClassicControlVectorEnv, GameDefault
from gpu_envs.engine.single import SingleEnv
from gpu_envs.engine.validation import as_finite_real
from gpu_envs.games import GAMES
from gpu_envs.kernels import pendulum_logic as logic

_OBS_HIGH = np.array([1.0, 1.0, 8.0], dtype=np.float32)
_MAX_TORQUE = 2.0
_DEFAULT_BOUNDS = (np.pi, 1.0)
_GAME = GAMES["pendulum"]


def reset_bounds(options: dict[str, Any] | None, dtype=np.float64) -> np.ndarray:
    """``[x_init, y_init]`` from the reset options as gymnasium reads them (defaults pi and 1).

    Each must be a finite number (gymnasium's ``verify_number_and_cast``) whose range
    ``[-x_init, x_init]`` has a finite width in ``dtype`` (NumPy's ``uniform``, which gymnasium
    draws with, raises ``OverflowError`` past that); the draw is symmetric, uniform in
    ``[-x_init, x_init] x [-y_init, y_init]``.
    """
    limit = float(np.finfo(dtype).max) / 2
    options = options or {}
    bounds = []
    for key, default in zip(("x_init", "y_init"), _DEFAULT_BOUNDS):
        try:
            value = verify_number_and_cast(options.get(key, default))
        except ValueError:
            value = math.nan  # refused below, naming the option
        if not math.isfinite(value) or abs(value) > limit:
            raise ValueError(
                f"options['{key}'] must be a finite number of at most {limit:.3g} in size (the "
                f"start-state bound, in {np.dtype(dtype).name}), got {options.get(key)!r}"
            )
        bounds.append(value)
    return np.array(bounds, dtype=np.float64)


# gymnasium's VectorEnv among the direct bases: skrl's wrap_env detects gymnasium envs by them
class PendulumVectorEnv(ClassicControlVectorEnv, VectorEnv):
    """``num_envs`` Pendulum-v1 games stepped together on ``device``; tensors in, tensors out.

    Args:
        num_envs: number of games.
        device: "cpu", "cuda", "cuda:N" or "auto" (CUDA when usable, else CPU).
        dtype: state precision, float64 (CPU default, bit-exact with gymnasium) or float32 (CUDA
            default). Observations are float32 either way; rewards have the state's dtype.
        max_episode_steps: truncation horizon (0 or None: never truncate); by default
            gymnasium's registration's.
        g: gravity (gymnasium's default 10.0).
        autoreset_mode: ``AutoresetMode`` NEXT_STEP (default), SAME_STEP or DISABLED.
        render_mode: None or "rgb_array" (``render()`` returns one frame per env).
        validate_actions: refuse torques outside [-2, 2] (and NaN) before each step; without it the
            step clips them like gymnasium. Shapes and dtypes are always checked. On CUDA the value
            check costs one host synchronisation per step.

    Actions are a float tensor of shape [num_envs, 1], used as float32. ``state`` is the live
    [num_envs, 2] state (theta, theta_dot), assignable.
    """

    game = "pendulum"
    logic = logic
    state_size = 2
    default_bounds = _DEFAULT_BOUNDS
    renderer = "gymnasium.envs.classic_control.pendulum:PendulumEnv"
    render_attributes = {"last_u": None}  # (no torque arrow)
    default_max_episode_steps = _GAME.max_episode_steps
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
        g: float = 10.0,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        validate_actions: bool = True,
    ):
        self.g = as_finite_real(g, "g (gravity)")
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
        observations = gym.spaces.Box(-_OBS_HIGH, _OBS_HIGH, dtype=np.float32)
        return observations, gym.spaces.Box(-_MAX_TORQUE, _MAX_TORQUE, (1,), dtype=np.float32)

    def make_consts(self) -> np.ndarray:
        return logic.make_consts(self.g, self.real_dtype)

    def apply_reset_options(self, options: dict[str, Any]) -> None:
        """``x_init``/``y_init``: the bounds of the symmetric start-state draw (gymnasium's
        options).

        They hold for this reset and the autoresets after it, until the next ``reset()``.
        """
        unknown = set(options) - {"x_init", "y_init"}
        if unknown:
            raise ValueError(
                f"unknown reset option(s) {sorted(unknown)}: allowed x_init, y_init, reset_mask"
            )
        bounds = reset_bounds(options, self.real_dtype)
        if not np.array_equal(bounds, self._bounds):
            self._bounds = bounds
            self.update_constants()

    @staticmethod
    def draw_start_state(
        np_random: np.random.Generator, options: dict[str, Any] | None
    ) -> np.ndarray:
        """gymnasium's draw: uniform in [-x_init, x_init) x [-y_init, y_init) from ``np_random``."""
        high = reset_bounds(options)
        return np_random.uniform(low=-high, high=high)

    @staticmethod
    def observation_of(state: np.ndarray) -> np.ndarray:
        """gymnasium's observation ``[cos(theta), sin(theta), theta_dot]`` in float32."""
        theta, theta_dot = state
        return np.array([np.cos(theta), np.sin(theta), theta_dot], dtype=np.float32)


class PendulumEnv(SingleEnv):
    """A single Pendulum-v1 game (NumPy in and out), a drop-in for gymnasium's ``PendulumEnv``:
    ``reset(seed=s)`` starts where gymnasium's does (see :mod:`gpu_envs.engine.single`), and torques
    outside [-2, 2] are clipped as gymnasium clips them."""

    vector_class = PendulumVectorEnv

    def __init__(self, render_mode: str | None = None, g: float = 10.0):
        super().__init__(render_mode=render_mode, g=g, validate_actions=False)

    def step(self, action):
        """One step with the torque ``action`` (shape (1,)), used as float32 like the action
        space."""
        return super().step(np.asarray(action, dtype=np.float32))

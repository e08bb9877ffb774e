"""CartPole-v1 as a batched gymnasium ``VectorEnv`` (torch tensors) and as a single
``gymnasium.Env``.

The dynamics are gymnasium's CartPole-v1 (see docs/spec-cartpole.md and docs/cartpole.md), stepped
by ``gpu_envs.kernels.cartpole_logic`` on the CPU (njit) or a CUDA GPU.

Spaces:

- Observation: ``Box(-high, high, (4,), float32)`` with ``high = [4.8, inf, 0.41887903, inf]``:
  cart position, cart velocity, pole angle (rad), pole angular velocity.
- Action: ``Discrete(2)``: 0 pushes the cart left, 1 pushes it right (force 10 N).

Rewards and episode end: +1 per step, including the terminating one (``sutton_barto_reward=True``: 0
per step, -1 on
termination). Terminated when ``|x| > 2.4`` or ``|theta| > 12 deg``; truncated after
``max_episode_steps`` (500).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from gpu_envs.engine import devices
from gpu_envs.engine.classic_control import reset_bounds
from gpu_envs.engine.kernel_env import ComponentMajorState, KernelEnv, episode_buffers
from gpu_envs.engine.single import SingleEnv
from gpu_envs.engine.validation import check_max_episode_steps
from gpu_envs.kernels import cartpole_logic as logic

_OBS_HIGH = np.array([2.4 * 2, np.inf, 12 * 2 * math.pi / 360 * 2, np.inf], dtype=np.float32)
_DEFAULT_LOW, _DEFAULT_HIGH = -0.05, 0.05


def _reset_bounds(options: dict[str, Any] | None) -> tuple[float, float]:
    """gymnasium's ``low``/``high`` reset options with CartPole's defaults (checked as given)."""
    return reset_bounds(options, _DEFAULT_LOW, _DEFAULT_HIGH)


class CartPoleVectorEnv(ComponentMajorState, KernelEnv, VectorEnv):
    """``num_envs`` CartPole-v1 games stepped together on ``device``; tensors in, tensors out.

    Args:
        num_envs: number of games.
        device: "cpu", "cuda", "cuda:N" or "auto" (CUDA when usable, else CPU).
        dtype: state precision, float64 (CPU default, bit-exact with gymnasium) or float32 (CUDA
            default). Observations are float32 either way.
        max_episode_steps: truncation horizon (0 or None: never truncate).
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
    scratch_buffers = ("trig",)
    component_major_buffers = ("state",)
    step_writes_every_output = True
    metadata = {
        "render_modes": ["rgb_array"],
        "render_fps": 50,
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        dtype=None,
        max_episode_steps: int | None = 500,
        sutton_barto_reward: bool = False,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        validate_actions: bool = True,
    ):
        super().__init__(
            num_envs,
            device,
            autoreset_mode=autoreset_mode,
            render_mode=render_mode,
            validate_actions=validate_actions,
        )
        self.dtype = devices.resolve_dtype(dtype, self.device)
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.sutton_barto_reward = bool(sutton_barto_reward)
        self.single_observation_space = gym.spaces.Box(-_OBS_HIGH, _OBS_HIGH, dtype=np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self._consts = logic.make_consts(devices.torch_to_numpy_dtype(self.dtype))
        self._bounds = np.array([_DEFAULT_LOW, _DEFAULT_HIGH], dtype=np.float64)
        self._build()

    def buffer_layout(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """The state component-major (``state[k, i]``, see ``cartpole_logic``), outputs, scratch."""
        n, real = self.num_envs, devices.torch_to_numpy_dtype(self.dtype)
        return {
            "trig": ((2, n), real),  # scratch: cos and sin of every pole angle
            "state": ((4, n), real),
            "elapsed": ((n,), np.dtype(np.int32)),
            **episode_buffers(n, (4,)),
        }

    def constants(self) -> tuple[np.ndarray, ...]:
        return self._consts, self._bounds

    def settings(self) -> tuple:
        return self.max_episode_steps, self.sutton_barto_reward, self.autoreset_code

    def apply_reset_options(self, options: dict[str, Any]) -> None:
        """``low``/``high``: the bounds of the uniform start-state draw (gymnasium's options)."""
        unknown = set(options) - {"low", "high"}
        if unknown:
            raise ValueError(
                f"unknown reset option(s) {sorted(unknown)}: allowed low, high, reset_mask"
            )
        low, high = _reset_bounds(options)
        if (low, high) != tuple(self._bounds):
            self._bounds[:] = (low, high)
            self.update_constants()

    @staticmethod
    def draw_start_state(
        np_random: np.random.Generator, options: dict[str, Any] | None
    ) -> np.ndarray:
        """gymnasium's draw: uniform in [low, high)^4 from the env's seeded ``np_random``."""
        low, high = _reset_bounds(options)
        return np_random.uniform(low=low, high=high, size=(4,))

    @staticmethod
    def observation_of(state: np.ndarray) -> np.ndarray:
        """The float32 observation of a float64 state."""
        return np.array(state, dtype=np.float32)

    def render_frames(self) -> tuple[np.ndarray, ...]:
        from gpu_envs.engine.rendering import gymnasium_frames

        return gymnasium_frames(
            "gymnasium.envs.classic_control.cartpole:CartPoleEnv", self.state.double().cpu().numpy()
        )


class CartPoleEnv(SingleEnv):
    """A single CartPole-v1 game (NumPy in and out), a drop-in for gymnasium's ``CartPoleEnv``:
    ``reset(seed=s)`` starts where gymnasium's does (see :mod:`gpu_envs.engine.single`)."""

    vector_class = CartPoleVectorEnv
    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, sutton_barto_reward: bool = False, render_mode: str | None = None):
        super().__init__(render_mode=render_mode, sutton_barto_reward=sutton_barto_reward)

"""CartPole-v1 as a batched gymnasium ``VectorEnv`` (torch tensors) and as a single ``gymnasium.Env``.

The dynamics are gymnasium's CartPole-v1 (see SPEC-cartpole.md), stepped by the kernels of
``gpu_envs.kernels.cartpole_*`` on the CPU (njit) or a CUDA GPU.

Spaces:

- Observation: ``Box(-high, high, (4,), float32)`` with ``high = [4.8, inf, 0.41887903, inf]``:
  cart position, cart velocity, pole angle (rad), pole angular velocity.
- Action: ``Discrete(2)``: 0 pushes the cart left, 1 pushes it right (force 10 N).

Rewards and episode end: +1 per step, including the terminating one (``sutton_barto_reward=True``: 0 per step, -1 on
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
from gymnasium.envs.classic_control.utils import maybe_parse_reset_bounds
from gymnasium.vector.utils import batch_space

from gpu_envs import devices
from gpu_envs.kernels import cartpole_logic as logic
from gpu_envs.kernels.cartpole_buffers import OUTPUT_LAYOUT, CartPoleBuffers
from gpu_envs.validation import (AUTORESET_CODES, as_action_tensor, as_reset_mask, check_all_reset,
                                  check_positive_int, parse_autoreset_mode, per_env_seeds, raise_out_of_range)

_OBS_HIGH = np.array([2.4 * 2, np.inf, 12 * 2 * math.pi / 360 * 2, np.inf], dtype=np.float32)
_DEFAULT_LOW, _DEFAULT_HIGH = -0.05, 0.05


class CartPoleVectorEnv(VectorEnv):
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
        validate_actions: check actions (and stepping a finished env in DISABLED mode) before each
            step. On CUDA this costs one host synchronisation per step; trainers that sample valid
            actions on the device may turn it off.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, device: str | torch.device = "cpu", dtype=None,
                 max_episode_steps: int | None = 500, sutton_barto_reward: bool = False,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 render_mode: str | None = None, validate_actions: bool = True):
        self.num_envs = check_positive_int(num_envs, "num_envs")
        self.device = devices.resolve_device(device)
        self._on_cpu = self.device.type == "cpu"
        self.dtype = devices.resolve_dtype(dtype, self.device)
        if max_episode_steps is not None and (isinstance(max_episode_steps, bool) or max_episode_steps < 0):
            raise ValueError(f"max_episode_steps must be an int >= 0 or None, got {max_episode_steps!r}")
        self.max_episode_steps = int(max_episode_steps or 0)
        self.sutton_barto_reward = bool(sutton_barto_reward)
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        self._autoreset_code = AUTORESET_CODES[self.autoreset_mode]
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.validate_actions = bool(validate_actions)
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}

        self.single_observation_space = gym.spaces.Box(-_OBS_HIGH, _OBS_HIGH, dtype=np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        self._tensors = self._allocate()
        self._views = CartPoleBuffers(*[
            devices.as_uint64_view(t) if name in ("episode", "env_seed") else devices.kernel_view(t)
            for name, t in zip(CartPoleBuffers._fields, self._tensors)
        ])
        final_outputs = () if self.autoreset_mode == AutoresetMode.SAME_STEP else ("final_obs", "has_final_obs")
        self._outputs = devices.StepOutputs(OUTPUT_LAYOUT, self.num_envs, self.device,
                                           partial=("final_obs",), unused=final_outputs)
        self._consts = logic.make_consts(devices.torch_to_numpy_dtype(self.dtype))
        self._bounds = np.array([_DEFAULT_LOW, _DEFAULT_HIGH], dtype=np.float64)
        if not self._on_cpu:  # the CPU kernel reads the caller's actions in place
            self._actions = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
            self._actions_view = devices.kernel_view(self._actions)
        self._driver = self._load_driver()
        self._scratch = self._driver.make_scratch(self.num_envs, devices.torch_to_numpy_dtype(self.dtype))
        if self.device.type == "cuda":
            from numba import cuda

            self._consts_device = cuda.to_device(self._consts)
            self._bounds_device = cuda.to_device(self._bounds)
        self._entropy_seed = int(np.random.SeedSequence().entropy % (2**62))
        self._seeded = False
        self._is_reset = False

    # ----------------------------------------------------------------------------- set-up
    def _allocate(self) -> CartPoleBuffers:
        n, dev = self.num_envs, self.device
        return CartPoleBuffers(
            state=torch.zeros((4, n), dtype=self.dtype, device=dev),  # component-major (see cartpole_logic)
            elapsed=torch.zeros(n, dtype=torch.int32, device=dev),
            needs_reset=torch.zeros(n, dtype=torch.bool, device=dev),
            episode=torch.zeros(n, dtype=torch.int64, device=dev),
            env_seed=torch.zeros(n, dtype=torch.int64, device=dev),
        )

    def _load_driver(self):
        if self._on_cpu:
            from gpu_envs.kernels import cartpole_cpu

            return cartpole_cpu
        from gpu_envs.kernels import cartpole_cuda

        return cartpole_cuda

    def _kernel_consts(self):
        if self._on_cpu:
            return self._consts, self._bounds
        self._bounds_device.copy_to_device(self._bounds)
        return self._consts_device, self._bounds_device

    # ----------------------------------------------------------------------------- state
    @property
    def state(self) -> torch.Tensor:
        """The [num_envs, 4] state (x, x_dot, theta, theta_dot): a view, writes go to the envs.

        The kernels store it component-major, so this view is not contiguous (its ``.T`` is).
        """
        return self._tensors.state.T

    @state.setter
    def state(self, value) -> None:
        value = torch.as_tensor(value, dtype=self.dtype, device=self.device)
        if value.shape != (self.num_envs, 4):
            raise ValueError(f"state must have shape ({self.num_envs}, 4), got {tuple(value.shape)}")
        self._tensors.state.copy_(value.T)

    # ----------------------------------------------------------------------------- API
    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        """Reset all envs, or those in ``options["reset_mask"]``; ``low``/``high`` set the draw bounds.

        ``seed=s`` seeds env ``i`` with ``s + i`` (a list gives one seed per env); env ``i``'s start
        states then depend only on its own seed and episode count.
        """
        options = dict(options or {})
        unknown = set(options) - {"low", "high", "reset_mask"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}: allowed low, high, reset_mask")
        low, high = maybe_parse_reset_bounds(options, _DEFAULT_LOW, _DEFAULT_HIGH)
        self._bounds[:] = (low, high)
        if "reset_mask" in options:
            mask = as_reset_mask(options["reset_mask"], self.num_envs, self.device)
        else:
            mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        if seed is not None or not self._seeded:
            self._seed(mask, self._entropy_seed if seed is None else seed)
        _, bounds = self._kernel_consts()
        self._driver.reset(self._views, devices.kernel_view(mask), bounds, **self._stream_kwargs())
        self._is_reset = True
        return self.state.to(torch.float32, memory_format=torch.contiguous_format, copy=True), {}

    def _seed(self, mask: torch.Tensor, seed) -> None:
        seeds = per_env_seeds(seed, self.num_envs, self.device)
        self._tensors.env_seed.copy_(torch.where(mask, seeds, self._tensors.env_seed))
        self._tensors.episode.masked_fill_(mask, 0)
        self._seeded = True

    def step(self, actions):
        """Advance every env by one step; ``actions`` is an integer tensor/array of shape [num_envs]."""
        if not self._is_reset:
            raise RuntimeError("call reset() before step()")
        if self.validate_actions:
            # The CPU kernel checks the range itself, before stepping: cheaper than a separate pass.
            actions = as_action_tensor(actions, (self.num_envs,), self.device, 1, check_range=not self._on_cpu)
            if self.autoreset_mode == AutoresetMode.DISABLED:
                check_all_reset(self._tensors.needs_reset, "env")
        else:
            actions = torch.as_tensor(actions, device=self.device).to(torch.int64)
        consts, bounds = self._kernel_consts()
        launch = {"validate_actions": self.validate_actions} if self._on_cpu else self._stream_kwargs()
        rejected = self._driver.step(self._views, self._outputs.arrays(), self._kernel_actions(actions), consts,
                                     bounds, self.max_episode_steps, self.sutton_barto_reward,
                                     self._autoreset_code, scratch=self._scratch, **launch)
        if rejected:
            raise_out_of_range(actions, torch.tensor(1), "actions")
        out = self._outputs
        info: dict[str, Any] = {}
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            info = {"final_obs": out.tensor("final_obs"), "_final_obs": out.tensor("has_final_obs")}
        return out.tensor("obs"), out.tensor("rewards"), out.tensor("terminated"), out.tensor("truncated"), info

    def _kernel_actions(self, actions: torch.Tensor):
        """The kernel's view of int64 ``actions``: zero-copy on the CPU, a persistent buffer on CUDA."""
        if self._on_cpu:
            return actions.contiguous().numpy()
        self._actions.copy_(actions)
        return self._actions_view

    def _stream_kwargs(self) -> dict:
        return {} if self._on_cpu else {"stream": devices.launch_stream(self.device)}

    def render(self) -> tuple[np.ndarray, ...] | None:
        """One RGB frame (H, W, 3 uint8) per env when ``render_mode="rgb_array"``."""
        if self.render_mode is None:
            gym.logger.warn("render() called without render_mode; pass render_mode='rgb_array'")
            return None
        from gpu_envs.rendering import render_cartpole_frames

        return render_cartpole_frames(self.state.double().cpu().numpy())

    def close_extras(self, **kwargs) -> None:
        """Release the device buffers."""
        self._views = self._tensors = None


class CartPoleEnv(gym.Env):
    """A single CartPole-v1 game (NumPy in and out) stepped by the same kernel as the vector env.

    ``unwrapped.state`` reads and assigns the float64 state like gymnasium's ``CartPoleEnv``.
    Stepping after termination without ``reset()`` raises (gymnasium only warns).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, sutton_barto_reward: bool = False, render_mode: str | None = None):
        self._batch = CartPoleVectorEnv(1, device="cpu", dtype=torch.float64, max_episode_steps=None,
                                        sutton_barto_reward=sutton_barto_reward,
                                        autoreset_mode=AutoresetMode.DISABLED, render_mode=render_mode)
        self.render_mode = render_mode
        self.observation_space = self._batch.single_observation_space
        self.action_space = self._batch.single_action_space

    @property
    def state(self) -> np.ndarray:
        """The float64 state (x, x_dot, theta, theta_dot) as a NumPy copy."""
        return self._batch.state[0].numpy().copy()

    @state.setter
    def state(self, value) -> None:
        self._batch.state = np.asarray(value, dtype=np.float64).reshape(1, 4)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is None and not self._batch._seeded:
            seed = int(self.np_random.integers(2**62))
        obs, _ = self._batch.reset(seed=seed, options=options)
        return obs[0].numpy(), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action must be 0 or 1, got {action!r}")
        obs, reward, terminated, truncated, _ = self._batch.step(np.array([action], dtype=np.int64))
        return obs[0].numpy(), float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}

    def render(self):
        """An RGB frame (H, W, 3 uint8) when ``render_mode="rgb_array"``."""
        frames = self._batch.render()
        return None if frames is None else frames[0]

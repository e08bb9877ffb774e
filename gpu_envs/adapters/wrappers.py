"""Vector-env wrappers that work on torch tensors without leaving the device.

- ``RecordEpisodeStatistics``: episodic returns and lengths in ``info["episode"]``.
- ``NormalizeObservation``: observations scaled by a running mean and variance.
- ``NormalizeReward``: rewards scaled by the running variance of the discounted return.

The two normalizers follow gymnasium's ``gymnasium.wrappers.vector`` wrappers of the same names
(same statistics, same ``epsilon`` defaults, ``update_running_mean`` to freeze them), with their
state kept as float64 tensors on the env's device, so a step makes no host synchronisation. They
also accept what gymnasium's refuse: partial resets (``options["reset_mask"]``) and every
autoreset mode.

They take the torch face (``gym.make_vec``'s default ``array="torch"``); an env with the NumPy face
(``array="numpy"``) is refused, naming gymnasium's wrapper that takes it.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch
from gymnasium.spaces import Box
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from gpu_envs.engine.kernel_env import KernelEnv
from gpu_envs.engine.numpy_face import NumpyArrays

__all__ = ["NormalizeObservation", "NormalizeReward", "RecordEpisodeStatistics", "RunningMeanStd"]


def _autoreset_mode(env: VectorEnv) -> AutoresetMode:
    return getattr(
        env, "autoreset_mode", env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    )


def _torch_device(env: VectorEnv, wrapper: str) -> torch.device:
    """The device of ``env``'s tensors; an env whose wrappers include the NumPy face is refused
    (the wrapper ``wrapper`` would meet NumPy arrays at its first step)."""
    inner: VectorEnv = env
    while isinstance(inner, VectorWrapper):
        if isinstance(inner, NumpyArrays):
            raise TypeError(
                f"gpu_envs.adapters.wrappers.{wrapper} keeps its statistics as torch tensors on "
                "the env's device, but this env hands out NumPy arrays (array='numpy'): wrap it "
                f"in gymnasium.wrappers.vector.{wrapper}, or build it without array='numpy' "
                "(the torch face)"
            )
        inner = inner.env
    return cast(KernelEnv, env.unwrapped).device


def _reset_mask(options: dict[str, Any] | None, device: torch.device) -> torch.Tensor | None:
    """``options["reset_mask"]`` as a bool tensor on ``device``, or None for a full reset."""
    mask = (options or {}).get("reset_mask")
    return None if mask is None else torch.as_tensor(mask, dtype=torch.bool, device=device)


def _check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0 (it keeps the division away from zero), got {value}")


class RunningMeanStd:
    """Mean, (population) variance and count of samples, merged batch by batch on ``device``.

    Starts at mean 0, variance 1 and count ``epsilon``, and merges batches with the parallel
    algorithm of Chan et al., as gymnasium's ``RunningMeanStd``. All three are float64 tensors.
    """

    def __init__(self, shape: tuple[int, ...], device: torch.device, epsilon: float = 1e-4):
        self.mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self.var = torch.ones(shape, dtype=torch.float64, device=device)
        self.count = torch.full((), epsilon, dtype=torch.float64, device=device)

    def update(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Merge the rows of ``x`` (``[B, *shape]``), or only those where ``mask`` ([B] bool) is
        True."""
        x = x.to(torch.float64)
        weight = (
            torch.ones(x.shape[0], dtype=torch.float64, device=x.device)
            if mask is None
            else mask.to(x.dtype)
        )
        batch_count = weight.sum()
        weight = weight.reshape(-1, *([1] * (x.dim() - 1)))
        batch_mean = (x * weight).sum(0) / batch_count.clamp(min=1.0)
        batch_var = ((x - batch_mean) ** 2 * weight).sum(0) / batch_count.clamp(min=1.0)
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        self.var = (
            self.var * self.count
            + batch_var * batch_count
            + delta**2 * self.count * batch_count / total
        ) / total
        self.count = total


class RecordEpisodeStatistics(VectorWrapper):
    """Episodic return and length per env, kept as tensors on the env's device.

    When episodes end, ``info["episode"] = {"r": returns, "l": lengths}`` (tensors of shape
    [num_envs], valid where ``info["_episode"]`` is True), as gymnasium's wrapper reports them but
    without a host synchronisation. Correct for the three autoreset modes and for partial resets
    (``options["reset_mask"]``): only the reset envs lose their running statistics.
    ``episode_count`` counts finished episodes (a tensor, read it when you log).
    """

    def __init__(self, env: VectorEnv):
        device = _torch_device(env, "RecordEpisodeStatistics")
        super().__init__(env)
        n = self.num_envs
        self.autoreset_mode = _autoreset_mode(env)
        self.episode_returns = torch.zeros(n, dtype=torch.float64, device=device)
        self.episode_lengths = torch.zeros(n, dtype=torch.int64, device=device)
        self.episode_count = torch.zeros((), dtype=torch.int64, device=device)
        self._prev_done = torch.zeros(n, dtype=torch.bool, device=device)

    def reset(self, *, seed=None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        mask = _reset_mask(options, self.episode_returns.device)
        if mask is None:
            self.episode_returns.zero_()
            self.episode_lengths.zero_()
            self._prev_done.zero_()
        else:
            self.episode_returns.masked_fill_(mask, 0.0)
            self.episode_lengths.masked_fill_(mask, 0)
            self._prev_done.masked_fill_(mask, False)
        return obs, info

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        counted = torch.ones_like(terminated)
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            # The step after a done is the reset step: it starts a new episode and is not counted.
            self.episode_returns.masked_fill_(self._prev_done, 0.0)
            self.episode_lengths.masked_fill_(self._prev_done, 0)
            counted = ~self._prev_done
        self.episode_returns += torch.where(counted, rewards.to(self.episode_returns.dtype), 0.0)
        self.episode_lengths += counted.to(torch.int64)
        done = terminated | truncated
        info = dict(info)
        info["episode"] = {"r": self.episode_returns.clone(), "l": self.episode_lengths.clone()}
        info["_episode"] = done
        self.episode_count += done.sum()
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            self.episode_returns.masked_fill_(done, 0.0)
            self.episode_lengths.masked_fill_(done, 0)
        self._prev_done = done
        return obs, rewards, terminated, truncated, info


class NormalizeObservation(VectorWrapper):
    """Observations centred and scaled per coordinate: ``(obs - mean) / sqrt(var + epsilon)``.

    The running statistics (``obs_rms``) take in every observation that ``reset`` and ``step``
    return (on a partial reset, only the reset envs' rows) while ``update_running_mean`` is True.
    Observations come back as float32; with SAME_STEP autoreset ``info["final_obs"]`` is scaled
    too (without updating the statistics).
    """

    def __init__(self, env: VectorEnv, epsilon: float = 1e-8):
        _check_positive("epsilon", epsilon)
        device = _torch_device(env, "NormalizeObservation")
        super().__init__(env)
        self.epsilon = epsilon
        self.update_running_mean = True
        self.single_observation_space = Box(
            -np.inf, np.inf, env.single_observation_space.shape, dtype=np.float32
        )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.obs_rms = RunningMeanStd(self.single_observation_space.shape, device)

    def reset(self, *, seed=None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self._normalize(obs, _reset_mask(options, obs.device)), info

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        if "final_obs" in info:
            info = {**info, "final_obs": self._scale(info["final_obs"])}
        return self._normalize(obs), rewards, terminated, truncated, info

    def _normalize(self, obs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.update_running_mean:
            self.obs_rms.update(obs, mask)
        return self._scale(obs)

    def _scale(self, obs: torch.Tensor) -> torch.Tensor:
        return ((obs - self.obs_rms.mean) / torch.sqrt(self.obs_rms.var + self.epsilon)).to(
            torch.float32
        )


class NormalizeReward(VectorWrapper):
    """Rewards divided by ``sqrt(var + epsilon)``, ``var`` the running variance of the discounted
    return.

    Each env accumulates ``G = G * gamma * (1 - terminated) + reward``; the statistics
    (``return_rms``) take in the envs that stepped in an episode (not the NEXT_STEP reset step
    after a done) while ``update_running_mean`` is True. A reset clears ``G`` of the reset envs.
    """

    def __init__(self, env: VectorEnv, gamma: float = 0.99, epsilon: float = 1e-8):
        if not 0 <= gamma <= 1:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        _check_positive("epsilon", epsilon)
        device = _torch_device(env, "NormalizeReward")
        super().__init__(env)
        self.gamma, self.epsilon = gamma, epsilon
        self.update_running_mean = True
        self.autoreset_mode = _autoreset_mode(env)
        self.return_rms = RunningMeanStd((), device)
        self.accumulated_reward = torch.zeros(self.num_envs, dtype=torch.float64, device=device)
        self._prev_done = torch.zeros(self.num_envs, dtype=torch.bool, device=device)

    def reset(self, *, seed=None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        mask = _reset_mask(options, self.accumulated_reward.device)
        if mask is None:
            self.accumulated_reward.zero_()
            self._prev_done.zero_()
        else:
            self.accumulated_reward.masked_fill_(mask, 0.0)
            self._prev_done.masked_fill_(mask, False)
        return obs, info

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        stepped = (
            torch.ones_like(self._prev_done)
            if self.autoreset_mode == AutoresetMode.SAME_STEP
            else ~self._prev_done
        )
        discounted = self.accumulated_reward * self.gamma * (~terminated) + rewards.to(
            torch.float64
        )
        self.accumulated_reward = torch.where(stepped, discounted, self.accumulated_reward)
        if self.update_running_mean:
            self.return_rms.update(self.accumulated_reward, stepped)
        self._prev_done = terminated | truncated
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            self.accumulated_reward.masked_fill_(self._prev_done, 0.0)
        scaled = (rewards / torch.sqrt(self.return_rms.var + self.epsilon)).to(rewards.dtype)
        return obs, scaled, terminated, truncated, info

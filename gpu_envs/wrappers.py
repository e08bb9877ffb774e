"""Vector-env wrappers that work on torch tensors without leaving the device."""

from __future__ import annotations

from typing import Any

import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper


class RecordEpisodeStatistics(VectorWrapper):
    """Episodic return and length per env, kept as tensors on the env's device.

    When episodes end, ``info["episode"] = {"r": returns, "l": lengths}`` (tensors of shape
    [num_envs], valid where ``info["_episode"]`` is True), as gymnasium's wrapper reports them but
    without a host synchronisation. Correct for the three autoreset modes and for partial resets
    (``options["reset_mask"]``): only the reset envs lose their running statistics.
    ``episode_count`` counts finished episodes (a tensor, read it when you log).
    """

    def __init__(self, env: VectorEnv):
        super().__init__(env)
        device = env.unwrapped.device
        n = self.num_envs
        self.autoreset_mode = getattr(env, "autoreset_mode", env.metadata.get("autoreset_mode"))
        self.episode_returns = torch.zeros(n, dtype=torch.float64, device=device)
        self.episode_lengths = torch.zeros(n, dtype=torch.int64, device=device)
        self.episode_count = torch.zeros((), dtype=torch.int64, device=device)
        self._prev_done = torch.zeros(n, dtype=torch.bool, device=device)

    def reset(self, *, seed=None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        mask = (options or {}).get("reset_mask")
        if mask is None:
            self.episode_returns.zero_()
            self.episode_lengths.zero_()
            self._prev_done.zero_()
        else:
            mask = torch.as_tensor(mask, device=self.episode_returns.device)
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

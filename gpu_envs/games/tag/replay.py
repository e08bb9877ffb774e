"""One episode of Tag played (``play_episode``), and played and animated in one call
(``render_episode``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gpu_envs.games.tag.env import TagEnv
from gpu_envs.games.tag.rendering import animate_episode, save_animation

#: ``policy(obs, env) -> actions``: obs [1, N, obs_dim] tensor, actions [1, N, 2] int tensor/array.
Policy = Callable[[torch.Tensor, Any], Any]


def play_episode(
    env_params: Mapping[str, Any] | None = None,
    policy: Policy | None = None,
    seed: int = 0,
    steps: int | None = None,
) -> dict[str, Any]:
    """One episode with ``policy`` (random when None) on a Tag env of ``env_params``:
    ``TagEnv.fetch_episode_states``'s record of it."""
    env = TagEnv(num_envs=1, device="cpu", **dict(env_params or {}))
    try:
        return env.fetch_episode_states(policy, seed=seed, steps=steps)
    finally:
        env.close()


def render_episode(
    env_params: Mapping[str, Any] | None = None,
    policy: Policy | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    *,
    steps: int | None = None,
    fps: float = 25.0,
    size: int = 480,
) -> list[np.ndarray]:
    """Play one episode with ``policy`` (random when None), return its frames, and write them to
    ``out`` (``.gif`` or ``.mp4``) when given. ``env_params`` are TagEnv parameters."""
    frames = animate_episode(play_episode(env_params, policy, seed, steps), size=size)
    if out is not None:
        save_animation(frames, out, fps=fps)
    return frames

"""gpu-envs: batched RL environments whose step runs as Numba kernels on the CPU or a CUDA GPU.

Importing the package registers the gymnasium ids of every game of :mod:`gpu_envs.games` and
imports nothing else: the env classes below (and ``tag_v0``) are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from gymnasium.envs.registration import register, registry

from gpu_envs.games import GAMES

#: The public names and the modules that define them (imported when first read).
_LAZY = {
    "AcrobotEnv": "gpu_envs.games.acrobot",
    "AcrobotVectorEnv": "gpu_envs.games.acrobot",
    "CartPoleEnv": "gpu_envs.games.cartpole",
    "CartPoleVectorEnv": "gpu_envs.games.cartpole",
    "MountainCarContinuousEnv": "gpu_envs.games.mountain_car",
    "MountainCarContinuousVectorEnv": "gpu_envs.games.mountain_car",
    "MountainCarEnv": "gpu_envs.games.mountain_car",
    "MountainCarVectorEnv": "gpu_envs.games.mountain_car",
    "PendulumEnv": "gpu_envs.games.pendulum",
    "PendulumVectorEnv": "gpu_envs.games.pendulum",
    "RecordEpisodeStatistics": "gpu_envs.adapters.wrappers",
    "TagEnv": "gpu_envs.games.tag.env",
}
__all__ = [*_LAZY, "tag_v0"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "tag_v0":
        return importlib.import_module("gpu_envs.tag_v0")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gpu_envs' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


for _game in GAMES.values():
    if _game.env_id not in registry:
        register(
            id=_game.env_id,
            entry_point=_game.single_env,
            vector_entry_point=_game.vector_entry_point,
            max_episode_steps=_game.max_episode_steps,
            reward_threshold=_game.reward_threshold,
        )

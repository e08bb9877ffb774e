"""Shared by the rsl_rl, skrl and rl_games adapter tests: gymnasium's own CartPole/Pendulum as a
torch-tensor SAME_STEP vector env (for the comparison runs), a fixed evaluation of a trained policy,
and the snippets of docs/using-with.md that need an optional library."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

import gpu_envs  # noqa: F401 - registers the env ids

USING_WITH = Path(__file__).resolve().parents[2] / "docs" / "using-with.md"


def doc_snippet(title: str) -> str:
    """The ```py block of the ``## title`` section of docs/using-with.md (these sections' blocks
    need an optional library, so they are fenced ``py`` and run by the adapter tests)."""
    sections = re.split(r"^## ", USING_WITH.read_text("utf8"), flags=re.M)
    (body,) = [s for s in sections if s.splitlines()[0].strip() == title]
    (code,) = re.findall(r"^```py\n(.*?)^```", body, flags=re.M | re.S)
    return code


class GymnasiumTorch(VectorWrapper):
    """gymnasium's own ``SyncVectorEnv`` of ``env_id`` (SAME_STEP) with torch tensors out and in,
    ``final_obs`` stacked into a tensor as our envs give it."""

    def __init__(self, env_id: str, num_envs: int):
        super().__init__(
            gym.make_vec(
                env_id,
                num_envs=num_envs,
                vectorization_mode="sync",
                vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
            )
        )

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return torch.as_tensor(obs), info

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions.numpy())
        ended = info.get("_final_obs", np.zeros(self.num_envs, dtype=bool))
        final = np.stack([f if e else o for f, e, o in zip(info.get("final_obs", obs), ended, obs)])
        info = {"final_obs": torch.as_tensor(final), "_final_obs": torch.as_tensor(ended)}
        return (
            torch.as_tensor(obs),
            torch.as_tensor(rewards, dtype=torch.float32),
            torch.as_tensor(terminated),
            torch.as_tensor(truncated),
            info,
        )


def first_episode_returns(
    act: Callable[[torch.Tensor], torch.Tensor],
    env_id: str = "gpu_envs/CartPole-v1",
    num_envs: int = 16,
    seed: int = 1000,
) -> torch.Tensor:
    """The return of each env's first episode under ``act`` (observations -> env actions), on
    fixed seeds: the evaluation every learning test reports."""
    env: VectorEnv = gym.make_vec(env_id, num_envs=num_envs, autoreset_mode="same_step")
    obs, _ = env.reset(seed=seed)
    returns = torch.zeros(num_envs, dtype=torch.float64)
    running = torch.ones(num_envs, dtype=torch.bool)
    with torch.no_grad():
        while running.any():
            obs, rewards, terminated, truncated, _ = env.step(act(obs))
            returns += rewards * running
            running &= ~(terminated | truncated)
    env.close()
    return returns

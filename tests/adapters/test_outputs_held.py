"""An adapter whose library keeps a step's outputs while the next step runs (SB3's rollout buffer,
TorchRL's rollouts, rsl_rl's storage) holds its env's ``copy_outputs`` on: turning it off after
the adapter is built (the only way with ``make_sb3_vec_env`` / ``make_rsl_rl_env``) is refused,
naming the adapter, so a kept observation is never overwritten by the next step. The hold ends
with the adapter."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

from gpu_envs.games.cartpole import CartPoleVectorEnv


def refuses_lean_outputs(env, adapter: str) -> None:
    with pytest.raises(ValueError, match=rf"copy_outputs=False refused: {adapter} keeps each step"):
        env.copy_outputs = False
    assert env.copy_outputs


def test_sb3_keeps_each_steps_observation():
    pytest.importorskip("stable_baselines3")
    from gpu_envs.adapters.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env("gpu_envs/CartPole-v1", num_envs=4)
    refuses_lean_outputs(venv.env.unwrapped, "SB3VecEnv")
    venv.seed(0)
    kept = [venv.reset()]
    copies = [kept[0].copy()]
    for _ in range(3):
        obs, *_ = venv.step(np.ones(4, dtype=np.int64))
        kept.append(obs)
        copies.append(obs.copy())
    assert all(np.array_equal(a, b) for a, b in zip(kept, copies)), "a kept obs was overwritten"
    assert not np.array_equal(kept[1], kept[2])


def test_torchrl_rollouts_keep_each_steps_observation():
    pytest.importorskip("torchrl")
    from gpu_envs.adapters.torchrl import KernelTorchRLEnv

    env = KernelTorchRLEnv(CartPoleVectorEnv(4, autoreset_mode="disabled"))
    refuses_lean_outputs(env.batched_env, "KernelTorchRLEnv")
    env.set_seed(0)
    rollout = env.rollout(4, break_when_any_done=False)
    assert torch.equal(rollout["next", "observation"][:, :-1], rollout["observation"][:, 1:])
    assert not torch.equal(rollout["observation"][:, 0], rollout["observation"][:, 1])


def test_rsl_rl_keeps_each_steps_observation():
    pytest.importorskip("rsl_rl")
    from gpu_envs.adapters.rsl_rl import make_rsl_rl_env

    env = make_rsl_rl_env(num_envs=4, seed=0)
    refuses_lean_outputs(env.env.unwrapped, "the rsl_rl adapter")
    first = env.get_observations()["policy"]
    saved = first.clone()
    second, *_ = env.step(torch.nn.functional.one_hot(torch.ones(4, dtype=torch.int64), 2))
    assert torch.equal(first, saved) and not torch.equal(second["policy"], saved)


def test_the_hold_ends_with_the_adapter():
    pytest.importorskip("stable_baselines3")
    from gpu_envs.adapters.sb3 import SB3VecEnv

    env = CartPoleVectorEnv(2, autoreset_mode="same_step")
    adapter = SB3VecEnv(env)
    refuses_lean_outputs(env, "SB3VecEnv")
    del adapter
    gc.collect()
    env.copy_outputs = False
    env.reset(seed=0)
    obs, *_ = env.step(torch.zeros(2, dtype=torch.int64))
    again, *_ = env.step(torch.zeros(2, dtype=torch.int64))
    assert again is obs, "copy_outputs=False: the env's own buffers again"

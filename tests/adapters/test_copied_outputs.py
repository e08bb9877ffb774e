"""No silent aliasing: every adapter whose library keeps a step's outputs while the next step runs
(SB3's rollout buffer, TorchRL's rollouts, rsl_rl, skrl, rl_games) refuses an env built with
``copy_outputs=False``, naming the setting; the torch-batched ones refuse float indices."""

from __future__ import annotations

import gymnasium as gym
import pytest

import gpu_envs  # noqa: F401 - registers the ids
from gpu_envs.games.cartpole import CartPoleVectorEnv


def lean_env(**kwargs):
    env = CartPoleVectorEnv(4, **kwargs)
    env.copy_outputs = False
    return env


def test_sb3_refuses_outputs_that_the_next_step_overwrites():
    pytest.importorskip("stable_baselines3")
    from gpu_envs.adapters.sb3 import SB3VecEnv

    with pytest.raises(ValueError, match=r"SB3VecEnv keeps .*copy_outputs is False"):
        SB3VecEnv(lean_env(autoreset_mode="same_step"))


def test_torchrl_refuses_outputs_that_the_next_step_overwrites():
    pytest.importorskip("torchrl")
    from gpu_envs.adapters.torchrl import KernelTorchRLEnv

    with pytest.raises(ValueError, match=r"KernelTorchRLEnv keeps .*copy_outputs is False"):
        KernelTorchRLEnv(lean_env(autoreset_mode="disabled"))


@pytest.mark.parametrize("library", ["rsl_rl", "skrl", "rl_games"])
def test_torch_batched_trainers_refuse_it_too(library):
    from gpu_envs.adapters.same_step import SameStepCore

    env = gym.make_vec("gpu_envs/CartPole-v1", num_envs=4, autoreset_mode="same_step")
    env.unwrapped.copy_outputs = False
    with pytest.raises(ValueError, match=rf"the {library} adapter keeps .* copy_outputs"):
        SameStepCore(env, library)


@pytest.mark.parametrize("library", ["rsl_rl", "skrl", "rl_games"])
def test_discrete_actions_given_as_floats_are_refused_not_floored(library):
    import torch

    from gpu_envs.adapters.same_step import SameStepCore

    env = gym.make_vec("gpu_envs/CartPole-v1", num_envs=2, autoreset_mode="same_step")
    core = SameStepCore(env, library)
    core.reset(seed=0)
    with pytest.raises(TypeError, match=r"torch.float32 actions for a Discrete space"):
        core.step(torch.tensor([0.9, 1.7]))
    core.step(torch.tensor([0, 1]))

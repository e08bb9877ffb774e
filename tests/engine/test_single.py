"""The single-game face (engine.single): its step and reset call no torch, even in a copy."""

import copy
import pickle
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpu_envs
from gpu_envs.benchmarks.felt_speed import CLASSIC_GAMES

TORCH_DIR = str(Path(torch.__file__).parent)
KERNEL_ENV = str(Path(gpu_envs.__file__).parent / "engine" / "kernel_env.py")


def torch_calls(run) -> list[str]:
    """The torch functions and ``KernelEnv`` methods (Python or C) called while ``run()`` runs."""
    seen = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith((TORCH_DIR, KERNEL_ENV)):
            seen.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")
        elif event == "c_call":
            owner = getattr(arg, "__self__", None)
            module = getattr(arg, "__module__", None) or type(owner).__module__
            if isinstance(owner, torch.Tensor) or str(module).startswith("torch"):
                seen.append(f"{module}.{arg.__name__}")

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("game", CLASSIC_GAMES)
@pytest.mark.parametrize("copied", [None, copy.deepcopy, lambda e: pickle.loads(pickle.dumps(e))])
def test_steps_and_resets_call_no_torch_and_a_copy_steps_on_like_the_original(game, copied):
    env = gym.make(f"gpu_envs/{game}")
    env.reset(seed=0)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(300)]
    env.step(actions[0])  # gymnasium's passive checker looks at the first step only
    if copied is not None:
        original, env = env, copied(env)
    outputs = []

    def play():
        for action in actions:
            outputs.append(env.step(action))
            if outputs[-1][2] or outputs[-1][3]:
                env.reset()

    assert torch_calls(play) == []
    if copied is not None:
        for action, (obs, reward, terminated, truncated, _) in zip(actions, outputs):
            expected = original.step(action)
            assert (
                np.array_equal(obs, expected[0])
                and (reward, terminated, truncated) == (expected[1:4])
            )
            if terminated or truncated:
                original.reset()

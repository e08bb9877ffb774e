"""Registration with gymnasium, the single env checker, and the torch episode-statistics wrapper."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import gpu_envs
from gpu_envs import RecordEpisodeStatistics


def test_single_env_passes_gymnasium_check_env():
    env = gym.make("gpu_envs/CartPole-v1")
    check_env(env.unwrapped, skip_render_check=False)
    assert env.spec.max_episode_steps == 500 and env.spec.reward_threshold == 475


def test_state_is_readable_and_assignable_like_gymnasium():
    env = gym.make("gpu_envs/CartPole-v1")
    env.reset(seed=0)
    env.unwrapped.state = np.array([0.1, 0.2, 0.03, 0.04])
    obs, *_ = env.step(1)
    ref = gym.make("CartPole-v1")
    ref.reset(seed=0)
    ref.unwrapped.state = np.array([0.1, 0.2, 0.03, 0.04])
    assert np.array_equal(obs, ref.step(1)[0])


def test_make_vec_uses_the_vector_entry_point():
    env = gym.make_vec("gpu_envs/CartPole-v1", num_envs=5, device="cpu")
    assert isinstance(env.unwrapped, gpu_envs.CartPoleVectorEnv)
    assert env.num_envs == 5 and env.unwrapped.max_episode_steps == 500
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, torch.Tensor) and obs.shape == (5, 4) and obs.dtype == torch.float32


def test_module_prefixed_id_works_without_import():
    code = (
        "import gymnasium as gym; e = gym.make('gpu_envs:gpu_envs/CartPole-v1'); "
        "print(type(e.unwrapped).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "CartPoleEnv"


def test_render_gives_one_frame_per_env():
    env = gpu_envs.CartPoleVectorEnv(3, render_mode="rgb_array")
    env.reset(seed=0)
    frames = env.render()
    assert len(frames) == 3 and frames[0].shape == (400, 600, 3) and frames[0].dtype == np.uint8


def play(env, steps: int, seed: int = 0):
    """Steps with constant actions; returns the (return, length) pairs the wrapper reports."""
    reported = []
    actions = torch.ones(env.num_envs, dtype=torch.int64)
    for _ in range(steps):
        *_, info = env.step(actions)
        mask = info["_episode"]
        reported += list(
            zip(info["episode"]["r"][mask].tolist(), info["episode"]["l"][mask].tolist())
        )
    return reported


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_episode_statistics_under_autoreset(mode):
    env = RecordEpisodeStatistics(
        gpu_envs.CartPoleVectorEnv(4, max_episode_steps=500, autoreset_mode=mode)
    )
    env.reset(seed=0)
    reported = play(env, 60)
    # Pushing right always ends an episode in 8-12 steps; every step rewards 1.
    assert len(reported) >= 16
    assert all(ret == length and 8 <= length <= 12 for ret, length in reported)
    assert int(env.episode_count) == len(reported)


def test_episode_statistics_disabled_mode_and_partial_reset():
    env = RecordEpisodeStatistics(
        gpu_envs.CartPoleVectorEnv(2, autoreset_mode="disabled", max_episode_steps=None)
    )
    env.reset(seed=0)
    env.unwrapped.state = torch.tensor(
        [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.25, 0.0]], dtype=torch.float64
    )
    _, _, term, _, info = env.step(torch.ones(2, dtype=torch.int64))
    assert term.tolist() == [False, True] and info["episode"]["l"][1] == 1
    env.reset(options={"reset_mask": np.array([False, True])})
    for _ in range(3):
        _, _, term, _, info = env.step(torch.tensor([1, 0]))
    # env 0 kept its running statistics through env 1's partial reset.
    assert info["episode"]["l"].tolist() == [4, 3]

"""Bit-exactness against gymnasium's own CartPole-v1 (float64 state, float32 observations)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpu_envs

NUM_EPISODES = 100


def controller_actions(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Mostly a balancing controller (long episodes that reach truncation), sometimes random."""
    balancing = (obs[..., 2] + 0.5 * obs[..., 3] > 0).astype(np.int64)
    random_actions = rng.integers(0, 2, size=balancing.shape)
    return np.where(rng.random(balancing.shape) < 0.15, random_actions, balancing)


@pytest.mark.parametrize("sutton_barto", [False, True])
def test_vector_rows_match_gymnasium_cartpole(sutton_barto):
    num_envs = 6
    ours = gpu_envs.CartPoleVectorEnv(
        num_envs, dtype=torch.float64, sutton_barto_reward=sutton_barto, autoreset_mode="same_step"
    )
    refs = [gym.make("CartPole-v1", sutton_barto_reward=sutton_barto) for _ in range(num_envs)]
    obs, _ = ours.reset(seed=3)
    for i, ref in enumerate(refs):
        ref.reset(seed=i)
        ref.unwrapped.state = ours.state[i].numpy().copy()
    rng = np.random.default_rng(0)
    finished = truncations = 0
    while finished < NUM_EPISODES:
        actions = controller_actions(obs.numpy(), rng)
        obs, rewards, terminated, truncated, info = ours.step(torch.from_numpy(actions))
        for i, ref in enumerate(refs):
            ref_obs, ref_reward, ref_term, ref_trunc, _ = ref.step(int(actions[i]))
            assert (terminated[i].item(), truncated[i].item()) == (ref_term, ref_trunc)
            assert rewards[i].item() == ref_reward
            if ref_term or ref_trunc:
                assert info["_final_obs"][i]
                assert np.array_equal(info["final_obs"][i].numpy(), ref_obs)
                finished += 1
                truncations += ref_trunc
                ref.reset()
                ref.unwrapped.state = ours.state[i].numpy().copy()
            else:
                assert np.array_equal(ours.state[i].numpy(), ref.unwrapped.state), (
                    f"env {i} state differs"
                )
                assert np.array_equal(obs[i].numpy(), ref_obs)
    assert truncations > 0, "the test must exercise truncation"


@pytest.mark.parametrize("sutton_barto", [False, True])
def test_single_env_matches_gymnasium_cartpole(sutton_barto):
    ours = gym.make("gpu_envs/CartPole-v1", sutton_barto_reward=sutton_barto)
    ref = gym.make("CartPole-v1", sutton_barto_reward=sutton_barto)
    rng = np.random.default_rng(1)
    outcomes = set()
    for episode in range(NUM_EPISODES):
        obs, _ = ours.reset(seed=episode)
        ref.reset(seed=episode)
        ref.unwrapped.state = ours.unwrapped.state
        while True:
            action = int(controller_actions(obs, rng))
            obs, reward, terminated, truncated, _ = ours.step(action)
            ref_obs, ref_reward, ref_term, ref_trunc, _ = ref.step(action)
            assert np.array_equal(ours.unwrapped.state, ref.unwrapped.state)
            assert obs.dtype == np.float32 and np.array_equal(obs, ref_obs)
            assert (reward, terminated, truncated) == (ref_reward, ref_term, ref_trunc)
            if terminated or truncated:
                outcomes.add((terminated, truncated))
                break
    assert {(True, False), (False, True)} <= outcomes


def test_float32_state_stays_close_to_float64():
    """float32 state: observations within 1e-4 of the float64 trajectory until termination."""
    envs = {
        dtype: gpu_envs.CartPoleVectorEnv(
            64,
            dtype=dtype,
            max_episode_steps=None,
            autoreset_mode="disabled",
            validate_actions=False,
        )
        for dtype in (torch.float32, torch.float64)
    }
    for env in envs.values():
        env.reset(seed=11)
    start = envs[torch.float64].state.float()
    envs[torch.float32].state = start
    envs[torch.float64].state = start.double()
    alive = torch.ones(64, dtype=torch.bool)
    worst, compared = 0.0, 0
    for step_actions in torch.from_numpy(np.random.default_rng(2).integers(0, 2, size=(200, 64))):
        obs32 = envs[torch.float32].step(step_actions)[0]
        obs64, _, terminated, _, _ = envs[torch.float64].step(step_actions)
        worst = max(worst, (obs32 - obs64)[alive].abs().max().item()) if alive.any() else worst
        compared += int(alive.sum())
        alive &= ~terminated
    assert compared > 64 * 10
    assert worst < 1e-4


@pytest.mark.parametrize("seed", [0, 7, 123])
def test_single_env_is_a_drop_in_same_seed_same_episodes(seed):
    """gym.make with the same seed plays gymnasium's exact episodes, resets without a seed
    included."""
    ours, theirs = gym.make("gpu_envs/CartPole-v1"), gym.make("CartPole-v1")
    obs_ours, _ = ours.reset(seed=seed)
    obs_theirs, _ = theirs.reset(seed=seed)
    assert np.array_equal(obs_ours, obs_theirs)
    rng = np.random.default_rng(seed)
    for _ in range(600):
        action = int(rng.integers(2))
        a, b = ours.step(action), theirs.step(action)
        assert np.array_equal(a[0], b[0]) and a[1:4] == b[1:4]
        if a[2] or a[3]:
            assert np.array_equal(ours.reset()[0], theirs.reset()[0])

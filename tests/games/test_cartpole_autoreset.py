"""Autoreset semantics: NEXT_STEP against gymnasium's CartPoleVectorEnv, SAME_STEP and DISABLED per
docs/spec-cartpole.md (Autoreset)."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv as GymCartPoleVectorEnv
from gymnasium.vector import AutoresetMode

import gpu_envs

NUM_ENVS = 8


def random_actions(steps: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 2, size=(steps, NUM_ENVS)))


def test_next_step_matches_gymnasium_vector_env_step_by_step():
    ours = gpu_envs.CartPoleVectorEnv(NUM_ENVS, max_episode_steps=40)
    ref = GymCartPoleVectorEnv(num_envs=NUM_ENVS, max_episode_steps=40)
    ours.reset(seed=0)
    ref.reset(seed=0)
    ref.state = ours.state.numpy().T.copy()
    resets = 0
    for actions in random_actions(300):
        was_done = ref.prev_done.copy()
        obs, rewards, terminated, truncated, _ = ours.step(actions)
        _, ref_rewards, ref_term, ref_trunc, _ = ref.step(actions.numpy())
        # gymnasium draws the new start states from its own RNG: take ours for those envs.
        ref.state[:, was_done] = ours.state.numpy().T[:, was_done]
        resets += int(was_done.sum())
        assert np.array_equal(terminated.numpy(), ref_term)
        assert np.array_equal(truncated.numpy(), ref_trunc)
        assert np.array_equal(rewards.numpy(), ref_rewards)
        np.testing.assert_allclose(obs.numpy(), ref.state.T.astype(np.float32), rtol=0, atol=1e-6)
        assert not (
            terminated[torch.from_numpy(was_done)].any()
            or truncated[torch.from_numpy(was_done)].any()
        )
        assert (rewards[torch.from_numpy(was_done)] == 0).all()
    assert resets > 10 and ref_trunc.dtype == np.bool_


def test_next_step_ignores_the_action_on_the_reset_step():
    envs = [gpu_envs.CartPoleVectorEnv(NUM_ENVS) for _ in range(2)]
    for env in envs:
        env.reset(seed=5)
    for actions in random_actions(100, seed=1):
        done_before = envs[0]._tensors.needs_reset.clone()
        flipped = torch.where(done_before, 1 - actions, actions)
        out_a, out_b = envs[0].step(actions), envs[1].step(flipped)
        for a, b in zip(out_a[:4], out_b[:4]):
            assert torch.equal(a, b)


def test_same_step_and_next_step_match_disabled_with_masked_resets():
    """All three modes play the same episodes (start states keyed by seed and episode number)."""
    same = gpu_envs.CartPoleVectorEnv(
        NUM_ENVS, max_episode_steps=30, autoreset_mode=AutoresetMode.SAME_STEP
    )
    manual = gpu_envs.CartPoleVectorEnv(NUM_ENVS, max_episode_steps=30, autoreset_mode="disabled")
    nxt = gpu_envs.CartPoleVectorEnv(NUM_ENVS, max_episode_steps=30, autoreset_mode="next_step")
    for env in (same, manual, nxt):
        env.reset(seed=9)
    nxt_pending = torch.zeros(NUM_ENVS, dtype=torch.bool)
    finals = 0
    for actions in random_actions(200, seed=2):
        obs, rew, term, trunc, info = same.step(actions)
        m_obs, m_rew, m_term, m_trunc, _ = manual.step(actions)
        assert torch.equal(rew, m_rew) and torch.equal(term, m_term) and torch.equal(trunc, m_trunc)
        done = m_term | m_trunc
        assert torch.equal(info["_final_obs"], done)
        assert torch.equal(info["final_obs"][done], m_obs[done])
        finals += int(done.sum())
        if done.any():
            m_obs, _ = manual.reset(options={"reset_mask": done.numpy()})
        assert torch.equal(obs, m_obs)
        # NEXT_STEP: an env whose episode is pending a reset takes one extra (reset) step.
        if not nxt_pending.any():
            n_obs, n_rew, n_term, n_trunc, _ = nxt.step(actions)
            assert (
                torch.equal(n_term, term)
                and torch.equal(n_trunc, trunc)
                and torch.equal(n_rew, rew)
            )
            nxt_pending = n_term | n_trunc
            if nxt_pending.any():
                n_obs, n_rew, n_term, n_trunc, _ = nxt.step(actions)
                assert torch.equal(n_obs[nxt_pending], obs[nxt_pending])
                assert not n_term[nxt_pending].any() and (n_rew[nxt_pending] == 0).all()
                break
    assert finals > 0


def test_disabled_mode_errors_on_stepping_a_finished_env_and_resets_only_the_mask():
    env = gpu_envs.CartPoleVectorEnv(NUM_ENVS, autoreset_mode="disabled")
    env.reset(seed=1)
    ones = torch.ones(NUM_ENVS, dtype=torch.int64)
    done = torch.zeros(NUM_ENVS, dtype=torch.bool)
    while not done.any():
        _, _, term, trunc, _ = env.step(ones)
        done = term | trunc
    with pytest.raises(RuntimeError, match="reset_mask"):
        env.step(ones)
    before = env.state.clone()
    obs, _ = env.reset(options={"reset_mask": done})
    assert torch.equal(env.state[~done], before[~done])
    assert not torch.equal(env.state[done], before[done])
    assert (env.state[done].abs() < 0.05).all()
    env.step(ones)


def test_reset_bounds_persist_for_autoresets():
    env = gpu_envs.CartPoleVectorEnv(64, max_episode_steps=1)
    obs, _ = env.reset(seed=0, options={"low": 0.1, "high": 0.2})
    assert ((obs >= 0.1) & (obs < 0.2)).all()
    env.step(torch.zeros(64, dtype=torch.int64))
    obs, *_ = env.step(torch.zeros(64, dtype=torch.int64))  # the reset step
    assert ((obs >= 0.1) & (obs < 0.2)).all()


def test_metadata_and_attribute_carry_the_mode():
    env = gym.make_vec("gpu_envs/CartPole-v1", num_envs=2, autoreset_mode="same_step")
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP == env.autoreset_mode

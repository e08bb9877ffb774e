"""Continuous actions outside the action space are clipped as gymnasium's own envs clip them
(``np.clip`` in Pendulum and MountainCarContinuous), on every face; only non-finite actions are
refused. skrl's Pendulum example, whose Gaussian policy is not clipped, runs through skrl's own
``wrap_env`` of ``gym.make_vec``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpu_envs  # noqa: F401 - registers the ids

GAMES = {
    "gpu_envs/Pendulum-v1": "Pendulum-v1",
    "gpu_envs/MountainCarContinuous-v0": "MountainCarContinuous-v0",
}


@pytest.mark.parametrize("ours, theirs", GAMES.items())
def test_out_of_range_actions_step_as_gymnasium_steps_them(ours, theirs):
    rng = np.random.default_rng(0)
    venv = gym.make_vec(ours, num_envs=3)
    references = [gym.make(theirs) for _ in range(3)]
    venv.reset(seed=7)
    for i, env in enumerate(references):
        env.reset(seed=7 + i)
        venv.unwrapped.state[i] = torch.from_numpy(np.asarray(env.unwrapped.state))
    high = float(references[0].action_space.high[0])
    for _ in range(20):
        actions = rng.uniform(-3 * high, 3 * high, size=(3, 1))
        obs, rewards, terminated, truncated, _ = venv.step(torch.from_numpy(actions))
        for i, env in enumerate(references):
            expected, reward, term, trunc, _ = env.step(actions[i].astype(np.float32))
            np.testing.assert_array_equal(obs[i].numpy(), expected)
            assert float(rewards[i]) == pytest.approx(reward, rel=1e-6, abs=1e-9)
            assert (bool(terminated[i]), bool(truncated[i])) == (term, trunc)
            if term or trunc:
                env.reset()
        if terminated.any() or truncated.any():
            break


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_actions_are_still_refused(bad):
    venv = gym.make_vec("gpu_envs/Pendulum-v1", num_envs=2)
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions\[1, 0\] = .* must be finite"):
        venv.step(torch.tensor([[0.0], [bad]]))


def test_skrl_wrap_env_of_make_vec_takes_unclipped_gaussian_actions():
    skrl_wrappers = pytest.importorskip("skrl.envs.wrappers.torch")
    env = skrl_wrappers.wrap_env(gym.make_vec("gpu_envs/Pendulum-v1", num_envs=8))
    env.reset()
    actions = torch.full((8, 1), -2.27415132522583)  # skrl's failing step before clipping
    observations, rewards, *_ = env.step(actions)
    assert observations.shape == (8, 3) and torch.isfinite(rewards).all()


@pytest.mark.parametrize(
    "env_id", [spec.id for spec in gym.registry.values() if spec.id.startswith("gpu_envs/")]
)
def test_skrl_auto_wrapper_recognises_every_vector_env(env_id):
    skrl_wrappers = pytest.importorskip("skrl.envs.wrappers.torch")
    # skrl looks for a gymnasium class among the env class's direct bases
    wrapped = skrl_wrappers.wrap_env(gym.make_vec(env_id, num_envs=2))
    assert type(wrapped).__name__ == "GymnasiumWrapper"

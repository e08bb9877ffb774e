"""``gym.make`` faces stepped after termination without ``reset()`` do what gymnasium's envs do:
one warning, then the dynamics go on (CartPole's reward 0, or -1 with ``sutton_barto_reward``)."""

import warnings

import gymnasium as gym
import numpy as np
import pytest

import gpu_envs  # noqa: F401  (registers the ids)

CASES = [
    ("CartPole-v1", {}, "random"),
    ("CartPole-v1", {"sutton_barto_reward": True}, "random"),
    ("MountainCar-v0", {}, "rock"),  # push with the velocity: the car reaches the flag
    ("Acrobot-v1", {}, "random"),
]


def _terminate_then_step_on(env, seed, push, steps_after):
    obs = env.reset(seed=seed)[0]
    rng = np.random.default_rng(seed)
    out, after = [], 0
    while after < steps_after:
        if push == "rock":
            action = 2 if obs[1] >= 0 else 0
        else:
            action = int(rng.integers(env.action_space.n))
        result = env.step(action)
        obs = result[0]
        out.append(result[:4])
        after += bool(out[-1][2]) or after > 0
        if out[-1][3] and not out[-1][2]:  # truncated first: start again
            obs = env.reset(seed=seed + len(out))[0]
    return out


@pytest.mark.parametrize(("env_id", "kwargs", "push"), CASES)
def test_steps_after_termination_match_gymnasium(env_id, kwargs, push):
    ours = gym.make(f"gpu_envs/{env_id}", max_episode_steps=10_000, **kwargs)
    theirs = gym.make(env_id, max_episode_steps=10_000, **kwargs)
    seed = 5
    with pytest.warns(UserWarning) as caught:
        mine = _terminate_then_step_on(ours, seed, push, steps_after=8)
    reference = _terminate_then_step_on(theirs, seed, push, steps_after=8)
    ours_warnings = [
        w for w in caught if "gpu_envs" in str(w.filename) or "after" in str(w.message)
    ]
    assert len(ours_warnings) >= 1 and "reset()" in str(ours_warnings[0].message)
    assert len(mine) == len(reference)
    for (obs, reward, terminated, truncated), (o, r, t, tr) in zip(mine, reference, strict=True):
        assert np.array_equal(obs, o) and (reward, terminated, truncated) == (r, t, tr)


def test_the_warning_comes_once_per_episode():
    env = gym.make("gpu_envs/CartPole-v1").unwrapped
    for _ in range(2):
        env.reset(seed=0)
        terminated = False
        while not terminated:
            terminated = env.step(1)[2]
        with pytest.warns(UserWarning, match="reset"):
            env.step(1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            env.step(1)  # no second warning in the same episode

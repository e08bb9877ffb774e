"""Acrobot-v1, MountainCar-v0 and MountainCarContinuous-v0 on the engine: gymnasium parity
(float64 CPU, bit for bit: states, observations, rewards, flags), the single-env drop-in for a
seed, the vector env from the same states, action validation, reset options and autoreset."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu_envs  # noqa: F401 - registers the env ids
from gpu_envs.games.acrobot import AcrobotVectorEnv
from gpu_envs.games.mountain_car import MountainCarContinuousVectorEnv, MountainCarVectorEnv

GAMES = {
    "Acrobot-v1": AcrobotVectorEnv,
    "MountainCar-v0": MountainCarVectorEnv,
    "MountainCarContinuous-v0": MountainCarContinuousVectorEnv,
}
# Forces beyond the action space on purpose (both faces clip like gymnasium), with the edges.
EDGE_FORCES = [-1.5, -1.0, np.nextafter(np.float32(-1.0), np.float32(0.0)), -0.0, 0.0, 1.0, 1.5]


def actions(game: str, rng: np.random.Generator, steps: int, edges: bool = True) -> list:
    """``steps`` single-env actions: ints in {0, 1, 2}, or float32 forces, in [-1.5, 1.5] with
    every edge value among them (``edges``) or in [-1, 1]."""
    if game != "MountainCarContinuous-v0":
        return [int(a) for a in rng.integers(3, size=steps)]
    limit = 1.5 if edges else 1.0
    forces = rng.uniform(-limit, limit, size=steps).astype(np.float32)
    if edges:
        forces[rng.choice(steps, size=len(EDGE_FORCES), replace=False)] = EDGE_FORCES
    return list(forces.reshape(steps, 1))


def gym_state(env) -> np.ndarray:
    return np.asarray(env.unwrapped.state, dtype=np.float64)


def assert_same_step(ours, theirs, where: str) -> None:
    assert np.array_equal(ours[0], theirs[0]) and ours[0].dtype == np.float32, (
        f"observation differs {where}"
    )
    assert ours[1] == theirs[1], f"reward differs {where}: {ours[1]} vs {theirs[1]}"
    assert ours[2:4] == theirs[2:4], f"flags differ {where}"


@pytest.mark.parametrize("game", GAMES)
def test_gym_make_plays_gymnasiums_episodes_for_a_seed(game):
    ours, theirs = gym.make(f"gpu_envs/{game}"), gym.make(game)
    assert ours.spec.max_episode_steps == theirs.spec.max_episode_steps
    assert ours.spec.reward_threshold == theirs.spec.reward_threshold
    rng = np.random.default_rng(0)
    for seed in range(4):
        obs, _ = ours.reset(seed=seed)
        assert np.array_equal(obs, theirs.reset(seed=seed)[0])
        for step, action in enumerate(actions(game, rng, ours.spec.max_episode_steps)):
            out = ours.step(action)
            assert_same_step(out, theirs.step(action), f"with seed {seed}, step {step}")
            assert np.array_equal(ours.unwrapped.state, gym_state(theirs))
            if out[2] or out[3]:
                break


@pytest.mark.parametrize("game", ["MountainCar-v0", "MountainCarContinuous-v0"])
def test_the_car_reaches_the_goal_and_the_left_wall_as_gymnasiums(game):
    """Pushing right from the right slope (goal) and left from the left end (wall stop)."""
    ours, theirs = gym.make(f"gpu_envs/{game}"), gym.make(game)
    force = np.ones(1, dtype=np.float32)
    right, left = (2, 0) if game == "MountainCar-v0" else (force, -force)
    ended, wall_stops = [], 0
    for start, action in (([0.3, 0.05], right), ([-1.1, -0.05], left)):
        ours.reset(seed=0)
        theirs.reset(seed=0)
        ours.unwrapped.state = start
        theirs.unwrapped.state = np.array(start)
        for step in range(30):
            out = ours.step(action)
            assert_same_step(out, theirs.step(action), f"from {start}, step {step}")
            position, velocity = ours.unwrapped.state
            wall_stops += bool(np.float32(position) == np.float32(-1.2) and velocity == 0)
            if out[2]:
                break
        ended.append(out[2])
    assert ended == [True, False] and wall_stops > 0


@pytest.mark.parametrize("game", ["Acrobot-v1", "MountainCar-v0"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_any_short_run_from_any_state_matches_gymnasium(game, data):
    """Hypothesis: the vector env stepped from any state with any actions = gymnasium's env
    set to that state."""
    if game == "Acrobot-v1":
        state = [data.draw(st.floats(-4.0, 4.0)) for _ in range(2)] + [
            data.draw(st.floats(-13.0, 13.0)),
            data.draw(st.floats(-29.0, 29.0)),
        ]
    else:
        state = [data.draw(st.floats(-1.2, 0.6)), data.draw(st.floats(-0.07, 0.07))]
    moves = data.draw(st.lists(st.integers(0, 2), min_size=1, max_size=20))
    _step_both(game, state, moves, lambda a: a)


@settings(max_examples=100, deadline=None)
@given(
    position=st.floats(-1.25, 0.625, width=32),
    velocity=st.floats(-0.0625, 0.0625, width=32) | st.sampled_from([-0.07, 0.07]),
    forces=st.lists(st.floats(-2.0, 2.0, width=32), min_size=1, max_size=20),
)
def test_any_continuous_run_from_any_float32_state_matches_gymnasium(position, velocity, forces):
    _step_both(
        "MountainCarContinuous-v0",
        np.array([position, velocity], dtype=np.float32),
        forces,
        lambda f: np.array([f], dtype=np.float32),
    )


def _step_both(game: str, state, moves, to_action) -> None:
    vec = GAMES[game](1, max_episode_steps=None, autoreset_mode="disabled", validate_actions=False)
    vec.reset(seed=0)
    theirs = gym.make(game).unwrapped
    theirs.reset(seed=0)
    vec.state = np.asarray(state, dtype=np.float64).reshape(1, -1)
    theirs.state = np.array(state)  # float32 stays float32: gymnasium then computes in float32
    if game == "MountainCarContinuous-v0":  # the vector env's first step computes in float64
        vec.step(torch.zeros(1, 1))
        theirs.step(np.zeros(1, dtype=np.float32))
        theirs.state = vec.state[0].numpy().astype(np.float32)
    for move in moves:
        action = to_action(move)
        obs, reward, terminated, _, _ = vec.step(torch.as_tensor(np.asarray([action])))
        expected = theirs.step(action)
        assert np.array_equal(obs[0].numpy(), expected[0])
        assert float(reward[0]) == expected[1] and bool(terminated[0]) == expected[2]
        assert np.array_equal(vec.state[0].numpy(), gym_state(theirs))
        if expected[2]:
            break


@pytest.mark.parametrize("game", GAMES)
def test_vector_env_equals_gymnasium_envs_started_in_its_states(game):
    n = 6
    vec = GAMES[game](n, max_episode_steps=None)
    vec.reset(seed=5)
    singles = [gym.make(game).unwrapped for _ in range(n)]
    for env, row in zip(singles, vec.state.numpy()):
        env.reset(seed=0)
        env.state = row.copy()
    rng = np.random.default_rng(1)
    done = np.zeros(n, dtype=bool)
    for step in range(150):
        batch = actions(game, rng, n, edges=False)
        obs, rewards, terminated, _, _ = vec.step(torch.as_tensor(np.asarray(batch)))
        for i, env in enumerate(singles):
            if done[i]:
                continue
            expected = env.step(batch[i])
            assert np.array_equal(obs[i].numpy(), expected[0]), f"env {i}, step {step}"
            assert float(rewards[i]) == expected[1] and bool(terminated[i]) == expected[2]
            assert np.array_equal(vec.state[i].numpy(), gym_state(env))
            done[i] = expected[2]
    assert rewards.dtype == torch.float64 and obs.dtype == torch.float32


@pytest.mark.parametrize(
    "game, bad, message",
    [
        ("Acrobot-v1", torch.tensor([0, 3]), r"actions\[1\]"),
        ("Acrobot-v1", torch.tensor([-1, 0]), r"actions\[0\]"),
        ("MountainCar-v0", torch.tensor([2, 7]), r"actions\[1\]"),
        ("MountainCarContinuous-v0", torch.tensor([[float("nan")], [0.0]]), r"actions\[0, 0\]"),
    ],
)
def test_out_of_range_actions_are_a_clear_error(game, bad, message):
    env = GAMES[game](2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=message):
        env.step(bad)


@pytest.mark.parametrize("game", ["Acrobot-v1", "MountainCar-v0"])
def test_single_env_refuses_an_action_outside_discrete_3(game):
    env = gym.make(f"gpu_envs/{game}")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="an int in 0..2"):
        env.unwrapped.step(3)


@pytest.mark.parametrize("game", GAMES)
def test_reset_options_as_gymnasium_and_held_by_autoresets(game):
    ours, theirs = gym.make(f"gpu_envs/{game}"), gym.make(game)
    options = {"low": -0.5, "high": -0.45}
    assert np.array_equal(
        ours.reset(seed=3, options=options)[0], theirs.reset(seed=3, options=options)[0]
    )
    env = GAMES[game](200, max_episode_steps=1)
    env.reset(seed=0, options=options)
    first = env.state.clone()
    step_actions = torch.as_tensor(
        np.asarray(actions(game, np.random.default_rng(0), 200, edges=False))
    )
    env.step(step_actions)
    env.step(step_actions)  # NEXT_STEP: every env restarts with the same bounds
    for state in (first, env.state):
        assert float(state[:, 0].min()) >= -0.5 and float(state[:, 0].max()) < -0.45
    with pytest.raises(ValueError, match="options\\['low'\\] must be a finite number"):
        env.reset(options={"low": float("nan")})
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"x_init": 0.1})


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_autoreset_after_truncation(game, mode):
    env = GAMES[game](3, max_episode_steps=4, autoreset_mode=mode)
    env.reset(seed=7)
    step_actions = torch.as_tensor(
        np.asarray(actions(game, np.random.default_rng(0), 3, edges=False))
    )
    out = [env.step(step_actions) for _ in range(5)]
    assert out[3][3].all()
    if mode == "next_step":
        assert not out[4][1].any() and not out[4][3].any()
        assert int(env.state_snapshot()["episode"].min()) == 2
    else:
        assert out[3][4]["_final_obs"].all()


@pytest.mark.parametrize("game", GAMES)
def test_float32_state_follows_the_float64_one(game):
    exact, fast = GAMES[game](8, dtype=torch.float64), GAMES[game](8, dtype=torch.float32)
    exact.reset(seed=1)
    fast.reset(seed=1)
    rng = np.random.default_rng(2)
    for _ in range(10):
        batch = torch.as_tensor(np.asarray(actions(game, rng, 8, edges=False)))
        a, b = exact.step(batch), fast.step(batch)
    assert b[1].dtype == torch.float32
    np.testing.assert_allclose(b[0].numpy(), a[0].numpy(), atol=1e-4)


@pytest.mark.parametrize("game", GAMES)
def test_gymnasium_and_sb3_checkers_pass_and_frames_are_gymnasiums(game):
    from gymnasium.utils.env_checker import check_env as gym_check_env
    from stable_baselines3.common.env_checker import check_env

    check_env(gym.make(f"gpu_envs/{game}"), warn=False)
    ours = gym.make(f"gpu_envs/{game}", render_mode="rgb_array")
    gym_check_env(ours.unwrapped)
    theirs = gym.make(game, render_mode="rgb_array")
    ours.reset(seed=0)
    theirs.reset(seed=0)
    assert np.array_equal(ours.render(), theirs.render())


@pytest.mark.parametrize("game", GAMES)
def test_make_vec_builds_the_batched_env(game):
    env = gym.make_vec(f"gpu_envs/{game}", num_envs=3)
    assert isinstance(env, GAMES[game]) and env.num_envs == 3
    assert env.max_episode_steps == gym.spec(game).max_episode_steps
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3, *gym.make(game).observation_space.shape)

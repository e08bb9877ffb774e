"""Pendulum-v1 on the engine: gymnasium parity (float64 CPU), the single-env drop-in, the vector
env's
autoreset modes, per-env RNG, actions, options, copies, SB3's checker and a SAC run (slow)."""

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control.pendulum import PendulumEnv as GymPendulum
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu_envs  # noqa: F401 - registers the env ids
from gpu_envs.games.pendulum import PendulumEnv, PendulumVectorEnv

# Torques beyond the action space on purpose (both faces clip like gymnasium), with the edges.
EDGE_TORQUES = [-2.5, -2.0, np.nextafter(np.float32(-2.0), np.float32(0.0)), -0.0, 0.0, 2.0, 2.5]
# gymnasium squares the float32 torque with powf (docs/pendulum.md, What is bit-exact).
REWARD_ATOL = 1e-9


def torques(rng: np.random.Generator, steps: int) -> np.ndarray:
    """[steps, 1] float32 torques uniform in [-2.5, 2.5] with every edge value among them."""
    values = rng.uniform(-2.5, 2.5, size=steps).astype(np.float32)
    values[rng.choice(steps, size=len(EDGE_TORQUES), replace=False)] = EDGE_TORQUES
    return values.reshape(steps, 1)


def assert_same_step(ours, theirs, where: str) -> None:
    assert np.array_equal(ours[0], theirs[0]), f"observation differs {where}"
    assert ours[0].dtype == np.float32
    assert abs(ours[1] - theirs[1]) <= REWARD_ATOL, (
        f"reward differs {where}: {ours[1]} vs {theirs[1]}"
    )
    assert ours[2:4] == theirs[2:4], f"flags differ {where}"


def test_injected_states_match_gymnasium_bit_for_bit():
    ours, theirs = PendulumEnv(), GymPendulum()
    ours.reset(seed=0)
    theirs.reset(seed=0)
    rng = np.random.default_rng(1)
    for episode in range(60):
        # Wide start states: unwrapped angles, speeds at and beyond the cap.
        start = np.array([rng.uniform(-20.0, 20.0), rng.uniform(-9.0, 9.0)])
        ours.state = theirs.state = start
        for step, action in enumerate(torques(rng, 200)):
            assert_same_step(
                ours.step(action), theirs.step(action), f"in episode {episode}, step {step}"
            )
            assert np.array_equal(ours.state, theirs.state), (
                f"state differs in episode {episode}, step {step}"
            )


_PAIR = (PendulumEnv(), GymPendulum())
for _env in _PAIR:
    _env.reset(seed=0)


@settings(max_examples=200, deadline=None)
@given(
    theta=st.floats(-1e3, 1e3),
    theta_dot=st.floats(-8.0, 8.0),
    torque=st.floats(-3.0, 3.0, width=32),
)
def test_any_single_step_matches_gymnasium(theta, theta_dot, torque):
    ours, theirs = _PAIR
    ours.state = theirs.state = np.array([theta, theta_dot])
    action = np.array([torque], dtype=np.float32)
    assert_same_step(ours.step(action), theirs.step(action), f"from {(theta, theta_dot, torque)}")
    assert np.array_equal(ours.state, theirs.state)


@pytest.mark.parametrize("options", [None, {"x_init": 0.5, "y_init": 3}])
def test_gym_make_plays_gymnasiums_episode_for_a_seed(options):
    ours, theirs = gym.make("gpu_envs/Pendulum-v1"), gym.make("Pendulum-v1")
    rng = np.random.default_rng(2)
    for seed in range(5):
        obs, _ = ours.reset(seed=seed, options=options)
        expected, _ = theirs.reset(seed=seed, options=options)
        assert np.array_equal(obs, expected)
        for step, action in enumerate(torques(rng, 200)):
            assert_same_step(
                ours.step(action), theirs.step(action), f"with seed {seed}, step {step}"
            )
    assert ours.spec.max_episode_steps == theirs.spec.max_episode_steps == 200


def test_gravity_is_a_constructor_argument():
    ours, theirs = gym.make("gpu_envs/Pendulum-v1", g=9.81), gym.make("Pendulum-v1", g=9.81)
    ours.reset(seed=3)
    theirs.reset(seed=3)
    for step, action in enumerate(torques(np.random.default_rng(3), 50)):
        assert_same_step(ours.step(action), theirs.step(action), f"at step {step}")
    with pytest.raises(ValueError, match="g \\(gravity\\) must be a finite real number"):
        PendulumVectorEnv(2, g=float("nan"))


def test_single_env_accepts_what_gymnasium_accepts():
    env = gym.make("gpu_envs/Pendulum-v1")
    env.reset(seed=0)
    for action in ([3.0], np.array([-7], dtype=np.int64), np.array([1.5], dtype=np.float64)):
        obs, reward, *_ = env.step(action)
        assert env.observation_space.contains(obs) and np.isfinite(reward)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(2, np.float32))


def test_sb3_and_gymnasium_check_env_pass():
    from gymnasium.utils.env_checker import check_env as gym_check_env
    from stable_baselines3.common.env_checker import check_env

    check_env(gym.make("gpu_envs/Pendulum-v1"), warn=False)
    gym_check_env(gym.make("gpu_envs/Pendulum-v1", render_mode="rgb_array").unwrapped)


def test_vector_env_equals_single_envs_started_in_the_same_states():
    vec = PendulumVectorEnv(4, max_episode_steps=None)
    vec.reset(seed=5)
    singles = [GymPendulum() for _ in range(4)]
    for env, row in zip(singles, vec.state.numpy()):
        env.reset(seed=0)
        env.state = row.copy()
    rng = np.random.default_rng(4)
    for _ in range(100):
        actions = rng.uniform(-2.0, 2.0, size=(4, 1)).astype(np.float32)
        obs, rewards, terminated, truncated, _ = vec.step(torch.from_numpy(actions))
        for i, env in enumerate(singles):
            expected, reward, *_ = env.step(actions[i])
            assert (
                np.array_equal(obs[i].numpy(), expected)
                and abs(float(rewards[i]) - reward) <= REWARD_ATOL
            )
            assert np.array_equal(vec.state[i].numpy(), env.state)
        assert not terminated.any() and not truncated.any()
    assert rewards.dtype == torch.float64 and obs.dtype == torch.float32


def _run(mode: str, steps: int, seed: int = 7):
    env = PendulumVectorEnv(3, max_episode_steps=4, autoreset_mode=mode)
    outputs = [env.reset(seed=seed)]
    actions = torch.full((3, 1), 0.5)
    for _ in range(steps):
        outputs.append(env.step(actions))
    return env, outputs


def test_next_step_autoreset():
    _, out = _run("next_step", 6)
    assert [bool(o[3].all()) for o in out[1:]] == [False, False, False, True, False, False]
    # The step after truncation starts the next episode: reward 0, no flags, the new start's
    # observation.
    _, same = _run("same_step", 4)
    assert torch.equal(out[5][0], same[4][0])
    assert not out[5][1].any() and not out[5][2].any() and not out[5][3].any()
    assert not out[4][2].any()  # the pendulum never terminates


def test_same_step_autoreset_reports_the_final_observation():
    _, out = _run("same_step", 5)
    _, nxt = _run("next_step", 4)
    info = out[4][4]
    assert info["_final_obs"].all() and torch.equal(info["final_obs"], nxt[4][0])
    assert torch.equal(out[4][1], nxt[4][1]) and out[4][3].all()
    assert not out[5][4]["_final_obs"].any()


def test_disabled_autoreset_refuses_to_step_a_finished_env_until_reset():
    env, out = _run("disabled", 4)
    assert out[4][3].all()
    with pytest.raises(RuntimeError, match="finished and were not reset"):
        env.step(torch.zeros(3, 1))
    mask = torch.tensor([True, False, True])
    env.reset(options={"reset_mask": mask})
    _, same = _run("same_step", 4)
    assert torch.equal(env.state_snapshot()["obs"][mask], same[4][0][mask])


def test_an_envs_start_depends_only_on_its_seed_and_episode():
    big, small = (
        PendulumVectorEnv(8, max_episode_steps=2),
        PendulumVectorEnv(3, max_episode_steps=2),
    )
    seeds = [11, 50, 12, 99, 13, 7, 0, 2**63 - 1]
    starts_big = [big.reset(seed=seeds)[0]]
    starts_small = [small.reset(seed=[seeds[1], seeds[3], seeds[7]])[0]]
    for _ in range(3):  # two episodes end, the next step of each starts a new one
        starts_big.append(big.step(torch.zeros(8, 1))[0])
        starts_small.append(small.step(torch.zeros(3, 1))[0])
    for a, b in zip(starts_big, starts_small):
        assert torch.equal(a[[1, 3, 7]], b)
    assert not torch.equal(starts_big[0], starts_big[3]), "a new episode must draw a new start"


def test_reset_options_bound_the_start_and_hold_for_autoresets():
    env = PendulumVectorEnv(500, max_episode_steps=1)
    env.reset(seed=0, options={"x_init": 0.25, "y_init": 0.5})
    assert env.state[:, 0].abs().max() <= 0.25 and env.state[:, 1].abs().max() <= 0.5
    assert env.state[:, 0].abs().max() > 0.2, "the draw must spread over the bounds"
    env.step(torch.zeros(500, 1))
    env.step(torch.zeros(500, 1))  # NEXT_STEP: every env restarts with the same bounds
    assert env.state[:, 0].abs().max() <= 0.25
    env.reset()
    assert env.state[:, 0].abs().max() > 1.0, "a reset without options restores the defaults"
    with pytest.raises(ValueError, match="x_init.*finite"):
        env.reset(options={"x_init": float("inf")})
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"low": 0.1})


def test_vector_env_refuses_non_finite_actions_and_clips_out_of_range_ones_as_gymnasium():
    env = PendulumVectorEnv(2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions\[1, 0\] = nan must be finite"):
        env.step(torch.tensor([[0.0], [float("nan")]]))
    with pytest.raises(TypeError, match="floating dtype"):
        env.step(torch.zeros(2, 1, dtype=torch.int64))
    lax = PendulumVectorEnv(2, validate_actions=False)
    clipped = PendulumVectorEnv(2)
    for e in (lax, clipped):
        e.reset(seed=0)
    assert torch.equal(
        lax.step(torch.tensor([[9.0], [-9.0]]))[0], clipped.step(torch.tensor([[2.0], [-2.0]]))[0]
    )


@pytest.mark.parametrize("make_copy", [copy.deepcopy, lambda env: pickle.loads(pickle.dumps(env))])
def test_a_copy_steps_on_like_the_original(make_copy):
    env = PendulumVectorEnv(5, max_episode_steps=30, autoreset_mode="same_step")
    env.reset(seed=3, options={"x_init": 1.0})
    rng = np.random.default_rng(5)
    for _ in range(10):
        env.step(torch.from_numpy(rng.uniform(-2, 2, (5, 1)).astype(np.float32)))
    clone = make_copy(env)
    for _ in range(100):
        actions = torch.from_numpy(rng.uniform(-2, 2, (5, 1)).astype(np.float32))
        for a, b in zip(env.step(actions)[:4], clone.step(actions)[:4]):
            assert torch.equal(a, b)
    assert torch.equal(env.state, clone.state)


def test_float32_state_follows_the_float64_one():
    exact, fast = (
        PendulumVectorEnv(16, dtype=torch.float64),
        PendulumVectorEnv(16, dtype=torch.float32),
    )
    exact.reset(seed=1)
    fast.reset(seed=1)
    for _ in range(20):
        actions = torch.full((16, 1), 1.0)
        a, b = exact.step(actions), fast.step(actions)
    assert b[1].dtype == torch.float32
    np.testing.assert_allclose(b[0].numpy(), a[0].numpy(), atol=1e-4)


def test_state_view_is_assignable_and_checked():
    env = PendulumVectorEnv(3)
    env.reset(seed=0)
    env.state = [[0.0, 0.0], [np.pi, 1.0], [-1.0, 8.0]]
    assert env.state[1, 0] == np.pi
    env.state[2, 1] = -2.0  # a view: writes reach the envs
    assert env.state_snapshot()["state"][2, 1] == -2.0  # env first
    with pytest.raises(ValueError, match=r"state must have shape \(3, 2\)"):
        env.state = np.zeros((3, 3))


def test_rgb_array_frames_come_from_gymnasiums_renderer():
    env = gym.make("gpu_envs/Pendulum-v1", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    theirs = GymPendulum(render_mode="rgb_array")
    theirs.reset(seed=0)
    assert frame.shape == (500, 500, 3) and np.array_equal(frame, theirs.render())


@pytest.mark.slow
def test_sac_learns_pendulum_within_20k_steps():
    from stable_baselines3 import SAC
    from stable_baselines3.common.evaluation import evaluate_policy

    env = gym.make("gpu_envs/Pendulum-v1")
    model = SAC("MlpPolicy", env, learning_rate=1e-3, seed=0, device="cpu")
    model.learn(20_000)
    mean_return, _ = evaluate_policy(model, gym.make("gpu_envs/Pendulum-v1"), n_eval_episodes=10)
    print(f"SAC on gpu_envs/Pendulum-v1 after 20k steps: mean return {mean_return:.1f}")
    assert mean_return > -300, f"mean return {mean_return}"


@pytest.mark.parametrize("dtype, bound", [(torch.float64, 1e308), (torch.float32, 1e39)])
def test_a_start_bound_whose_range_overflows_is_refused_not_drawn_as_nan(dtype, bound):
    env = PendulumVectorEnv(4, dtype=dtype)
    with pytest.raises(ValueError, match=r"options\['x_init'\] must be a finite number of at most"):
        env.reset(seed=0, options={"x_init": bound})
    env.reset(seed=0, options={"x_init": 1e30})
    assert torch.isfinite(env.state).all()

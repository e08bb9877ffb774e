"""stable-baselines3 adapter: SB3's own checks, parity with DummyVecEnv over gymnasium's CartPole,
the VecEnv attribute API, host-side action and seed checks (discrete and Box), and a short PPO
run."""

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")

from gymnasium.vector import AutoresetMode
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

import gpu_envs
from gpu_envs.adapters.sb3 import SB3VecEnv, _pack, _unpack, make_sb3_vec_env, to_host


def test_sb3_check_env_passes_on_single_cartpole():
    check_env(gym.make("gpu_envs/CartPole-v1"), warn=True)


def _set_reference_states(reference: VecMonitor, states: np.ndarray, envs) -> None:
    for i in envs:
        reference.venv.envs[i].unwrapped.state = states[i].copy()


def test_step_output_matches_dummy_vec_env_over_gymnasium_cartpole():
    n, horizon, steps = 6, 30, 300
    ours = VecMonitor(make_sb3_vec_env(num_envs=n, max_episode_steps=horizon))
    reference = VecMonitor(
        DummyVecEnv([lambda: gym.make("CartPole-v1", max_episode_steps=horizon) for _ in range(n)])
    )
    core = ours.venv.env.unwrapped
    ours.seed(11)
    reference.seed(11)
    obs = ours.reset()
    reference.reset()
    states = core.state.numpy()
    np.testing.assert_array_equal(obs, states.astype(np.float32))
    _set_reference_states(reference, states, range(n))

    rng = np.random.default_rng(0)
    counts = {"terminated": 0, "truncated": 0}
    for _ in range(steps):
        actions = rng.integers(0, 2, n)
        obs, rewards, dones, infos = ours.step(actions)
        ref_obs, ref_rewards, ref_dones, ref_infos = reference.step(actions)
        np.testing.assert_array_equal(rewards, ref_rewards)
        np.testing.assert_array_equal(dones, ref_dones)
        states = core.state.numpy()
        for i in range(n):
            if not dones[i]:
                np.testing.assert_array_equal(obs[i], ref_obs[i])
                assert infos[i] == {} and ref_infos[i]["TimeLimit.truncated"] is False
                continue
            np.testing.assert_array_equal(
                infos[i]["terminal_observation"], ref_infos[i]["terminal_observation"]
            )
            assert infos[i]["TimeLimit.truncated"] == ref_infos[i]["TimeLimit.truncated"]
            assert infos[i]["episode"]["r"] == ref_infos[i]["episode"]["r"]
            assert infos[i]["episode"]["l"] == ref_infos[i]["episode"]["l"]
            counts["truncated" if infos[i]["TimeLimit.truncated"] else "terminated"] += 1
            # SAME_STEP: obs[i] is already the next episode's first observation.
            np.testing.assert_array_equal(obs[i], states[i].astype(np.float32))
        _set_reference_states(reference, states, np.flatnonzero(dones))
    assert counts["terminated"] > 5 and counts["truncated"] > 5, counts


def test_infos_of_unfinished_envs_stay_empty_even_if_a_consumer_writes_into_them():
    venv = make_sb3_vec_env(num_envs=3)
    venv.reset()
    _, _, dones, infos = venv.step(np.zeros(3, dtype=np.int64))
    assert not dones.any() and infos == [{}, {}, {}]
    infos[1]["written"] = True
    _, _, _, infos = venv.step(np.zeros(3, dtype=np.int64))
    assert infos == [{}, {}, {}]


def test_refuses_an_env_without_same_step_autoreset():
    env = gym.make_vec("gpu_envs/CartPole-v1", num_envs=2, autoreset_mode=AutoresetMode.NEXT_STEP)
    with pytest.raises(ValueError, match="SAME_STEP"):
        SB3VecEnv(env)


def test_attribute_api_seed_and_images():
    venv = make_sb3_vec_env(num_envs=3, render_mode="rgb_array", max_episode_steps=50)
    assert venv.render_mode == "rgb_array"
    assert venv.get_attr("render_mode") == ["rgb_array"] * 3
    assert venv.get_attr("max_episode_steps", indices=[0, 2]) == [50, 50]
    venv.set_attr("max_episode_steps", 40)
    assert venv.env.unwrapped.max_episode_steps == 40
    with pytest.raises(ValueError, match="whole batched env"):
        venv.set_attr("max_episode_steps", 10, indices=[1])
    with pytest.raises(ValueError, match="whole batched env"):
        venv.env_method("render", indices=0)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        venv.get_attr("missing")
    assert venv.has_attr("num_envs") and not venv.has_attr("missing")

    assert venv.seed(7) == [7, 8, 9]
    first = venv.reset()
    venv.seed(7)
    np.testing.assert_array_equal(venv.reset(), first)
    assert not np.array_equal(venv.reset(), first)  # seeds apply to one reset only

    frames = venv.get_images()
    assert len(frames) == 3 and frames[0].shape == (400, 600, 3) and frames[0].dtype == np.uint8
    assert len(venv.env_method("render")) == 3
    assert venv.render().shape[2] == 3  # SB3 tiles the frames

    assert venv.env_is_wrapped(Monitor) == [False] * 3
    wrapped = SB3VecEnv(
        gpu_envs.RecordEpisodeStatistics(
            gym.make_vec("gpu_envs/CartPole-v1", num_envs=2, autoreset_mode=AutoresetMode.SAME_STEP)
        )
    )
    assert wrapped.env_is_wrapped(gpu_envs.RecordEpisodeStatistics) == [True, True]
    assert wrapped.get_attr("max_episode_steps") == [500, 500]  # found under the wrapper


def test_reset_options_pass_through_and_must_agree():
    venv = make_sb3_vec_env(num_envs=2)
    venv.set_options({"low": 0.2, "high": 0.3})
    obs = venv.reset()
    assert ((obs >= 0.2) & (obs <= 0.3)).all()
    venv.set_options([{"low": 0.2, "high": 0.3}, {}])
    with pytest.raises(ValueError, match="options differ"):
        venv.reset()


def test_host_copy_packs_float_and_bool_tensors_into_one_buffer():
    tensors = (torch.randn(5, 4), torch.randn(5), torch.tensor([True, False, True, True, False]))
    packed = _pack(tensors)
    assert packed.dim() == 1 and packed.dtype == torch.float32
    for got, tensor in zip(_unpack(packed.numpy(), tensors), tensors):
        assert got.dtype == tensor.numpy().dtype
        np.testing.assert_array_equal(got, tensor.numpy())
    views = to_host(*tensors)
    assert all(np.shares_memory(view, tensor.numpy()) for view, tensor in zip(views, tensors))
    with pytest.raises(TypeError, match="floating or bool"):
        to_host(torch.zeros(2, dtype=torch.int64))


def test_host_copy_gives_float64_tensors_as_float32_arrays():
    rewards = torch.tensor([0.1, -2.5, 1e-9], dtype=torch.float64)
    (host,) = to_host(rewards)
    assert host.dtype == np.float32
    np.testing.assert_array_equal(host, rewards.numpy().astype(np.float32))


def test_tag_rows_through_the_adapter():
    games, runners, length = 2, 3, 6
    venv = make_sb3_vec_env(
        "gpu_envs/Tag-v0", num_envs=games, num_runners=runners, episode_length=length
    )
    rows = games * (runners + 1)
    assert venv.num_envs == rows
    obs = venv.reset()
    assert obs.shape == (rows, venv.observation_space.shape[0]) and obs.dtype == np.float32
    rng = np.random.default_rng(0)
    done_rows = np.zeros(rows, dtype=bool)
    for _ in range(length):
        actions = np.stack([rng.integers(0, venv.action_space.nvec) for _ in range(rows)])
        obs, rewards, dones, infos = venv.step(actions)
        for i in np.flatnonzero(dones):
            assert infos[i]["TimeLimit.truncated"] is False  # Tag ends by rule
            assert infos[i]["terminal_observation"].shape == obs.shape[1:]
        done_rows |= dones
    # Every row ends its episode within episode_length steps (tagged earlier, or at the end).
    assert done_rows.all()


def test_ppo_learns_a_little_and_evaluates_through_the_adapter():
    venv = VecMonitor(make_sb3_vec_env(num_envs=4))
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    assert model.num_timesteps == 256 and len(model.ep_info_buffer) > 0
    mean, _ = evaluate_policy(model, venv, n_eval_episodes=4, deterministic=True)
    assert 8 <= mean <= 500


@pytest.mark.parametrize(
    ("actions", "error", "message"),
    [
        (np.array([0, 2]), ValueError, r"actions\[1\] = 2 is out of range"),
        (np.array([0, -1]), ValueError, r"actions\[1\] = -1 is out of range"),
        (np.array([0.0, 1.0]), TypeError, "integer dtype"),
        (np.array([0, 1, 1]), ValueError, r"shape \(2,\)"),
        (None, TypeError, "actions must be an integer array"),
    ],
)
def test_bad_actions_are_refused_on_the_host(actions, error, message):
    venv = make_sb3_vec_env(num_envs=2)
    venv.reset()
    with pytest.raises(error, match=message):
        venv.step(actions)


@pytest.mark.parametrize(
    ("actions", "error", "message"),
    [
        (
            np.array([[np.nan], [0.0]], np.float32),
            ValueError,
            r"actions\[0, 0\] = nan must be finite",
        ),
        (np.array([[0], [1]]), TypeError, "floating dtype"),
        (np.zeros(2, np.float32), ValueError, r"shape \(2, 1\)"),
    ],
)
def test_bad_box_actions_are_refused_on_the_host(actions, error, message):
    venv = make_sb3_vec_env("gpu_envs/Pendulum-v1", num_envs=2)
    venv.reset()
    with pytest.raises(error, match=message):
        venv.step(actions)


def test_box_actions_reach_the_env_as_float32_and_float64_rewards_as_float32():
    venv = make_sb3_vec_env("gpu_envs/Pendulum-v1", num_envs=3)
    core = venv.env.unwrapped
    assert core.dtype == torch.float64
    venv.seed(4)
    venv.reset()
    reference = gpu_envs.PendulumVectorEnv(3)
    reference.reset(seed=4)
    actions = np.array([[-2.0], [0.3], [2.0]])  # float64 in: sent as float32
    obs, rewards, dones, _ = venv.step(actions)
    ref_obs, ref_rewards, _, _, _ = reference.step(torch.tensor(actions, dtype=torch.float32))
    assert obs.dtype == rewards.dtype == np.float32
    np.testing.assert_array_equal(obs, ref_obs.numpy())
    np.testing.assert_array_equal(rewards, ref_rewards.numpy().astype(np.float32))
    assert not dones.any()


@pytest.mark.parametrize("seed", [True, "7", 1.5, np.float64(2.0)])
def test_a_seed_that_is_not_an_int_is_refused_by_seed(seed):
    venv = make_sb3_vec_env(num_envs=3)
    with pytest.raises(ValueError, match="seed must be an int"):
        venv.seed(seed)
    assert venv.seed(np.int64(2**63 - 3)) == [2**63 - 3, 2**63 - 2, 2**63 - 1]
    venv.reset()  # the largest seed whose env seeds fit in int64


@pytest.mark.parametrize("seed", [-1, 2**63 - 2])
def test_an_int_seed_out_of_range_is_refused_at_the_reset(seed):
    venv = make_sb3_vec_env(num_envs=3)
    venv.seed(seed)
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*63 - 3\]"):
        venv.reset()


def test_refuses_a_discrete_space_that_does_not_start_at_zero():
    env = gym.make_vec("gpu_envs/CartPole-v1", num_envs=2, autoreset_mode=AutoresetMode.SAME_STEP)
    env.unwrapped.single_action_space = gym.spaces.Discrete(2, start=1)
    with pytest.raises(ValueError, match="start at 0"):
        SB3VecEnv(env)

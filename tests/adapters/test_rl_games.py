"""rl_games on our envs (gpu_envs.adapters.rl_games): its PPO learns CartPole (next to the same
settings on gymnasium's CartPole) and Pendulum, the tensors stay on the env's device, time-outs
reach ``infos["time_outs"]`` (bad use: tests/adapters/test_same_step.py)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("rl_games")

from rl_games.common import env_configurations, vecenv
from rl_games.torch_runner import Runner

from gpu_envs.adapters.rl_games import (
    VECENV_TYPE,
    RlGamesVecEnv,
    register_rl_games_env,
)
from tests.helpers.torch_vec_training import GymnasiumTorch, doc_snippet, first_episode_returns


def params(env_name: str, num_actors: int, max_epochs: int, train_dir, discrete: bool) -> dict:
    """rl_games' PPO settings of the learning tests (its CartPole example's, adaptive lr)."""
    space = (
        {"discrete": {}}
        if discrete
        else {
            "continuous": {
                "mu_activation": "None",
                "sigma_activation": "None",
                "mu_init": {"name": "default"},
                "sigma_init": {"name": "const_initializer", "val": 0},
                "fixed_sigma": True,
            }
        }
    )
    return {
        "seed": 1,  # (rl_games' Runner seeds torch, NumPy and random only for a seed that is true)
        "torch_threads": 1,  # rl_games' Runner sets it; two threads on a busy 2-core CI are slow
        "algo": {"name": "a2c_discrete" if discrete else "a2c_continuous"},
        "model": {"name": "discrete_a2c" if discrete else "continuous_a2c_logstd"},
        "network": {
            "name": "actor_critic",
            "separate": True,
            "space": space,
            "mlp": {"units": [64, 64], "activation": "tanh", "initializer": {"name": "default"}},
        },
        "config": {
            "name": env_name,
            "env_name": env_name,
            "env_config": {},
            "train_dir": str(train_dir),
            "device": "cpu",
            "torch_compile": False,
            "reward_shaper": {"scale_value": 0.1},
            "normalize_advantage": True,
            "normalize_input": not discrete,
            "normalize_value": not discrete,
            "gamma": 0.99 if discrete else 0.95,
            "tau": 0.95 if discrete else 0.9,
            "learning_rate": 1e-3,
            "lr_schedule": "adaptive",
            "kl_threshold": 0.008,
            "score_to_win": 10**9,
            "max_epochs": max_epochs,
            "save_best_after": 10**9,
            "save_frequency": 0,
            "grad_norm": 1.0,
            "entropy_coef": 0.0,
            "truncate_grads": True,
            "e_clip": 0.2,
            "clip_value": True,
            "num_actors": num_actors,
            "horizon_length": 32,
            "minibatch_size": num_actors * 32 // 4,
            "mini_epochs": 5,
            "critic_coef": 2,
            "bounds_loss_coef": 0.0001,
        },
    }


def train(config: dict):
    """Train rl_games' PPO as its ``Runner`` does (without torch.compile); its deterministic
    policy as observations -> env actions."""
    runner = Runner()
    runner.load({"params": config})
    agent = runner.algo_factory.create(runner.algo_name, base_name="run", params=runner.params)
    agent.train()
    model = agent.model.eval()
    discrete = config["algo"]["name"] == "a2c_discrete"

    def act(obs: torch.Tensor) -> torch.Tensor:
        out = model({"is_train": False, "prev_actions": None, "obs": obs, "rnn_states": None})
        return out["logits"].argmax(-1) if discrete else out["mus"].clamp(-2.0, 2.0)

    return act


def register_gymnasium_cartpole(name: str) -> None:
    """gymnasium's CartPole through the same adapter, for the comparison run."""
    env_configurations.register(
        name,
        {
            "vecenv_type": VECENV_TYPE,
            "env_creator": lambda num_envs, seed=None: RlGamesVecEnv(
                GymnasiumTorch("CartPole-v1", num_envs), device="cpu"
            ),
        },
    )


# ----------------------------------------------------------------------------- learning
@pytest.mark.slow
def test_ppo_learns_cartpole_as_on_gymnasiums(tmp_path):
    """64 envs x 32 steps x 60 epochs (123k env steps): evaluation return >= 450 of 500, ours and
    gymnasium's CartPole with the same settings (the figures in docs/using-with.md)."""
    register_rl_games_env("gpu_cartpole", "gpu_envs/CartPole-v1")
    register_gymnasium_cartpole("gymnasium_cartpole")
    returns = {
        name: first_episode_returns(train(params(name, 64, 60, tmp_path / name, discrete=True)))
        .mean()
        .item()
        for name in ("gpu_cartpole", "gymnasium_cartpole")
    }
    print("rl_games CartPole evaluation returns:", returns)
    assert returns["gpu_cartpole"] >= 450, returns
    assert returns["gpu_cartpole"] >= returns["gymnasium_cartpole"] - 25, returns


@pytest.mark.slow
def test_ppo_learns_pendulum(tmp_path):
    """Continuous actions: 256 envs x 32 steps x 120 epochs (983k env steps), return >= -800
    (a random policy: about -1200). rl_games is the least steady of the three here: runs of these
    settings ended between -255 and -610."""
    register_rl_games_env("gpu_pendulum", "gpu_envs/Pendulum-v1")
    act = train(params("gpu_pendulum", 256, 120, tmp_path, discrete=False))
    returns = first_episode_returns(act, "gpu_envs/Pendulum-v1").mean().item()
    print("rl_games Pendulum evaluation return:", returns)
    assert returns >= -800


def test_docs_snippet_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # rl_games writes its run folder under the working directory
    exec(
        compile(doc_snippet("rl_games"), "using-with.md: rl_games", "exec"), {"__name__": "__doc__"}
    )


# ----------------------------------------------------------------------------- the interface
def test_registration_builds_the_adapter_with_the_env_config():
    register_rl_games_env("gpu_cartpole_short", "gpu_envs/CartPole-v1", max_episode_steps=5)
    env = vecenv.create_vec_env("gpu_cartpole_short", 4, seed=3)
    assert isinstance(env, RlGamesVecEnv) and env.env.num_envs == 4
    info = env.get_env_info()
    assert info["action_space"] == gym.spaces.Discrete(2) and info["agents"] == 1
    obs = env.reset()
    reference = gym.make_vec("gpu_envs/CartPole-v1", num_envs=4, autoreset_mode="same_step")
    assert torch.equal(obs, reference.reset(seed=3)[0])
    for _ in range(5):
        obs, rewards, dones, infos = env.step(torch.zeros(4, dtype=torch.long))
        for tensor in (obs, rewards, dones, infos["time_outs"], infos["final_obs"]):
            assert tensor.device == env.device
    assert dones.all() and infos["time_outs"].all()


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    horizon=st.integers(1, 12),
    pushes=st.lists(st.integers(0, 1), min_size=1, max_size=30),
)
def test_dones_and_time_outs_follow_the_env(seed, horizon, pushes):
    """Property: dones = terminated | truncated and time_outs = truncated & ~terminated."""
    make = dict(num_envs=3, autoreset_mode="same_step", max_episode_steps=horizon)
    reference = gym.make_vec("gpu_envs/CartPole-v1", **make)
    reference.reset(seed=seed)
    env = RlGamesVecEnv(gym.make_vec("gpu_envs/CartPole-v1", **make))
    env.seed(seed)
    env.reset()
    for push in pushes:
        action = torch.full((3,), push)
        obs, rewards, terminated, truncated, _ = reference.step(action)
        got, got_rewards, dones, infos = env.step(action)
        assert torch.equal(got, obs) and torch.equal(got_rewards, rewards)
        assert torch.equal(dones, terminated | truncated)
        assert torch.equal(infos["time_outs"], truncated & ~terminated)

"""skrl on our envs (gpu_envs.adapters.skrl): its PPO learns CartPole (next to the same settings on
gymnasium's CartPole) and Pendulum, the tensors stay on the env's device, time-outs reach skrl's
``truncated`` (bad use: tests/adapters/test_same_step.py)."""

from __future__ import annotations

import statistics

import gymnasium as gym
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

pytest.importorskip("skrl")

from skrl.agents.torch.ppo import PPO, PPO_CFG
from skrl.memories.torch import RandomMemory
from skrl.models.torch import CategoricalMixin, DeterministicMixin, GaussianMixin, Model
from skrl.resources.preprocessors.torch import RunningStandardScaler
from skrl.resources.schedulers.torch import KLAdaptiveLR
from skrl.trainers.torch import SequentialTrainer

from gpu_envs.adapters.skrl import SkrlVecEnv, make_skrl_env
from tests.helpers.torch_vec_training import GymnasiumTorch, doc_snippet, first_episode_returns


def mlp(inputs: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(inputs, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, outputs)
    )


class Categorical(CategoricalMixin, Model):
    def __init__(self, observation_space, action_space, device):
        Model.__init__(
            self, observation_space=observation_space, action_space=action_space, device=device
        )
        CategoricalMixin.__init__(self)
        self.net = mlp(self.num_observations, self.num_actions)

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {}


class Gaussian(GaussianMixin, Model):
    def __init__(self, observation_space, action_space, device):
        Model.__init__(
            self, observation_space=observation_space, action_space=action_space, device=device
        )
        GaussianMixin.__init__(self)
        self.net = mlp(self.num_observations, self.num_actions)
        self.log_std = nn.Parameter(torch.zeros(self.num_actions))

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {"log_std": self.log_std}


class Value(DeterministicMixin, Model):
    def __init__(self, observation_space, action_space, device):
        Model.__init__(
            self, observation_space=observation_space, action_space=action_space, device=device
        )
        DeterministicMixin.__init__(self)
        self.net = mlp(self.num_observations, 1)

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {}


def train(env: SkrlVecEnv, timesteps: int, rollouts: int = 32, **cfg):
    """Train skrl's PPO on ``env``; its deterministic policy as observations -> env actions."""
    torch.manual_seed(0)
    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    policy_class = Categorical if discrete else Gaussian
    spaces = (env.observation_space, env.action_space, env.device)
    agent = PPO(
        models={"policy": policy_class(*spaces), "value": Value(*spaces)},
        memory=RandomMemory(memory_size=rollouts, num_envs=env.num_envs, device=env.device),
        observation_space=env.observation_space,
        action_space=env.action_space,
        device=env.device,
        cfg=PPO_CFG(
            rollouts=rollouts,
            learning_epochs=5,
            mini_batches=4,
            learning_rate=1e-3,
            learning_rate_scheduler=KLAdaptiveLR,
            learning_rate_scheduler_kwargs={"kl_threshold": 0.008},
            time_limit_bootstrap=True,
            experiment={"write_interval": 0, "checkpoint_interval": 0},  # no runs/ folder
            **cfg,
        ),
    )
    SequentialTrainer(
        env=env,
        agents=agent,
        cfg={
            "timesteps": timesteps,
            "disable_progressbar": True,
            "close_environment_at_exit": False,
        },
    ).train()
    policy = agent.policy

    def act(obs: torch.Tensor) -> torch.Tensor:
        out, extra = policy.act({"observations": obs}, role="policy")
        if discrete:
            return extra["net_output"].argmax(-1)
        return extra["mean_actions"].clamp(-2.0, 2.0)

    return act


# ----------------------------------------------------------------------------- learning
@pytest.mark.slow
def test_ppo_learns_cartpole_as_on_gymnasiums(one_thread):
    """64 envs x 3000 steps (192k env steps) from env seeds 0, 1, 2: the median evaluation return
    >= 450 of 500, ours and gymnasium's CartPole with the same settings (the figures in
    docs/using-with.md). The median, since one seed is one draw: our starts come from our own
    RNG, not gymnasium's, so a seed gives each env different episodes (seed 0: 234 ours, 500
    gymnasium's; seeds 1, 2: 500 both, with skrl 2.1.1)."""
    returns: dict[str, list[float]] = {"gpu_envs": [], "gymnasium": []}
    for seed in (0, 1, 2):
        for name, env in {
            "gpu_envs": make_skrl_env("gpu_envs/CartPole-v1", num_envs=64, seed=seed),
            "gymnasium": SkrlVecEnv(GymnasiumTorch("CartPole-v1", 64), device="cpu", seed=seed),
        }.items():
            act = train(env, timesteps=3000)
            returns[name].append(first_episode_returns(act).mean().item())
    print("skrl CartPole evaluation returns (seeds 0, 1, 2):", returns)
    median = {name: statistics.median(values) for name, values in returns.items()}
    assert median["gpu_envs"] >= 450, returns
    assert median["gpu_envs"] >= median["gymnasium"] - 25, returns


@pytest.mark.slow
def test_ppo_learns_pendulum(one_thread):
    """Continuous actions: 256 envs x 2500 steps (640k env steps), return >= -400."""
    env = make_skrl_env("gpu_envs/Pendulum-v1", num_envs=256, seed=0)
    act = train(
        env,
        timesteps=2500,
        discount_factor=0.95,
        gae_lambda=0.9,
        value_preprocessor=RunningStandardScaler,
        value_preprocessor_kwargs={"size": 1, "device": env.device},
    )
    returns = first_episode_returns(act, "gpu_envs/Pendulum-v1").mean().item()
    print("skrl Pendulum evaluation return:", returns)
    assert returns >= -400


def test_docs_snippet_runs():
    exec(compile(doc_snippet("skrl"), "using-with.md: skrl", "exec"), {"__name__": "__doc__"})


# ----------------------------------------------------------------------------- the interface
def test_tensors_stay_on_the_env_device_and_truncation_is_handed_over():
    env = make_skrl_env("gpu_envs/CartPole-v1", num_envs=4, seed=0, max_episode_steps=5)
    obs, _ = env.reset()
    assert env.observation_space.shape == (4,) and env.action_space.n == 2
    assert env.reset()[0] is obs  # a vectorized env resets once
    for _ in range(5):
        obs, rewards, terminated, truncated, info = env.step(torch.zeros(4, 1, dtype=torch.long))
        for tensor in (obs, rewards, terminated, truncated, info["final_obs"]):
            assert tensor.device == env.device
        assert rewards.shape == terminated.shape == truncated.shape == (4, 1)
    assert truncated.all() and not terminated.any()
    assert not torch.equal(info["final_obs"], obs)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    horizon=st.integers(1, 12),
    pushes=st.lists(st.integers(0, 1), min_size=1, max_size=30),
)
def test_flags_follow_the_env(seed, horizon, pushes):
    """Property: skrl's [N, 1] flags and observations are the env's, step for step."""
    reference = gym.make_vec(
        "gpu_envs/CartPole-v1", num_envs=3, autoreset_mode="same_step", max_episode_steps=horizon
    )
    reference.reset(seed=seed)
    env = make_skrl_env("gpu_envs/CartPole-v1", num_envs=3, seed=seed, max_episode_steps=horizon)
    env.reset()
    for push in pushes:
        action = torch.full((3,), push)
        obs, rewards, terminated, truncated, _ = reference.step(action)
        got = env.step(action[:, None])
        assert torch.equal(got[0], obs) and torch.equal(got[1][:, 0], rewards)
        assert torch.equal(got[2][:, 0], terminated) and torch.equal(got[3][:, 0], truncated)

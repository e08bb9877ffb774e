"""Any engine env gets the SB3 and TorchRL adapters with no code of its own: CartPole (Discrete),
Pendulum (Box actions, float64 rewards) and the PointGoal env that docs/write-an-env.md builds go
through SB3's VecEnv checks and a short learn(), and through TorchRL's check_env_specs and a rollout
whose transitions equal the batched env's own."""

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")
pytest.importorskip("torchrl")

from gymnasium.vector import AutoresetMode
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.utils import check_for_correct_spaces
from stable_baselines3.common.vec_env import VecCheckNan, VecMonitor
from torchrl.data import Bounded, Categorical, OneHot, Unbounded
from torchrl.envs.utils import check_env_specs

from gpu_envs.adapters.sb3 import make_sb3_vec_env
from gpu_envs.adapters.torchrl import KernelTorchRLEnv
from tests.docs.test_write_an_env_tutorial import ENV_ID as POINT_GOAL
from tests.docs.test_write_an_env_tutorial import tutorial  # noqa: F401 (the fixture runs the tutorial)

CARTPOLE, PENDULUM = "gpu_envs/CartPole-v1", "gpu_envs/Pendulum-v1"
ENV_IDS = [CARTPOLE, PENDULUM, POINT_GOAL]


@pytest.fixture(scope="module", autouse=True)
def point_goal_registered(tutorial):  # noqa: F811 (the imported fixture)
    """The tutorial's code, run as one module, registers tutorial/PointGoal-v0."""
    return tutorial


def random_actions(space: gym.Space, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` actions of ``space`` as SB3 hands them (int64 indices, float32 Box values)."""
    if isinstance(space, gym.spaces.Box):
        return rng.uniform(space.low, space.high, (n, *space.shape)).astype(np.float32)
    return rng.integers(0, space.n, n)


# ------------------------------------------------------------------------------------- SB3
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sb3_vec_env_passes_the_vec_env_checks(env_id):
    n, steps = 4, 250
    venv = VecCheckNan(
        make_sb3_vec_env(env_id, num_envs=n, max_episode_steps=40), raise_exception=True
    )
    core = venv.venv.env.unwrapped
    check_for_correct_spaces(venv, core.single_observation_space, core.single_action_space)
    venv.seed(3)
    obs = venv.reset()
    assert obs.shape == (n, *venv.observation_space.shape) and obs.dtype == np.float32
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(steps):
        obs, rewards, dones, infos = venv.step(random_actions(venv.action_space, n, rng))
        assert obs.dtype == rewards.dtype == np.float32 and dones.dtype == np.bool_
        assert obs.shape == (n, *venv.observation_space.shape) and rewards.shape == dones.shape == (
            n,
        )
        assert all(venv.observation_space.contains(row) for row in obs)
        assert len(infos) == n and all(
            ("terminal_observation" in info) == done for info, done in zip(infos, dones)
        )
        ends += int(dones.sum())
    assert ends >= n, "episodes must end (and reset in the same step) within the run"


@pytest.mark.parametrize(
    ("env_id", "algo", "options"),
    [
        (CARTPOLE, PPO, dict(n_steps=32, batch_size=64, n_epochs=1)),
        (PENDULUM, SAC, dict(learning_starts=64, batch_size=32, buffer_size=1_000)),
        (POINT_GOAL, PPO, dict(n_steps=32, batch_size=64, n_epochs=1)),
    ],
)
def test_sb3_learns_a_few_hundred_steps(env_id, algo, options):
    venv = VecMonitor(make_sb3_vec_env(env_id, num_envs=4, max_episode_steps=50))
    model = algo(
        "MlpPolicy", venv, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16, 16]), **options
    )
    model.learn(total_timesteps=256)
    assert model.num_timesteps == 256 and len(model.ep_info_buffer) > 0


# ------------------------------------------------------------------------------------- TorchRL
def torchrl_env(env_id: str, num_envs: int, **options) -> KernelTorchRLEnv:
    batched = gym.make_vec(
        env_id, num_envs=num_envs, autoreset_mode=AutoresetMode.DISABLED, max_episode_steps=15
    )
    return KernelTorchRLEnv(batched, **options)


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("categorical", [False, True], ids=["one_hot", "index"])
def test_torchrl_env_passes_check_env_specs_with_specs_from_the_spaces(env_id, categorical):
    env = torchrl_env(env_id, 3, categorical_action_encoding=categorical)
    check_env_specs(env, seed=0, break_when_any_done="both")
    space = env.batched_env.single_action_space
    spec = env.action_spec
    if isinstance(space, gym.spaces.Box):
        assert (
            isinstance(spec, Bounded)
            and spec.shape == (3, *space.shape)
            and spec.dtype == torch.float32
        )
        assert torch.equal(spec.space.low[0], torch.as_tensor(space.low))
    else:
        assert isinstance(spec, Categorical if categorical else OneHot)
        assert spec.shape == ((3,) if categorical else (3, space.n))
    obs_space = env.batched_env.single_observation_space
    obs_spec = env.observation_spec["observation"]
    assert obs_spec.shape == (3, *obs_space.shape) and obs_spec.dtype == torch.float32
    assert isinstance(obs_spec, Bounded if np.isfinite(obs_space.high).all() else Unbounded)
    assert env.reward_spec.shape == (3, 1) and env.reward_spec.dtype == torch.float32


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_torchrl_rollout_equals_the_batched_env_stepping_the_same_actions(env_id):
    n, steps, seed = 4, 40, 9
    env = torchrl_env(env_id, n)
    env.set_seed(seed)
    rollout = env.rollout(steps, break_when_any_done=False)
    assert rollout.batch_size == (n, steps)
    assert env.full_action_spec.is_in(rollout[:, -1].select(*env.action_keys))

    reference = gym.make_vec(
        env_id, num_envs=n, autoreset_mode=AutoresetMode.DISABLED, max_episode_steps=15
    )
    obs, _ = reference.reset(seed=seed)
    resets = 0
    for t in range(steps):
        step = rollout[:, t]
        assert torch.equal(step["observation"], obs)
        action = step["action"]
        if not isinstance(reference.single_action_space, gym.spaces.Box):
            action = action.argmax(-1)  # one-hot (the default encoding) to indices
        obs, rewards, terminated, truncated, _ = reference.step(action)
        assert torch.equal(step["next", "observation"], obs)
        assert torch.equal(step["next", "reward"], rewards.to(torch.float32)[:, None])
        assert torch.equal(step["next", "terminated"][:, 0], terminated)
        assert torch.equal(step["next", "truncated"][:, 0], truncated)
        done = terminated | truncated
        if done.any():
            obs, _ = reference.reset(options={"reset_mask": done})
            resets += 1
    assert resets >= 2, (
        "TorchRL must have reset finished envs (truncated after 15 steps at the latest)"
    )

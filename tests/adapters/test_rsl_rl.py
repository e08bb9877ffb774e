"""rsl_rl on our envs (gpu_envs.adapters.rsl_rl): its PPO learns CartPole (next to the same settings
on gymnasium's CartPole) and Pendulum, the tensors stay on the env's device, time-outs reach
``extras["time_outs"]`` (bad use: tests/adapters/test_same_step.py)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("rsl_rl")

from rsl_rl.runners import OnPolicyRunner
from tensordict import TensorDict

from gpu_envs.adapters.rsl_rl import (
    OneHotCategoricalDistribution,
    RslRlVecEnv,
    make_rsl_rl_env,
)
from gpu_envs.adapters.same_step import same_step_vec_env
from gpu_envs.games.cartpole import CartPoleVectorEnv
from tests.helpers import host_reads
from tests.helpers.torch_vec_training import GymnasiumTorch, doc_snippet, first_episode_returns

count_host_reads = host_reads.count_host_reads  # the fixture

ONE_HOT = {"class_name": "gpu_envs.adapters.rsl_rl:OneHotCategoricalDistribution"}
GAUSSIAN = {"class_name": "GaussianDistribution", "init_std": 1.0}


def ppo_cfg(distribution: dict, num_steps_per_env: int = 32, **algorithm) -> dict:
    """The PPO settings of the learning tests (rsl_rl's own defaults but a small tanh MLP)."""
    mlp = {"class_name": "MLPModel", "hidden_dims": [64, 64], "activation": "tanh"}
    return {
        "num_steps_per_env": num_steps_per_env,
        "save_interval": 10**6,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "algorithm": {"class_name": "PPO", "learning_rate": 1e-3, "entropy_coef": 0.0, **algorithm},
        "actor": {**mlp, "distribution_cfg": distribution},
        "critic": mlp,
    }


def train(env: RslRlVecEnv, cfg: dict, iterations: int):
    """Train rsl_rl's PPO on ``env``; its deterministic policy as observations -> env actions."""
    torch.manual_seed(0)
    runner = OnPolicyRunner(env, cfg, log_dir=None, device=str(env.device))
    runner.learn(iterations)
    policy = runner.get_inference_policy()
    discrete = isinstance(env._core.action_space, gym.spaces.Discrete)

    def act(obs: torch.Tensor) -> torch.Tensor:
        out = policy(TensorDict({"policy": obs}, batch_size=[obs.shape[0]]))
        return out.argmax(-1) if discrete else out.clamp(-2.0, 2.0)

    return act


# ----------------------------------------------------------------------------- learning
@pytest.mark.slow
def test_ppo_learns_cartpole_as_on_gymnasiums(one_thread):
    """64 envs x 32 steps x 60 iterations (123k steps): evaluation return >= 450 of 500, ours and
    gymnasium's CartPole with the same settings (the figures in docs/using-with.md)."""
    returns = {}
    for name, env in {
        "gpu_envs": make_rsl_rl_env("gpu_envs/CartPole-v1", num_envs=64, seed=0),
        "gymnasium": RslRlVecEnv(GymnasiumTorch("CartPole-v1", 64), device="cpu", seed=0),
    }.items():
        act = train(env, ppo_cfg(ONE_HOT), iterations=60)
        returns[name] = first_episode_returns(act).mean().item()
    print("rsl_rl CartPole evaluation returns:", returns)
    assert returns["gpu_envs"] >= 450, returns
    assert returns["gpu_envs"] >= returns["gymnasium"] - 25, returns


@pytest.mark.slow
def test_ppo_learns_pendulum(one_thread):
    """Continuous actions: 256 envs x 32 steps x 80 iterations (655k steps), return >= -400."""
    env = make_rsl_rl_env("gpu_envs/Pendulum-v1", num_envs=256, seed=0)
    act = train(env, ppo_cfg(GAUSSIAN, gamma=0.95, lam=0.9), iterations=80)
    returns = first_episode_returns(act, "gpu_envs/Pendulum-v1").mean().item()
    print("rsl_rl Pendulum evaluation return:", returns)
    assert returns >= -400


def test_docs_snippet_runs():
    exec(compile(doc_snippet("rsl_rl"), "using-with.md: rsl_rl", "exec"), {"__name__": "__doc__"})


# ----------------------------------------------------------------------------- the interface
def test_tensors_stay_on_the_env_device_and_time_outs_are_handed_over():
    env = make_rsl_rl_env("gpu_envs/CartPole-v1", num_envs=4, seed=0, max_episode_steps=5)
    obs = env.get_observations()
    assert obs["policy"].device == env.device and obs.batch_size == torch.Size([4])
    assert env.num_actions == 2 and env.max_episode_length == 5
    for _ in range(5):
        obs, rewards, dones, extras = env.step(torch.eye(2)[torch.zeros(4, dtype=torch.long)])
        for tensor in (obs["policy"], rewards, dones, extras["time_outs"]):
            assert tensor.device == env.device
        assert rewards.shape == dones.shape == (4,) and rewards.dtype == torch.float32
    # always pushing left: the poles fall after ~9 steps, so step 5 is a time-out for every env
    assert dones.all() and extras["time_outs"].all()
    assert (env.episode_length_buf == 0).all()
    assert not torch.equal(extras["final_observations"]["policy"], obs["policy"])


def one_hot_rows(indices: list[int], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(indices), 2).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8, torch.bool])
def test_one_hot_rows_of_any_real_dtype_step_as_their_indices(dtype):
    rows, indices = make_rsl_rl_env(num_envs=4, seed=3), make_rsl_rl_env(num_envs=4, seed=3)
    for step in range(12):
        chosen = [(step + i) % 2 for i in range(4)]
        got, want = rows.step(one_hot_rows(chosen, dtype)), indices.step(torch.tensor(chosen))
        assert torch.equal(got[0]["policy"], want[0]["policy"]) and torch.equal(got[1], want[1])


class CheckedHere(CartPoleVectorEnv):
    """CartPole with a check_actions of its own: the adapter cannot rely on the engine's."""

    def check_actions(self, actions) -> torch.Tensor:
        return super().check_actions(actions)


def same_step(env_class: type) -> CartPoleVectorEnv:
    return env_class(4, autoreset_mode="same_step")


@pytest.mark.parametrize(
    "make",
    [
        lambda: make_rsl_rl_env(num_envs=4, seed=0),
        lambda: RslRlVecEnv(same_step(CheckedHere), seed=0),
        lambda: RslRlVecEnv(GymnasiumTorch("CartPole-v1", 4), device="cpu", seed=0),
    ],
    ids=["engine", "own_check", "not_ours"],
)
@pytest.mark.parametrize(
    "rows, bad_row",
    [
        ([[1, 0], [0.5, 0.5], [0, 1], [1, 0]], 1),
        ([[1, 0], [0, 1], [1, 1], [0, 0]], 2),
        ([[1, 0], [0, 1], [0, 1], [2, -1]], 3),
        ([[1, 0], [float("nan"), 0], [0, 1], [1, 0]], 1),
    ],
)
def test_rows_that_are_not_one_hot_are_refused_naming_the_row_before_any_env_moves(
    make, rows, bad_row
):
    env, untouched = make(), make()
    with pytest.raises(ValueError, match=rf"not one-hot rows .*: row {bad_row} is \["):
        env.step(torch.tensor(rows))
    for step in range(3):  # the envs step on from where they were, as envs that never saw it
        actions = one_hot_rows([step % 2, 1, 0, 1])
        got, want = env.step(actions), untouched.step(actions)
        assert torch.equal(got[0]["policy"], want[0]["policy"])
    assert torch.equal(env.episode_length_buf, untouched.episode_length_buf)


def test_with_validation_off_rows_step_as_their_argmax():
    vec_env = same_step_vec_env("gpu_envs/CartPole-v1", 4, "cpu", validate_actions=False)
    env, reference = RslRlVecEnv(vec_env, seed=1), make_rsl_rl_env(num_envs=4, seed=1)
    got = env.step(torch.tensor([[0.2, 0.8], [0.9, 0.1], [0.0, 3.0], [1.0, 0.0]]))
    want = reference.step(torch.tensor([1, 0, 1, 0]))
    assert torch.equal(got[0]["policy"], want[0]["policy"])


def test_a_one_hot_step_reads_nothing_back_to_the_host(count_host_reads):
    """On the CPU the engine checks the indices inside its step loop: the folded one-hot check
    adds no read of its own (on a GPU it shares the engine's one read, see the next test)."""
    env = make_rsl_rl_env(num_envs=4, seed=0)
    for step in range(3):
        _, reads = count_host_reads(env.step, one_hot_rows([step % 2, 1, 0, 1]))
        assert reads == [], f"step {step} read back {reads}"


@pytest.mark.cudasim
def test_on_cuda_a_one_hot_step_reads_back_once(count_host_reads):
    """The engine's action check makes the step's one read; the one-hot check rides on it."""
    env = make_rsl_rl_env(num_envs=4, device="cuda", seed=0)
    for step in range(3):
        actions = one_hot_rows([step % 2, 1, 0, 1]).to(env.device)
        _, reads = count_host_reads(env.step, actions)
        assert len(reads) == 1, f"step {step} read back {reads}"
    with pytest.raises(ValueError, match="not one-hot rows .*: row 2 is"):
        env.step(torch.tensor([[1, 0], [0, 1], [1, 1], [0, 1]], device=env.device))


def randomise_like_rsl_rl(env: RslRlVecEnv) -> None:
    """What ``OnPolicyRunner.learn(..., init_at_random_ep_len=True)`` does to the env."""
    env.episode_length_buf = torch.randint_like(
        env.episode_length_buf, high=int(env.max_episode_length)
    )


def test_random_episode_lengths_bring_the_first_time_outs_earlier():
    horizon, n = 20, 32
    env = make_rsl_rl_env("gpu_envs/Pendulum-v1", num_envs=n, seed=0, max_episode_steps=horizon)
    torch.manual_seed(0)
    randomise_like_rsl_rl(env)
    start = env.episode_length_buf.clone()
    assert len(set(start.tolist())) > 5
    first_time_out = torch.full((n,), -1)
    for step in range(1, horizon + 1):  # Pendulum never terminates: every end is a time-out
        _, _, dones, extras = env.step(torch.zeros(n, 1))
        assert torch.equal(dones, extras["time_outs"])
        first_time_out[extras["time_outs"] & (first_time_out < 0)] = step
    assert torch.equal(first_time_out, horizon - start)
    # each env restarted at its first time-out: it is now `start` steps into its next episode
    assert torch.equal(env.episode_length_buf, start)


def test_runner_learn_with_init_at_random_ep_len_spreads_the_episodes():
    horizon, n = 16, 32
    env = make_rsl_rl_env("gpu_envs/Pendulum-v1", num_envs=n, seed=0, max_episode_steps=horizon)
    torch.manual_seed(0)
    runner = OnPolicyRunner(env, ppo_cfg(GAUSSIAN, num_steps_per_env=horizon), None, "cpu")
    runner.learn(1, init_at_random_ep_len=True)
    # without the randomisation all 32 envs would time out together at step 16 and sit at 0 now
    assert len(set(env.episode_length_buf.tolist())) > 5


def test_episode_length_buf_refuses_bad_counts_and_envs_without_counters():
    env = make_rsl_rl_env("gpu_envs/Pendulum-v1", num_envs=4, seed=0)
    with pytest.raises(ValueError, match=r"episode steps must be integers in \[0"):
        env.episode_length_buf = torch.tensor([0, 1, -1, 2])
    with pytest.raises(ValueError, match=r"integers of shape \(4,\)"):
        env.episode_length_buf = torch.zeros(4)
    with pytest.raises(ValueError, match=r"integers of shape \(4,\)"):
        env.episode_length_buf = torch.zeros(3, dtype=torch.long)
    assert torch.equal(env.episode_length_buf, torch.zeros(4, dtype=torch.long))
    other = RslRlVecEnv(GymnasiumTorch("Pendulum-v1", 4), device="cpu", seed=0)
    with pytest.raises(TypeError, match="init_at_random_ep_len=False"):
        other.episode_length_buf = torch.ones(4, dtype=torch.long)


def test_one_hot_categorical_distribution_matches_torch_categorical():
    dist = OneHotCategoricalDistribution(3)
    logits = torch.randn(5, 3)
    dist.update(logits)
    sample = dist.sample()
    reference = torch.distributions.Categorical(logits=logits)
    assert torch.allclose(dist.log_prob(sample), reference.log_prob(sample.argmax(-1)))
    assert torch.allclose(dist.entropy, reference.entropy())
    other = torch.randn(5, 3)
    expected = torch.distributions.kl_divergence(
        reference, torch.distributions.Categorical(logits=other)
    )
    assert torch.allclose(dist.kl_divergence((logits,), (other,)), expected, atol=1e-6)
    assert torch.equal(dist.deterministic_output(logits).argmax(-1), logits.argmax(-1))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    horizon=st.integers(1, 12),
    pushes=st.lists(st.integers(0, 1), min_size=1, max_size=30),
)
def test_dones_and_time_outs_follow_the_env(seed, horizon, pushes):
    """Property: dones = terminated | truncated, time_outs = truncated & ~terminated, and the final
    observations are the env's SAME_STEP ``final_obs`` where an episode ended."""
    reference = gym.make_vec(
        "gpu_envs/CartPole-v1", num_envs=3, autoreset_mode="same_step", max_episode_steps=horizon
    )
    reference.reset(seed=seed)
    env = make_rsl_rl_env("gpu_envs/CartPole-v1", num_envs=3, seed=seed, max_episode_steps=horizon)
    for push in pushes:
        action = torch.full((3,), push)
        obs, _, terminated, truncated, info = reference.step(action)
        got, _, dones, extras = env.step(torch.eye(2)[action])
        assert torch.equal(got["policy"], obs)
        assert torch.equal(dones, terminated | truncated)
        assert torch.equal(extras["time_outs"], truncated & ~terminated)
        final = extras["final_observations"]["policy"]
        assert torch.equal(final[info["_final_obs"]], info["final_obs"][info["_final_obs"]])

"""Tag's CUDA branch (one block per game, a thread per agent) against the CPU backend, through the
env.

Runs ``TagEnv(device="cuda")`` under ``NUMBA_ENABLE_CUDASIM=1`` (set before Python starts):
the simulator runs the kernels' threads, barriers and atomics, and every buffer must equal the CPU
env's bit for bit. On a real GPU floats may differ in the last bits (FMA contraction, libdevice), so
there this test compares within a tolerance (the parity checker classifies the near-ties).
"""

import numpy as np
import pytest
import torch

from gpu_envs.games.tag.env import TagEnv
from gpu_envs.kernels import cuda as cuda_driver

pytestmark = pytest.mark.cudasim

NUM_ENVS = 3
SMALL = dict(
    num_taggers=2,
    num_runners=5,
    grid_length=3.0,
    episode_length=7,
    tagging_distance=0.15,
    max_acceleration=0.4,
    min_acceleration=-0.4,
    num_acceleration_levels=4,
    num_turn_levels=5,
    edge_hit_penalty=-0.5,
    step_penalty_for_tagger=-0.1,
    step_reward_for_runner=0.05,
)


def pair(monkeypatch, threads, **params):
    if threads is not None:  # fewer threads than agents: each thread loops over several agents
        monkeypatch.setattr(cuda_driver, "MAX_THREADS_PER_AGENT_BLOCK", threads)
    return TagEnv(NUM_ENVS, "cpu", **params), TagEnv(NUM_ENVS, "cuda", **params)


@pytest.mark.parametrize(
    "mode, overrides, threads",
    [
        (
            "next_step",
            dict(use_full_observation=False, num_other_agents_observed=3, observe_self=True),
            3,
        ),
        ("same_step", dict(use_full_observation=True, runner_exits_game_after_tagged=False), None),
        (
            "same_step",
            dict(use_full_observation=False, num_other_agents_observed=6, observe_self=True),
            2,
        ),
    ],
)
def test_cuda_env_matches_cpu_env(
    monkeypatch, mode, overrides, threads, assert_matches_cpu, assert_envs_match
):
    cpu, gpu = pair(monkeypatch, threads, autoreset_mode=mode, **SMALL, **overrides)
    assert gpu.kernel_target == "cuda"
    for env in (cpu, gpu):
        env.reset(seed=11)
    assert_envs_match(cpu, gpu, "reset")
    rng = np.random.default_rng(5)
    tags = dones = 0
    for step in range(14):
        actions = torch.from_numpy(rng.integers(0, (5, 6), size=(NUM_ENVS, cpu.num_agents, 2)))
        out_cpu, out_gpu = cpu.step(actions), gpu.step(actions)
        for name, a, b in zip(
            ("obs", "rewards", "terminated", "truncated"), out_cpu[:4], out_gpu[:4]
        ):
            assert_matches_cpu(a, b, f"{name} at step {step}")
        assert_envs_match(cpu, gpu, f"step {step}")
        tags += int(cpu.team_view(cpu.tag_count, "runner").sum())
        dones += int(out_cpu[2].sum())
    assert tags > 0 and dones > 0  # the run covered tags and resets


def test_disabled_mode_partial_reset_and_fixed_start(monkeypatch, assert_envs_match):
    cpu, gpu = pair(
        monkeypatch,
        4,
        autoreset_mode="disabled",
        reset_mode="fixed",
        seed=9,
        **{**SMALL, "episode_length": 3},
    )
    for env in (cpu, gpu):
        env.reset()
    assert (gpu.state["x"] == gpu.state["x"][0]).all()
    rng = np.random.default_rng(1)
    for env in (cpu, gpu):
        env.validate_actions = False  # steps 4 and 5 step finished games: frozen, reward 0
    for step in range(5):
        actions = torch.from_numpy(rng.integers(0, 5, size=(NUM_ENVS, cpu.num_agents, 2)))
        cpu.step(actions)
        gpu.step(actions)
        assert_envs_match(cpu, gpu, f"step {step}")
    mask = torch.tensor([True, False, True])
    for env in (cpu, gpu):
        env.reset(options={"reset_mask": mask})
    assert_envs_match(cpu, gpu, "partial reset")
    assert gpu.state["t"].tolist() == [0, 3, 0]


def test_out_of_range_action_is_flagged_not_read(monkeypatch):
    cpu, gpu = pair(monkeypatch, None, validate_actions=False, **SMALL)
    gpu.reset(seed=0)
    actions = torch.zeros((NUM_ENVS, gpu.num_agents, 2), dtype=torch.int64)
    actions[1, 4, 1] = 1000
    actions[2, 0, 0] = -3
    gpu.step(actions)
    assert gpu.action_error.tolist() == [False, True, True]


def test_too_many_agents_for_shared_memory_is_a_clear_error():
    with pytest.raises(ValueError, match="shared memory"):
        TagEnv(1, "cuda", num_runners=5000)

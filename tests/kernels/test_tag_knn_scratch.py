"""Tag's kNN scratch on CUDA is one row per thread of an env's block (at most 256), not one per
agent: 8 * N * N bytes per game was 16 GB at the 1000-agent scale point (2000 games); now
8 * N * 256. With more agents than threads each thread still has its own row, and the step
equals the CPU's (simulator: bit for bit)."""

import numpy as np
import pytest
import torch

from gpu_envs.games.tag.env import TagEnv
from gpu_envs.kernels.cuda import MAX_THREADS_PER_AGENT_BLOCK

pytestmark = pytest.mark.cudasim
PARTIAL = dict(use_full_observation=False, num_other_agents_observed=3, episode_length=4)


@pytest.mark.parametrize("runners", [6, 1000 - 10])
def test_the_scratch_has_a_row_per_thread_of_the_block(runners):
    env = TagEnv(2, "cuda", num_taggers=10, num_runners=runners, **PARTIAL)
    n = env.num_agents
    rows = min(n, MAX_THREADS_PER_AGENT_BLOCK)
    layout = env.buffer_layout()
    assert layout["knn_idx"][0] == (2, rows, 3 + n)
    assert layout["d2_row"][0] == (2, rows, n)


def test_more_agents_than_threads_step_as_on_the_cpu(assert_envs_match):
    params = dict(num_taggers=4, num_runners=MAX_THREADS_PER_AGENT_BLOCK + 12, **PARTIAL)
    envs = [TagEnv(1, device, **params) for device in ("cpu", "cuda")]
    generator = np.random.default_rng(0)
    for env in envs:
        env.reset(seed=3)
    for step in range(2):
        actions = torch.as_tensor(generator.integers(0, 3, (1, envs[0].num_agents, 2)))
        for env in envs:
            env.step(actions)
        assert_envs_match(*envs, f"step {step + 1}")

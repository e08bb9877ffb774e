"""The Tag CUDA kernels, run in the CUDA simulator (or on a GPU), against the CPU drivers.

Run with ``NUMBA_ENABLE_CUDASIM=1 pytest -m cudasim`` (the variable must be set before Python
starts). The kernel-level drivers are called with NumPy arrays (the simulator copies them in and
out; torch has no CUDA there). In the simulator every field must match the CPU bit for bit; on a
real GPU floats may differ in the last bits (fused multiply-add), integer state must not.
"""

import numpy as np
import pytest

from gpu_envs.kernels import tag_cpu, tag_logic
from gpu_envs.kernels.autoreset import DISABLED, NEXT_STEP, SAME_STEP
from gpu_envs.kernels.tag_buffers import allocate_numpy
from gpu_envs.tag_params import TagParams

pytestmark = pytest.mark.cudasim

NUM_ENVS = 3
SMALL = dict(num_taggers=2, num_runners=5, grid_length=3.0, episode_length=7, tagging_distance=0.15,
             max_acceleration=0.4, min_acceleration=-0.4, num_acceleration_levels=4, num_turn_levels=5,
             edge_hit_penalty=-0.5, step_penalty_for_tagger=-0.1, step_reward_for_runner=0.05)
EXACT_FIELDS = ("active", "t", "needs_reset", "episode", "terminated", "truncated", "final_active",
                "has_final_obs", "tag_count", "action_error")


@pytest.fixture(scope="module")
def tag_cuda():
    from numba import config

    from gpu_envs.kernels import tag_cuda

    return tag_cuda, bool(config.ENABLE_CUDASIM)


class Pair:
    """The same envs as CPU buffers and as kernel (simulator) buffers, stepped side by side."""

    def __init__(self, params: TagParams, tag_cuda, threads, fixed_start=None):
        self.cuda, self.threads = tag_cuda, threads
        self.fc, self.ic = tag_logic.make_consts(params)
        self.tables = (tag_logic.action_levels(params.min_acceleration, params.max_acceleration,
                                               params.num_acceleration_levels),
                       tag_logic.action_levels(params.min_turn, params.max_turn, params.num_turn_levels))
        n, k = params.num_agents, params.num_other_agents_observed
        dim = tag_logic.observation_size(n, params.use_full_observation, k, params.observe_self)
        self.cpu = allocate_numpy(NUM_ENVS, n, dim, k, 1)
        self.gpu = allocate_numpy(NUM_ENVS, n, dim, k, n)
        for b in (self.cpu, self.gpu):
            b.env_seed[:] = np.arange(NUM_ENVS, dtype=np.uint64) + np.uint64(40)
        if fixed_start is None:
            self.start, self.given = np.zeros((3, n), np.float32), np.zeros(3, np.bool_)
        else:
            self.start, self.given = fixed_start, np.ones(3, np.bool_)

    def reset(self, mask):
        tag_cpu.reset(self.cpu, mask, self.start, self.given, self.fc, self.ic)
        self.cuda.reset(self.gpu, mask, self.start, self.given, self.fc, self.ic, threads_per_block=self.threads)

    def step(self, actions, mode):
        tag_cpu.step(self.cpu, actions, *self.tables, self.start, self.given, self.fc, self.ic, mode)
        self.cuda.step(self.gpu, actions, *self.tables, self.start, self.given, self.fc, self.ic, mode,
                       threads_per_block=self.threads)

    def assert_equal(self, bit_exact, where):
        for name in self.cpu._fields:
            if name.startswith("knn"):
                continue  # scratch: one row per env on the CPU, per agent on CUDA
            cpu, gpu = getattr(self.cpu, name), getattr(self.gpu, name)
            if bit_exact or name in EXACT_FIELDS:
                np.testing.assert_array_equal(gpu, cpu, err_msg=f"{name} at {where}")
            else:
                np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-5, err_msg=f"{name} at {where}")


@pytest.mark.parametrize("mode, overrides, threads", [
    (NEXT_STEP, dict(use_full_observation=False, num_other_agents_observed=3, observe_self=True), 3),
    (SAME_STEP, dict(use_full_observation=True, runner_exits_game_after_tagged=False), None),
    (SAME_STEP, dict(use_full_observation=False, num_other_agents_observed=7, observe_self=True), 2),
])
def test_kernels_match_cpu_drivers(tag_cuda, mode, overrides, threads):
    kernels, simulated = tag_cuda
    params = TagParams(**{**SMALL, **overrides})
    pair = Pair(params, kernels, threads)
    pair.reset(np.ones(NUM_ENVS, np.bool_))
    pair.assert_equal(simulated, "reset")
    rng = np.random.default_rng(5)
    tags = dones = 0
    for step in range(16):
        actions = rng.integers(0, (5, 6), size=(NUM_ENVS, params.num_agents, 2)).astype(np.int64)
        pair.step(actions, mode)
        pair.assert_equal(simulated, f"step {step}")
        tags += int(pair.cpu.tag_count[:, params.num_taggers:].sum())
        dones += int(pair.cpu.terminated.sum())
    assert tags > 0 and dones > 0  # the run covered tags and resets


def test_disabled_mode_partial_reset_and_fixed_start(tag_cuda):
    kernels, simulated = tag_cuda
    params = TagParams(**{**SMALL, "episode_length": 3})
    start = tag_cpu.draw_start_state(9, params.num_agents, tag_logic.make_consts(params)[0])
    pair = Pair(params, kernels, 4, fixed_start=start)
    pair.reset(np.ones(NUM_ENVS, np.bool_))
    np.testing.assert_array_equal(pair.gpu.x, np.broadcast_to(start[0], pair.gpu.x.shape))
    rng = np.random.default_rng(1)
    for step in range(5):  # steps 4 and 5 step finished envs: frozen, reward 0, still terminated
        pair.step(rng.integers(0, 5, size=(NUM_ENVS, params.num_agents, 2)).astype(np.int64), DISABLED)
        pair.assert_equal(simulated, f"step {step}")
    assert pair.gpu.terminated.all() and (pair.gpu.rewards == 0).all() and (pair.gpu.t == 3).all()
    mask = np.array([True, False, True])
    pair.reset(mask)
    pair.assert_equal(simulated, "partial reset")
    assert pair.gpu.t.tolist() == [0, 3, 0] and pair.gpu.episode.tolist() == [2, 1, 2]


def test_out_of_range_action_is_flagged_not_read(tag_cuda):
    kernels, simulated = tag_cuda
    params = TagParams(**SMALL)
    pair = Pair(params, kernels, None)
    pair.reset(np.ones(NUM_ENVS, np.bool_))
    actions = np.zeros((NUM_ENVS, params.num_agents, 2), np.int64)
    actions[1, 4, 1] = 1000
    actions[2, 0, 0] = -3
    pair.step(actions, NEXT_STEP)
    pair.assert_equal(simulated, "bad action")
    assert pair.gpu.action_error.tolist() == [False, True, True]


def test_too_many_agents_for_shared_memory_is_a_clear_error(tag_cuda):
    kernels, _ = tag_cuda
    with pytest.raises(ValueError, match="shared memory"):
        kernels.check_fits(kernels.MAX_AGENTS + 1)
    kernels.check_fits(kernels.MAX_AGENTS)

"""Acrobot and MountainCar's CUDA branch (simulated device) equals the CPU backend bit for bit.

Runs the real CUDA kernels through the vector envs with ``device="cuda"``: in CI under
``NUMBA_ENABLE_CUDASIM=1`` (set before Python starts). On a real GPU, libdevice's trig and pow and
FMA contraction may change the last bits (integers and flags exact, floats within 1e-4).
"""

import numpy as np
import pytest
import torch

from gpu_envs.games.acrobot import AcrobotVectorEnv
from gpu_envs.games.mountain_car import MountainCarContinuousVectorEnv, MountainCarVectorEnv

pytestmark = pytest.mark.cudasim
NUM_ENVS = 37  # not a multiple of the CUDA block size: exercises the bounds guard


def _actions(env, rng: np.random.Generator) -> torch.Tensor:
    if env.single_action_space.shape == (1,):
        return torch.from_numpy(rng.uniform(-1.0, 1.0, (NUM_ENVS, 1)).astype(np.float32))
    return torch.from_numpy(rng.integers(3, size=NUM_ENVS))


@pytest.mark.parametrize(
    "make", [AcrobotVectorEnv, MountainCarVectorEnv, MountainCarContinuousVectorEnv]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_cuda_env_matches_cpu_env_bit_for_bit(
    make, dtype, mode, assert_matches_cpu, assert_envs_match
):
    kwargs = {"dtype": dtype, "max_episode_steps": 7, "autoreset_mode": mode}
    cpu, gpu = make(NUM_ENVS, "cpu", **kwargs), make(NUM_ENVS, "cuda", **kwargs)
    assert gpu.kernel_target == "cuda"
    assert_matches_cpu(cpu.reset(seed=10)[0], gpu.reset(seed=10)[0], "reset obs")
    # Start some cars near the goal and the left wall, the acrobot with fast links.
    start = cpu.state.clone()
    start[: NUM_ENVS // 2, 0] = 0.44 if make is not AcrobotVectorEnv else 3.0
    start[NUM_ENVS // 2 :, 1] = -0.07 if make is not AcrobotVectorEnv else -3.0
    cpu.state, gpu.state = start, start.to(gpu.device)
    rng = np.random.default_rng(0)
    for step in range(20):
        actions = _actions(cpu, rng)
        out_cpu, out_gpu = cpu.step(actions), gpu.step(actions.to(gpu.device))
        for name, a, b in zip(("obs", "rewards", "terminated", "truncated"), out_cpu, out_gpu):
            assert_matches_cpu(a, b, f"{name} at step {step}")
        if mode == "disabled":
            mask = cpu.state_snapshot()["needs_reset"]
            if mask.any():
                cpu.reset(options={"reset_mask": mask})
                gpu.reset(options={"reset_mask": mask.to(gpu.device)})
        assert_envs_match(cpu, gpu, f"step {step}")
    assert int(cpu.state_snapshot()["episode"].max()) >= 2, "the test must exercise resets"

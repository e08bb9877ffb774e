"""Pendulum's CUDA branch (simulated device) equals the CPU backend bit for bit.

Runs the real CUDA kernels through ``PendulumVectorEnv(device="cuda")``: in CI under
``NUMBA_ENABLE_CUDASIM=1`` (set before Python starts), where the simulator evaluates the same Python
as the CPU kernels. On a real GPU, libdevice's sin/cos and FMA contraction may change the last bits,
so there integers and flags are compared exactly and floats within 1e-4.
"""

import numpy as np
import pytest
import torch

from gpu_envs.games.pendulum import PendulumVectorEnv

pytestmark = pytest.mark.cudasim
NUM_ENVS = 37  # not a multiple of the CUDA block size: exercises the bounds guard


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_cuda_env_matches_cpu_env_bit_for_bit(dtype, mode, assert_matches_cpu, assert_envs_match):
    kwargs = {"dtype": dtype, "max_episode_steps": 9, "autoreset_mode": mode}
    cpu = PendulumVectorEnv(NUM_ENVS, "cpu", **kwargs)
    gpu = PendulumVectorEnv(NUM_ENVS, "cuda", **kwargs)
    assert gpu.kernel_target == "cuda"
    options = {"x_init": 4.0, "y_init": 2.0}
    assert_matches_cpu(
        cpu.reset(seed=1000, options=options)[0],
        gpu.reset(seed=1000, options=options)[0],
        "reset obs",
    )
    rng = np.random.default_rng(0)
    widest_angle = 0.0
    for step in range(30):
        # Torques over [-2, 2] with its edges; angles leave [-pi, pi] (the cost's remainder is
        # used).
        actions = torch.from_numpy(rng.uniform(-2.0, 2.0, size=(NUM_ENVS, 1)).astype(np.float32))
        actions[:3, 0] = torch.tensor([-2.0, 0.0, 2.0])
        out_cpu, out_gpu = cpu.step(actions), gpu.step(actions.to(gpu.device))
        for name, a, b in zip(
            ("obs", "rewards", "terminated", "truncated"), out_cpu[:4], out_gpu[:4]
        ):
            assert_matches_cpu(a, b, f"{name} at step {step}")
        assert sorted(out_cpu[4]) == sorted(out_gpu[4])
        widest_angle = max(widest_angle, float(cpu.state[:, 0].abs().max()))
        if mode == "disabled":
            mask = cpu.state_snapshot()["needs_reset"]
            if mask.any():
                cpu.reset(options={"reset_mask": mask})
                gpu.reset(options={"reset_mask": mask.to(gpu.device)})
        assert_envs_match(cpu, gpu, f"step {step}")
    assert int(cpu.state_snapshot()["episode"].max()) >= 3, "the test must exercise resets"
    assert widest_angle > np.pi, "the test must exercise unwrapped angles"

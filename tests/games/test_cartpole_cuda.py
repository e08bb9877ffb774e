"""The env's CUDA branch (simulated device) equals the CPU backend bit for bit.

Runs the real CUDA kernels through ``CartPoleVectorEnv(device="cuda")``: in CI under
``NUMBA_ENABLE_CUDASIM=1`` (set before Python starts), where the simulator evaluates the same Python
as the CPU kernels; on a real GPU float results may differ in the last bits (FMA contraction,
libdevice's sin/cos), so there it compares integers and flags exactly and floats within 1e-4.
"""

import numpy as np
import pytest
import torch

from gpu_envs.games.cartpole import CartPoleVectorEnv

pytestmark = pytest.mark.cudasim
NUM_ENVS = 37  # not a multiple of the CUDA block size: exercises the bounds guard


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_cuda_env_matches_cpu_env_bit_for_bit(dtype, mode, assert_matches_cpu, assert_envs_match):
    kwargs = dict(dtype=dtype, max_episode_steps=12, autoreset_mode=mode)
    cpu = CartPoleVectorEnv(NUM_ENVS, "cpu", **kwargs)
    gpu = CartPoleVectorEnv(NUM_ENVS, "cuda", **kwargs)
    assert gpu.kernel_target == "cuda"
    obs_cpu, _ = cpu.reset(seed=1000)
    obs_gpu, _ = gpu.reset(seed=1000)
    assert_matches_cpu(obs_cpu, obs_gpu, "reset obs")
    rng = np.random.default_rng(0)
    for step in range(40):
        actions = torch.from_numpy(rng.integers(0, 2, size=NUM_ENVS))
        out_cpu, out_gpu = cpu.step(actions), gpu.step(actions.to(gpu.device))
        for name, a, b in zip(
            ("obs", "rewards", "terminated", "truncated"), out_cpu[:4], out_gpu[:4]
        ):
            assert_matches_cpu(a, b, f"{name} at step {step}")
        assert sorted(out_cpu[4]) == sorted(out_gpu[4])
        if mode == "disabled":
            mask = cpu.state_snapshot()["needs_reset"]
            if mask.any():
                cpu.reset(options={"reset_mask": mask})
                gpu.reset(options={"reset_mask": mask.to(gpu.device)})
        assert_envs_match(cpu, gpu, f"step {step}")
    assert int(cpu.state_snapshot()["episode"].max()) >= 3, "the test must exercise resets"

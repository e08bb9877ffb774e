"""The CUDA path (kernels, drivers, RNG) equals the CPU backend bit for bit.

Runs the real CUDA kernels: in CI under ``NUMBA_ENABLE_CUDASIM=1`` (set before Python starts),
or on a GPU (where float results may differ in the last bits, so there it compares integers only).
"""

import numpy as np
import pytest

from gpu_envs.kernels import cartpole_cpu
from gpu_envs.kernels.autoreset import DISABLED, NEXT_STEP, SAME_STEP
from gpu_envs.kernels import cartpole_logic as logic
from gpu_envs.kernels.cartpole_buffers import CartPoleBuffers, CartPoleOutputs, allocate_numpy, allocate_outputs

pytestmark = pytest.mark.cudasim
NUM_ENVS = 37  # not a multiple of the block size: exercises the bounds guard


def seeded_buffers(dtype) -> CartPoleBuffers:
    buffers = allocate_numpy(NUM_ENVS, dtype)
    buffers.env_seed[:] = 1000 + np.arange(NUM_ENVS, dtype=np.uint64)
    return buffers


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", [NEXT_STEP, SAME_STEP, DISABLED])
def test_cuda_kernels_match_cpu_bit_for_bit(dtype, mode):
    from numba import config, cuda

    from gpu_envs.kernels import cartpole_cuda

    exact = bool(config.ENABLE_CUDASIM)
    consts = logic.make_consts(dtype)
    bounds = np.array([-0.05, 0.05])
    cpu = seeded_buffers(dtype)
    gpu = CartPoleBuffers(*[cuda.to_device(array) for array in seeded_buffers(dtype)])
    cpu_out = allocate_outputs(NUM_ENVS)
    scratch = cartpole_cpu.make_scratch(NUM_ENVS, dtype)
    gpu_out = CartPoleOutputs(*[cuda.to_device(array) for array in allocate_outputs(NUM_ENVS)])
    consts_d, bounds_d = cuda.to_device(consts), cuda.to_device(bounds)
    everyone = np.ones(NUM_ENVS, dtype=np.bool_)
    cartpole_cpu.reset(cpu, everyone, bounds)
    cartpole_cuda.reset(gpu, cuda.to_device(everyone), bounds_d)
    rng = np.random.default_rng(0)
    for step in range(60):
        actions = rng.integers(0, 2, size=NUM_ENVS).astype(np.int64)
        cartpole_cpu.step(cpu, cpu_out, actions, consts, bounds, 12, step % 2 == 0, mode, scratch)
        cartpole_cuda.step(gpu, gpu_out, cuda.to_device(actions), consts_d, bounds_d, 12, step % 2 == 0, mode)
        if mode == DISABLED and cpu.needs_reset.any():
            mask = cpu.needs_reset.copy()
            cartpole_cpu.reset(cpu, mask, bounds)
            cartpole_cuda.reset(gpu, cuda.to_device(mask), bounds_d)
        names = CartPoleBuffers._fields + CartPoleOutputs._fields
        for name, cpu_array, gpu_array in zip(names, (*cpu, *cpu_out), (*gpu, *gpu_out)):
            host = gpu_array.copy_to_host()
            if exact or host.dtype.kind in "biu":
                assert np.array_equal(host, cpu_array), f"{name} differs at step {step}"
            else:
                np.testing.assert_allclose(host, cpu_array, rtol=0, atol=1e-4, err_msg=name)
    assert cpu.episode.max() >= 3, "the test must exercise resets"

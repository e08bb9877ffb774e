"""CUDA drivers of the CartPole kernels: one thread per env.

Importing this module needs numba-cuda (a GPU, or ``NUMBA_ENABLE_CUDASIM=1`` for the simulator).
Arguments are device arrays (``numba.cuda`` arrays or anything with ``__cuda_array_interface__``).
"""

from numba import cuda

from gpu_envs.kernels import cartpole_logic as logic
from gpu_envs.kernels import cuda_targets  # noqa: F401  (registers the CUDA primitives)

THREADS_PER_BLOCK = 256


@cuda.jit
def step_kernel(state, elapsed, needs_reset, episode, env_seed, actions, consts, reset_bounds,
                max_episode_steps, sutton_barto_reward, autoreset_mode,
                obs, rewards, terminated, truncated, final_obs, has_final_obs):
    i = cuda.grid(1)
    if i < state.shape[1]:
        logic.step_env(i, state, elapsed, needs_reset, episode, env_seed, actions, consts,
                       reset_bounds, max_episode_steps, sutton_barto_reward, autoreset_mode,
                       obs, rewards, terminated, truncated, final_obs, has_final_obs)


@cuda.jit
def reset_kernel(mask, state, elapsed, needs_reset, episode, env_seed, reset_bounds):
    i = cuda.grid(1)
    if i < state.shape[1] and mask[i]:
        logic.reset_env(i, state, elapsed, needs_reset, episode, env_seed, reset_bounds)


def _grid(num_envs: int) -> int:
    return (num_envs + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK


def make_scratch(num_envs: int, dtype) -> None:
    """No scratch on CUDA: each thread keeps its cos/sin in registers."""
    return None


def step(buffers, outputs, actions, consts, reset_bounds, max_episode_steps: int,
         sutton_barto_reward: bool, autoreset_mode: int, scratch=None, stream=0) -> None:
    """Advance every env of ``buffers`` by one step on ``stream``, writing ``outputs`` (device arrays
    both); ``scratch`` is ``make_scratch``'s None."""
    n = buffers.state.shape[1]
    step_kernel[_grid(n), THREADS_PER_BLOCK, stream](
        *buffers, actions, consts, reset_bounds, max_episode_steps, sutton_barto_reward, autoreset_mode, *outputs)


def reset(buffers, mask, reset_bounds, stream=0) -> None:
    """Reset the envs where ``mask`` is True."""
    n = buffers.state.shape[1]
    reset_kernel[_grid(n), THREADS_PER_BLOCK, stream](mask, *buffers, reset_bounds)


def ptx_signatures() -> list[tuple]:
    """Every kernel of this module with the argument types the env launches it with (PTX check)."""
    from numba import types

    def array(dtype, ndim=1):
        return types.Array(dtype, ndim, "C")

    signatures = []
    for state_dtype in (types.float32, types.float64):
        buffers = (array(state_dtype, 2), array(types.int32), array(types.boolean),
                   array(types.uint64), array(types.uint64))
        outputs = (array(types.float32, 2), array(types.float32), array(types.boolean),
                   array(types.boolean), array(types.float32, 2), array(types.boolean))
        signatures.append((step_kernel.py_func, buffers + (
            array(types.int64), array(state_dtype), array(types.float64), types.int64,
            types.boolean, types.int64) + outputs))
        signatures.append((reset_kernel.py_func, (array(types.boolean),) + buffers + (array(types.float64),)))
    return signatures

"""CUDA drivers of the Tag kernels: one block per env, one thread per agent.

Importing this module needs numba-cuda (a GPU, or ``NUMBA_ENABLE_CUDASIM=1`` for the simulator).
Arguments are device arrays (``numba.cuda`` arrays or anything with ``__cuda_array_interface__``);
the kernels take the :class:`~gpu_envs.kernels.tag_buffers.TagBuffers` fields first, in order.

Each block keeps its env's agents (x, y, heading, speed, acceleration, in-game flag) in dynamic
shared memory, runs the four phases of ``tag_logic`` with ``cuda.syncthreads()`` between them
(threads loop over agents with a stride of the block size when N is larger than the block), and
writes the state back. Tagger credits and the count of runners left are atomic additions, so the
result does not depend on scheduling. The kNN scratch is one row per agent ([E, N, K]); each
thread streams its agent's distances (``knn_row`` is a placeholder column here).
"""

import numpy as np
from numba import cuda, float32, int32

from gpu_envs.kernels import cuda_targets  # noqa: F401  (registers the CUDA primitives)
from gpu_envs.kernels import tag_logic as logic
from gpu_envs.kernels.autoreset import NEXT_STEP, SAME_STEP

#: Most threads per block (agents beyond it are looped over).
MAX_THREADS_PER_BLOCK = 256
#: Shared memory a block may use without opting in, on every GPU since compute capability 3.0.
SHARED_MEMORY_BYTES = 48 * 1024
#: 4-byte shared slots per agent: x, y, heading, speed, acceleration, in-game flag.
_SLOTS_PER_AGENT = 6
#: Room left for the kernels' static shared memory (the runner count).
_STATIC_SHARED_BYTES = 64
MAX_AGENTS = (SHARED_MEMORY_BYTES - _STATIC_SHARED_BYTES) // (4 * _SLOTS_PER_AGENT)


def check_fits(num_agents: int) -> None:
    """Raise if an env of ``num_agents`` agents does not fit in one block's shared memory."""
    if num_agents > MAX_AGENTS:
        raise ValueError(
            f"Tag on CUDA keeps an env's agents in shared memory: at most {MAX_AGENTS} agents "
            f"(num_taggers + num_runners), got {num_agents}; use device='cpu' for larger games"
        )


def _shared_bytes(num_agents: int) -> int:
    return 4 * _SLOTS_PER_AGENT * num_agents


@cuda.jit(device=True)
def _shared_state(n):
    """The env's agent arrays, carved out of dynamic shared memory (float32 and int32 alias it)."""
    floats = cuda.shared.array(0, dtype=float32)
    ints = cuda.shared.array(0, dtype=int32)
    return (floats[0:n], floats[n:2 * n], floats[2 * n:3 * n], floats[3 * n:4 * n],
            floats[4 * n:5 * n], ints[5 * n:6 * n])


@cuda.jit(device=True)
def _load(e, a, x, y, heading, speed, acceleration, active, sx, sy, sh, ss, sa, sact):
    sx[a] = x[e, a]
    sy[a] = y[e, a]
    sh[a] = heading[e, a]
    ss[a] = speed[e, a]
    sa[a] = acceleration[e, a]
    sact[a] = 1 if active[e, a] else 0


@cuda.jit(device=True)
def _store(e, a, x, y, heading, speed, acceleration, active, sx, sy, sh, ss, sa, sact):
    x[e, a] = sx[a]
    y[e, a] = sy[a]
    heading[e, a] = sh[a]
    speed[e, a] = ss[a]
    acceleration[e, a] = sa[a]
    active[e, a] = sact[a] != 0


@cuda.jit(device=True)
def _observe(e, a, t, sx, sy, sh, ss, sa, sact, obs, knn_idx, knn_d2, knn_row, fc, ic):
    """Agent ``a``'s observation at time ``t`` (its neighbours from its own kNN scratch row)."""
    found = logic.select_neighbours(a, sx, sy, sact, knn_row[e], knn_idx[e, a], knn_d2[e, a],
                                    fc, ic)
    logic.observe_agent(a, sx, sy, sh, ss, sa, sact, t, obs[e, a], found, knn_idx[e, a], fc, ic)


@cuda.jit(device=True)
def _reset_block(e, x, y, heading, speed, acceleration, active, t, needs_reset, episode, env_seed,
                 obs, tag_count, knn_idx, knn_d2, knn_row, start, start_given, fc, ic,
                 sx, sy, sh, ss, sa, sact):
    """Reset env ``e`` (all threads of its block take part); ends with the state stored."""
    n = ic[logic.NUM_AGENTS]
    first = cuda.threadIdx.x
    stride = cuda.blockDim.x
    seed = env_seed[e]
    ep = episode[e]
    for a in range(first, n, stride):
        logic.reset_agent(a, seed, ep, sx, sy, sh, ss, sa, sact, start, start_given, fc)
        tag_count[e, a] = 0
        _store(e, a, x, y, heading, speed, acceleration, active, sx, sy, sh, ss, sa, sact)
    cuda.syncthreads()
    for a in range(first, n, stride):
        _observe(e, a, 0, sx, sy, sh, ss, sa, sact, obs, knn_idx, knn_d2, knn_row, fc, ic)
    if first == 0:
        episode[e] = ep + np.uint64(1)
        t[e] = 0
        needs_reset[e] = False


@cuda.jit
def step_kernel(x, y, heading, speed, acceleration, active, t, needs_reset, episode, env_seed,
                obs, rewards, terminated, truncated, final_obs, final_active, has_final_obs,
                tag_count, action_error, knn_idx, knn_d2, knn_row,
                actions, acc_table, turn_table, start, start_given, fc, ic, autoreset_mode):
    """One step of env ``blockIdx.x`` under ``autoreset_mode`` (see tag_cpu._step_env)."""
    e = cuda.blockIdx.x
    first = cuda.threadIdx.x
    stride = cuda.blockDim.x
    n = ic[logic.NUM_AGENTS]
    sx, sy, sh, ss, sa, sact = _shared_state(n)
    runners_left = cuda.shared.array(1, dtype=int32)
    if needs_reset[e]:  # the same for every thread of the block
        if autoreset_mode == NEXT_STEP:
            _reset_block(e, x, y, heading, speed, acceleration, active, t, needs_reset, episode,
                         env_seed, obs, tag_count, knn_idx, knn_d2, knn_row, start,
                         start_given, fc, ic, sx, sy, sh, ss, sa, sact)
            if first == 0:
                terminated[e] = False
        # DISABLED (a finished env that is stepped anyway): frozen, no reward, still terminated.
        for a in range(first, n, stride):
            rewards[e, a] = 0.0
        if first == 0:
            truncated[e] = False
        return
    t_new = t[e] + 1
    for a in range(first, n, stride):
        _load(e, a, x, y, heading, speed, acceleration, active, sx, sy, sh, ss, sa, sact)
        reward, bad = logic.move_agent(a, sx, sy, sh, ss, sa, sact, actions[e, a, 0],
                                       actions[e, a, 1], acc_table, turn_table, fc, ic)
        rewards[e, a] = reward
        tag_count[e, a] = 0
        if bad:
            action_error[e] = True
    if first == 0:
        runners_left[0] = 0
    cuda.syncthreads()
    for a in range(first, n, stride):
        _observe(e, a, t_new, sx, sy, sh, ss, sa, sact, obs, knn_idx, knn_d2, knn_row, fc, ic)
    cuda.syncthreads()
    for r in range(ic[logic.NUM_TAGGERS] + first, n, stride):
        if sact[r] != 0:
            tagger = logic.tagger_in_reach(r, sx, sy, fc, ic)
            if tagger >= 0:
                cuda.atomic.add(tag_count, (e, tagger), 1)
                logic.tag_runner(r, ss, sa, sact, rewards[e], tag_count[e], fc, ic)
            if sact[r] != 0:
                cuda.atomic.add(runners_left, 0, 1)
    cuda.syncthreads()
    at_end = t_new >= ic[logic.EPISODE_LENGTH]
    done = at_end or runners_left[0] == 0
    for a in range(first, n, stride):
        logic.finalize_reward(a, rewards[e], tag_count[e], sact, at_end, fc, ic)
        _store(e, a, x, y, heading, speed, acceleration, active, sx, sy, sh, ss, sa, sact)
        if autoreset_mode == SAME_STEP and done:
            for d in range(obs.shape[2]):
                final_obs[e, a, d] = obs[e, a, d]
            final_active[e, a] = sact[a] != 0
    if first == 0:
        t[e] = t_new
        terminated[e] = done
        truncated[e] = False
        needs_reset[e] = done
        if autoreset_mode == SAME_STEP:
            has_final_obs[e] = done
    if autoreset_mode == SAME_STEP and done:  # the same for every thread of the block
        cuda.syncthreads()
        _reset_block(e, x, y, heading, speed, acceleration, active, t, needs_reset, episode,
                     env_seed, obs, tag_count, knn_idx, knn_d2, knn_row, start, start_given,
                     fc, ic, sx, sy, sh, ss, sa, sact)


@cuda.jit
def reset_kernel(x, y, heading, speed, acceleration, active, t, needs_reset, episode, env_seed,
                 obs, rewards, terminated, truncated, final_obs, final_active, has_final_obs,
                 tag_count, action_error, knn_idx, knn_d2, knn_row,
                 mask, start, start_given, fc, ic):
    """Reset env ``blockIdx.x`` if ``mask`` says so."""
    e = cuda.blockIdx.x
    if not mask[e]:
        return
    sx, sy, sh, ss, sa, sact = _shared_state(ic[logic.NUM_AGENTS])
    _reset_block(e, x, y, heading, speed, acceleration, active, t, needs_reset, episode, env_seed,
                 obs, tag_count, knn_idx, knn_d2, knn_row, start, start_given, fc, ic,
                 sx, sy, sh, ss, sa, sact)


def _launch(kernel, buffers, stream, threads, *args) -> None:
    num_envs, num_agents = buffers.x.shape
    check_fits(num_agents)
    if threads is None:
        threads = min(MAX_THREADS_PER_BLOCK, 32 * ((num_agents + 31) // 32))
    kernel[num_envs, threads, stream, _shared_bytes(num_agents)](*buffers, *args)


def step(buffers, actions, acc_table, turn_table, start, start_given, fc, ic, autoreset_mode: int,
         stream=0, threads_per_block: int | None = None) -> None:
    """Advance every env of ``buffers`` (device arrays) by one step on ``stream``.

    ``threads_per_block`` (default: N rounded up to a warp, at most 256) below N makes each thread
    loop over several agents (the tests use it to exercise that path in the simulator).
    """
    _launch(step_kernel, buffers, stream, threads_per_block, actions, acc_table, turn_table, start,
            start_given, fc, ic, autoreset_mode)


def reset(buffers, mask, start, start_given, fc, ic, stream=0, threads_per_block: int | None = None) -> None:
    """Reset the envs where ``mask`` is True."""
    _launch(reset_kernel, buffers, stream, threads_per_block, mask, start, start_given, fc, ic)


def ptx_signatures() -> list:
    """``[(python_function, signature), ...]`` of every kernel, for ``cuda.compile_ptx``."""
    from numba import types

    f32_1d, f32_2d, f32_3d = types.float32[::1], types.float32[:, ::1], types.float32[:, :, ::1]
    b_1d, b_2d = types.boolean[::1], types.boolean[:, ::1]
    i32_1d, i32_2d, i32_3d = types.int32[::1], types.int32[:, ::1], types.int32[:, :, ::1]
    u64_1d = types.uint64[::1]
    buffers = (f32_2d, f32_2d, f32_2d, f32_2d, f32_2d, b_2d, i32_1d, b_1d, u64_1d, u64_1d,
               f32_3d, f32_2d, b_1d, b_1d, f32_3d, b_2d, b_1d, i32_2d, b_1d, i32_3d, f32_3d, f32_2d)
    consts = (f32_2d, b_1d, f32_1d, types.int64[::1])  # start, start_given, fc, ic
    step_sig = (*buffers, types.int64[:, :, ::1], f32_1d, f32_1d, *consts, types.int64)
    reset_sig = (*buffers, b_1d, *consts)
    return [(step_kernel.py_func, step_sig), (reset_kernel.py_func, reset_sig)]

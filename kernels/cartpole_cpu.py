"""CPU drivers of the CartPole kernels: njit loops over blocks of envs, serial or parallel by batch size.

Each block of envs takes five passes over the logic of ``cartpole_logic``: the cos/sin of every
pole angle (libm calls), the physics (branch-free arithmetic on the component-major state), the
bookkeeping (counters, rewards, flags), the float32 observations, then the rare autoresets. Split
this way, the physics and bookkeeping loops have no branch on the envs' data and LLVM vectorises
them, four envs at a time; the results are the same bits as one env at a time.
"""

import numba
import numpy as np

from gpu_envs.kernels import cartpole_logic as logic

#: Below this many envs one thread is faster than a parallel region (its launch costs microseconds,
#: and on a loaded machine it waits for a descheduled worker). With NUMBA_NUM_THREADS=1 the serial
#: driver is used at every size (read from numba's config: ``numba.get_num_threads()`` costs 2 µs a call).
PARALLEL_MIN_ENVS = 4096

#: Envs per block: a block's state, cos/sin and outputs stay in the L1/L2 cache across its passes.
BLOCK = 512

_JIT_OPTIONS = {"cache": True, "error_model": "numpy", "_nrt": False}
# _nrt=False: the loops allocate nothing, and without the runtime numba emits no reference counting
# for the arrays handed to the inlined per-env logic (measured: 2.5x less CPU time per env).
# error_model="numpy": no ZeroDivisionError branch on the divisions (no divisor can be 0).
# The serial and parallel drivers are separate functions on purpose: numba's cache key ignores the
# `parallel` option, so two compilations of one function would share one cache entry.


@numba.njit(inline="always", **_JIT_OPTIONS)
def _step_block(block, trig, state, elapsed, needs_reset, episode, env_seed, actions, consts, reset_bounds,
                max_episode_steps, sutton_barto_reward, autoreset_mode,
                obs, rewards, terminated, truncated, final_obs, has_final_obs):
    start = block * BLOCK
    stop = min(start + BLOCK, state.shape[1])
    for i in range(start, stop):
        trig[0, i], trig[1, i] = logic.pole_cos_sin(state[2, i])
    # The constants as values, so that LLVM can keep them in registers across the vectorised loop.
    values = (consts[0], consts[1], consts[2], consts[3], consts[4], consts[5], consts[6], consts[7],
              consts[8], consts[9])
    # One 1-D view per component over the block, indexed from 0: LLVM then proves the indices
    # non-negative and the views disjoint (a runtime check), and vectorises the loop.
    x, x_dot = state[0, start:stop], state[1, start:stop]
    theta, theta_dot = state[2, start:stop], state[3, start:stop]
    costheta, sintheta = trig[0, start:stop], trig[1, start:stop]
    block_actions, is_terminal = actions[start:stop], terminated[start:stop]
    for j in range(stop - start):
        # Envs about to be reset (NEXT_STEP) are advanced too: branch-free, and the reset overwrites them.
        x[j], x_dot[j], theta[j], theta_dot[j], is_terminal[j] = logic.physics(
            x[j], x_dot[j], theta[j], theta_dot[j], block_actions[j], costheta[j], sintheta[j], values)
    block_elapsed, block_needs_reset = elapsed[start:stop], needs_reset[start:stop]
    block_rewards, block_truncated = rewards[start:stop], truncated[start:stop]
    block_has_final_obs = has_final_obs[start:stop]  # a one-row placeholder unless SAME_STEP
    for j in range(stop - start):
        logic.record_step(j, is_terminal[j], block_elapsed, block_needs_reset, max_episode_steps,
                          sutton_barto_reward, autoreset_mode, block_rewards, is_terminal, block_truncated,
                          block_has_final_obs)
    block_state, block_obs = state[:, start:stop], obs[start:stop]
    for j in range(stop - start):
        logic.write_obs(j, block_state, block_obs)
    for i in range(start, stop):
        logic.complete_autoreset(i, state, elapsed, needs_reset, episode, env_seed, reset_bounds, autoreset_mode,
                                 obs, terminated, truncated, final_obs, has_final_obs)


@numba.njit(inline="always", **_JIT_OPTIONS)
def _any_invalid_action(actions):
    """Whether any action lies outside {0, 1}: one vectorised pass."""
    invalid = False
    for i in range(actions.shape[0]):
        invalid |= (actions[i] < 0) | (actions[i] > 1)
    return invalid


@numba.njit(**_JIT_OPTIONS)
def _step_serial(validate, trig, state, elapsed, needs_reset, episode, env_seed, actions, consts, reset_bounds,
                 max_episode_steps, sutton_barto_reward, autoreset_mode,
                 obs, rewards, terminated, truncated, final_obs, has_final_obs):
    if validate and _any_invalid_action(actions):
        return True
    for block in range((state.shape[1] + BLOCK - 1) // BLOCK):
        _step_block(block, trig, state, elapsed, needs_reset, episode, env_seed, actions, consts, reset_bounds,
                    max_episode_steps, sutton_barto_reward, autoreset_mode,
                    obs, rewards, terminated, truncated, final_obs, has_final_obs)
    return False


@numba.njit(parallel=True, **_JIT_OPTIONS)
def _step_parallel(validate, trig, state, elapsed, needs_reset, episode, env_seed, actions, consts, reset_bounds,
                   max_episode_steps, sutton_barto_reward, autoreset_mode,
                   obs, rewards, terminated, truncated, final_obs, has_final_obs):
    if validate and _any_invalid_action(actions):
        return True
    for block in numba.prange((state.shape[1] + BLOCK - 1) // BLOCK):
        _step_block(block, trig, state, elapsed, needs_reset, episode, env_seed, actions, consts, reset_bounds,
                    max_episode_steps, sutton_barto_reward, autoreset_mode,
                    obs, rewards, terminated, truncated, final_obs, has_final_obs)
    return False


@numba.njit(**_JIT_OPTIONS)
def _reset_serial(mask, state, elapsed, needs_reset, episode, env_seed, reset_bounds):
    for i in range(state.shape[1]):
        if mask[i]:
            logic.reset_env(i, state, elapsed, needs_reset, episode, env_seed, reset_bounds)


def make_scratch(num_envs: int, dtype) -> np.ndarray:
    """The step's scratch: cos and sin of every pole angle, [2, num_envs] of the state ``dtype``."""
    return np.zeros((2, num_envs), dtype)


def step(buffers, outputs, actions: np.ndarray, consts: np.ndarray, reset_bounds: np.ndarray,
         max_episode_steps: int, sutton_barto_reward: bool, autoreset_mode: int, scratch: np.ndarray,
         validate_actions: bool = False) -> bool:
    """Advance every env of ``buffers`` by one step, writing ``outputs`` (NumPy arrays both).

    With ``validate_actions`` the kernel first checks that every action is 0 or 1; if one is not,
    it steps nothing and returns True (the caller names the entry). Otherwise it returns False.
    """
    parallel = buffers.state.shape[1] >= PARALLEL_MIN_ENVS and numba.config.NUMBA_NUM_THREADS > 1
    kernel = _step_parallel if parallel else _step_serial
    return kernel(validate_actions, scratch, *buffers, actions, consts, reset_bounds, max_episode_steps,
                  sutton_barto_reward, autoreset_mode, *outputs)


def reset(buffers, mask: np.ndarray, reset_bounds: np.ndarray) -> None:
    """Reset the envs where ``mask`` is True."""
    _reset_serial(mask, *buffers, reset_bounds)

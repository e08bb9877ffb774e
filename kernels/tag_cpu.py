"""CPU drivers of the Tag kernels: njit loops over envs (parallel or serial by batch size).

Each env is advanced by one thread, its agents in turn through the four phases of
``tag_logic``; the kNN scratch is one set per env (``TagBuffers.knn_*`` of shape [E, 1, K] and the
distance row ``TagBuffers.knn_row`` [E, N]).
Arguments are a :class:`~gpu_envs.kernels.tag_buffers.TagBuffers` of NumPy arrays plus the
constants of ``tag_logic.make_consts``.
"""

import numba
import numpy as np
from numba.extending import register_jitable

from gpu_envs.kernels import tag_logic as logic
from gpu_envs.kernels.autoreset import NEXT_STEP, SAME_STEP

#: From this many envs on, the parallel driver is used (one Tag env-step is tens of microseconds,
#: so a parallel region pays for itself as soon as there are two envs to share).
PARALLEL_MIN_ENVS = 2


@register_jitable
def _observe_env(e, b, t, fc, ic):
    """Every agent's observation of env ``e`` at time ``t``."""
    x, y, heading, speed, acc, active = b.x[e], b.y[e], b.heading[e], b.speed[e], b.acceleration[e], b.active[e]
    knn_idx, knn_d2, d2_row = b.knn_idx[e, 0], b.knn_d2[e, 0], b.knn_row[e]
    for a in range(ic[logic.NUM_AGENTS]):
        found = logic.select_neighbours(a, x, y, active, d2_row, knn_idx, knn_d2, fc, ic)
        logic.observe_agent(a, x, y, heading, speed, acc, active, t, b.obs[e, a], found, knn_idx,
                            fc, ic)


@register_jitable
def _reset_env(e, b, start, start_given, fc, ic):
    n = ic[logic.NUM_AGENTS]
    x, y, heading, speed, acc, active = b.x[e], b.y[e], b.heading[e], b.speed[e], b.acceleration[e], b.active[e]
    for a in range(n):
        logic.reset_agent(a, b.env_seed[e], b.episode[e], x, y, heading, speed, acc, active,
                          start, start_given, fc)
        b.tag_count[e, a] = 0
    _observe_env(e, b, 0, fc, ic)
    b.episode[e] += np.uint64(1)
    b.t[e] = 0
    b.needs_reset[e] = False


@register_jitable
def _step_env(e, b, actions, acc_table, turn_table, start, start_given, fc, ic, autoreset_mode):
    n = ic[logic.NUM_AGENTS]
    rewards = b.rewards[e]
    if b.needs_reset[e]:
        if autoreset_mode == NEXT_STEP:
            _reset_env(e, b, start, start_given, fc, ic)
            b.terminated[e] = False
        # DISABLED (a finished env that is stepped anyway): frozen, no reward, still terminated.
        for a in range(n):
            rewards[a] = 0.0
        b.truncated[e] = False
        return
    x, y, heading, speed, acc, active = b.x[e], b.y[e], b.heading[e], b.speed[e], b.acceleration[e], b.active[e]
    tag_count = b.tag_count[e]
    t_new = b.t[e] + 1
    for a in range(n):
        reward, bad = logic.move_agent(a, x, y, heading, speed, acc, active, actions[e, a, 0],
                                       actions[e, a, 1], acc_table, turn_table, fc, ic)
        rewards[a] = reward
        tag_count[a] = 0
        if bad:
            b.action_error[e] = True
    _observe_env(e, b, t_new, fc, ic)
    runners_left = 0
    for r in range(ic[logic.NUM_TAGGERS], n):
        if active[r]:
            tagger = logic.tagger_in_reach(r, x, y, fc, ic)
            if tagger >= 0:
                tag_count[tagger] += 1
                logic.tag_runner(r, speed, acc, active, rewards, tag_count, fc, ic)
            if active[r]:
                runners_left += 1
    at_end = t_new >= ic[logic.EPISODE_LENGTH]
    for a in range(n):
        logic.finalize_reward(a, rewards, tag_count, active, at_end, fc, ic)
    done = at_end or runners_left == 0
    b.t[e] = t_new
    b.terminated[e] = done
    b.truncated[e] = False
    b.needs_reset[e] = done
    if autoreset_mode == SAME_STEP:
        b.has_final_obs[e] = done
        if done:
            obs, final_obs = b.obs[e], b.final_obs[e]
            for a in range(n):
                b.final_active[e, a] = active[a]
                for d in range(obs.shape[1]):
                    final_obs[a, d] = obs[a, d]
            _reset_env(e, b, start, start_given, fc, ic)


def _step_loop(b, actions, acc_table, turn_table, start, start_given, fc, ic, autoreset_mode):
    for e in numba.prange(b.x.shape[0]):
        _step_env(e, b, actions, acc_table, turn_table, start, start_given, fc, ic, autoreset_mode)


def _reset_loop(b, mask, start, start_given, fc, ic):
    for e in numba.prange(b.x.shape[0]):
        if mask[e]:
            _reset_env(e, b, start, start_given, fc, ic)


@numba.njit(cache=True, error_model="numpy")
def _draw_start(seed, start, fc):
    n = start.shape[1]
    given = np.zeros(3, dtype=np.bool_)
    x, y, heading = start[0], start[1], start[2]
    speed = np.zeros(n, dtype=np.float32)
    acc = np.zeros(n, dtype=np.float32)
    active = np.zeros(n, dtype=np.bool_)
    for a in range(n):
        logic.reset_agent(a, seed, np.uint64(0), x, y, heading, speed, acc, active, start, given, fc)


# Same source, two compilations: prange is a plain range in the serial ones. NumPy's error model:
# float division by a constant must not carry Python's ZeroDivisionError check (it blocks
# vectorisation and made the observation 15x slower); no divisor here can be 0. _nrt=False: the
# drivers allocate nothing (array copies are explicit loops), and without the runtime numba emits
# no reference counting for the row views handed to the inlined logic.
_JIT = {"cache": True, "error_model": "numpy", "_nrt": False}
_step_serial = numba.njit(**_JIT)(_step_loop)
_step_parallel = numba.njit(parallel=True, **_JIT)(_step_loop)
# Resets outside the step are rare (autoreset happens inside it): one serial compilation suffices.
_reset_serial = numba.njit(**_JIT)(_reset_loop)


def step(buffers, actions: np.ndarray, acc_table: np.ndarray, turn_table: np.ndarray,
         start: np.ndarray, start_given: np.ndarray, fc: np.ndarray, ic: np.ndarray,
         autoreset_mode: int) -> None:
    """Advance every env of ``buffers`` by one step; ``actions`` is int64 [E, N, 2]."""
    kernel = _step_parallel if buffers.x.shape[0] >= PARALLEL_MIN_ENVS else _step_serial
    kernel(buffers, actions, acc_table, turn_table, start, start_given, fc, ic, autoreset_mode)


def reset(buffers, mask: np.ndarray, start: np.ndarray, start_given: np.ndarray,
          fc: np.ndarray, ic: np.ndarray) -> None:
    """Reset the envs where ``mask`` is True (next episode of their RNG stream)."""
    _reset_serial(buffers, mask, start, start_given, fc, ic)


def draw_start_state(seed: int, num_agents: int, fc: np.ndarray) -> np.ndarray:
    """The start state [3, N] (x, y, heading) that stream ``seed`` draws for its first episode.

    ``reset_mode="fixed"`` draws it once and hands it to every env as ``start``.
    """
    start = np.zeros((3, num_agents), dtype=np.float32)
    _draw_start(np.uint64(seed), start, fc)
    return start


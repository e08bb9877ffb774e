"""CartPole-v1 step logic for one env, written once for every target.

The functions here are ``kernel_function``s (see ``targets``): the CPU driver (njit) and the CUDA kernel each compile
them for their own target, and the CUDA simulator runs them as Python. They follow gymnasium's
``CartPoleEnv`` operation by operation (see SPEC-cartpole.md), so a float64 trajectory equals
gymnasium's bit for bit. Physical constants come in the ``consts`` array, already in the state dtype,
so no untyped literal can change the precision of a target.
"""

import math

import numpy as np

from gpu_envs.kernels.autoreset import NEXT_STEP, SAME_STEP
from gpu_envs.kernels.rng import uniform01
from gpu_envs.kernels.targets import cast_like, kernel_function


# Layout of the ``consts`` array.
GRAVITY, MASSPOLE, TOTAL_MASS, LENGTH, POLEMASS_LENGTH, FORCE_MAG, TAU, X_THRESHOLD, \
    THETA_THRESHOLD, FOUR_THIRDS = range(10)
NUM_CONSTS = 10


def make_consts(dtype) -> np.ndarray:
    """The physical constants of CartPole-v1, computed as gymnasium computes them, in ``dtype``."""
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    values = [0.0] * NUM_CONSTS
    values[GRAVITY] = gravity
    values[MASSPOLE] = masspole
    values[TOTAL_MASS] = masspole + masscart
    values[LENGTH] = length
    values[POLEMASS_LENGTH] = masspole * length
    values[FORCE_MAG] = force_mag
    values[TAU] = tau
    values[X_THRESHOLD] = 2.4
    values[THETA_THRESHOLD] = 12 * 2 * math.pi / 360
    values[FOUR_THIRDS] = 4.0 / 3.0
    return np.array(values, dtype=dtype)


@kernel_function
def reset_env(i, state, elapsed, needs_reset, episode, env_seed, reset_bounds):
    """Draw env ``i``'s start state uniformly in [low, high)."""
    low = reset_bounds[0]
    high = reset_bounds[1]
    for k in range(4):
        state[i, k] = low + (high - low) * uniform01(env_seed[i], episode[i], k)
    episode[i] += np.uint64(1)
    elapsed[i] = 0
    needs_reset[i] = False


@kernel_function
def advance_physics(i, state, action, consts):
    """One Euler step of env ``i``; returns True when the new state is terminal."""
    x = state[i, 0]
    x_dot = state[i, 1]
    theta = state[i, 2]
    theta_dot = state[i, 3]
    if action == 1:
        force = consts[FORCE_MAG]
    else:
        force = -consts[FORCE_MAG]
    costheta = cast_like(math.cos(np.float64(theta)), theta)
    sintheta = cast_like(math.sin(np.float64(theta)), theta)
    # Same association as gymnasium (squares first, left to right): needed for bit-exactness.
    temp = (force + consts[POLEMASS_LENGTH] * (theta_dot * theta_dot) * sintheta) / consts[TOTAL_MASS]
    thetaacc = (consts[GRAVITY] * sintheta - costheta * temp) / (
        consts[LENGTH]
        * (consts[FOUR_THIRDS] - consts[MASSPOLE] * (costheta * costheta) / consts[TOTAL_MASS])
    )
    xacc = temp - consts[POLEMASS_LENGTH] * thetaacc * costheta / consts[TOTAL_MASS]
    x = x + consts[TAU] * x_dot
    x_dot = x_dot + consts[TAU] * xacc
    theta = theta + consts[TAU] * theta_dot
    theta_dot = theta_dot + consts[TAU] * thetaacc
    state[i, 0] = x
    state[i, 1] = x_dot
    state[i, 2] = theta
    state[i, 3] = theta_dot
    return (
        x < -consts[X_THRESHOLD]
        or x > consts[X_THRESHOLD]
        or theta < -consts[THETA_THRESHOLD]
        or theta > consts[THETA_THRESHOLD]
    )


@kernel_function
def write_obs(i, state, obs):
    """Env ``i``'s observation: its state in float32."""
    for k in range(4):
        obs[i, k] = state[i, k]


@kernel_function
def step_env(
    i, state, elapsed, needs_reset, episode, env_seed, actions, consts, reset_bounds,
    max_episode_steps, sutton_barto_reward, autoreset_mode,
    obs, rewards, terminated, truncated, final_obs, has_final_obs,
):
    """Advance env ``i`` by one step under ``autoreset_mode`` and write its outputs."""
    if autoreset_mode == NEXT_STEP and needs_reset[i]:
        reset_env(i, state, elapsed, needs_reset, episode, env_seed, reset_bounds)
        write_obs(i, state, obs)
        rewards[i] = 0.0
        terminated[i] = False
        truncated[i] = False
    else:
        is_terminal = advance_physics(i, state, actions[i], consts)
        elapsed[i] += 1
        is_truncated = max_episode_steps > 0 and elapsed[i] >= max_episode_steps
        if sutton_barto_reward:
            rewards[i] = -1.0 if is_terminal else 0.0
        else:
            rewards[i] = 1.0
        terminated[i] = is_terminal
        truncated[i] = is_truncated
        write_obs(i, state, obs)
        done = is_terminal or is_truncated
        needs_reset[i] = done
        if autoreset_mode == SAME_STEP:
            has_final_obs[i] = done
            if done:
                write_obs(i, state, final_obs)
                reset_env(i, state, elapsed, needs_reset, episode, env_seed, reset_bounds)
                write_obs(i, state, obs)

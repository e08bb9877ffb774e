"""CartPole-v1 step logic for one env, written once for every target.

The functions here are ``kernel_function``s (see ``targets``): the CPU driver (njit) and the CUDA kernel each compile
them for their own target, and the CUDA simulator runs them as Python. They follow gymnasium's
``CartPoleEnv`` operation by operation (see SPEC-cartpole.md), so a float64 trajectory equals
gymnasium's bit for bit. Physical constants come in the ``consts`` array (or a tuple of its values),
already in the state dtype, so no untyped literal can change the precision of a target.

The state is stored by component, ``state[k, i]`` (k = x, x_dot, theta, theta_dot; i = env): GPU
threads then read neighbouring addresses, and the CPU driver's physics pass vectorises.

One step of env ``i`` is: ``pole_cos_sin`` of its angle, ``physics`` (a pure function of the
state), ``record_step`` (counter, reward, flags; no branch on the env's data), ``write_obs`` and
``complete_autoreset`` (the resets, rare). The CUDA kernel runs them in one thread (``step_env``);
the CPU driver runs each as a pass over a block of envs.
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
        state[k, i] = low + (high - low) * uniform01(env_seed[i], episode[i], k)
    episode[i] += np.uint64(1)
    elapsed[i] = 0
    needs_reset[i] = False


@kernel_function
def pole_cos_sin(theta):
    """cos and sin of the pole angle in its dtype, computed in float64 like gymnasium's math.cos/sin."""
    return cast_like(math.cos(np.float64(theta)), theta), cast_like(math.sin(np.float64(theta)), theta)


@kernel_function
def physics(x, x_dot, theta, theta_dot, action, costheta, sintheta, consts):
    """One Euler step: the next (x, x_dot, theta, theta_dot) and whether that state is terminal."""
    if action == 1:
        force = consts[FORCE_MAG]
    else:
        force = -consts[FORCE_MAG]
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
    is_terminal = ((x < -consts[X_THRESHOLD]) | (x > consts[X_THRESHOLD])
                   | (theta < -consts[THETA_THRESHOLD]) | (theta > consts[THETA_THRESHOLD]))
    return x, x_dot, theta, theta_dot, is_terminal


@kernel_function
def advance_env(i, state, action, costheta, sintheta, consts):
    """Apply ``physics`` to env ``i``'s state in place; returns True when the new state is terminal."""
    x, x_dot, theta, theta_dot, is_terminal = physics(state[0, i], state[1, i], state[2, i], state[3, i],
                                                      action, costheta, sintheta, consts)
    state[0, i] = x
    state[1, i] = x_dot
    state[2, i] = theta
    state[3, i] = theta_dot
    return is_terminal


@kernel_function
def write_obs(i, state, obs):
    """Env ``i``'s observation: its state in float32."""
    for k in range(4):
        obs[i, k] = state[k, i]


@kernel_function
def record_step(
    i, is_terminal, elapsed, needs_reset, max_episode_steps, sutton_barto_reward, autoreset_mode,
    rewards, terminated, truncated, has_final_obs,
):
    """Counter, reward and flags of env ``i`` after its physics, without a branch on the env's data.

    An env that NEXT_STEP mode resets on this step (it finished on the previous one) gets reward 0
    and both flags False, and keeps ``needs_reset`` set for :func:`complete_autoreset`, which resets it.
    """
    resetting = (autoreset_mode == NEXT_STEP) & needs_reset[i]
    live = not resetting
    steps = elapsed[i] + 1
    elapsed[i] = steps
    is_terminal = live & is_terminal
    is_truncated = live & (max_episode_steps > 0) & (steps >= max_episode_steps)
    if sutton_barto_reward:
        rewards[i] = -1.0 if is_terminal else 0.0
    else:
        rewards[i] = 1.0 if live else 0.0
    terminated[i] = is_terminal
    truncated[i] = is_truncated
    done = is_terminal | is_truncated
    needs_reset[i] = done | resetting
    if autoreset_mode == SAME_STEP:
        has_final_obs[i] = done


@kernel_function
def complete_autoreset(
    i, state, elapsed, needs_reset, episode, env_seed, reset_bounds, autoreset_mode,
    obs, terminated, truncated, final_obs, has_final_obs,
):
    """The resets of env ``i``'s step, after :func:`record_step` and ``write_obs`` (rare, branching).

    NEXT_STEP: the env still marked ``needs_reset`` with both flags False is the one resetting now.
    SAME_STEP: an env whose episode ended keeps its last observation in ``final_obs`` and restarts.
    """
    if autoreset_mode == NEXT_STEP:
        if needs_reset[i] and not (terminated[i] or truncated[i]):
            reset_env(i, state, elapsed, needs_reset, episode, env_seed, reset_bounds)
            write_obs(i, state, obs)
    elif autoreset_mode == SAME_STEP:
        if has_final_obs[i]:
            write_obs(i, state, final_obs)
            reset_env(i, state, elapsed, needs_reset, episode, env_seed, reset_bounds)
            write_obs(i, state, obs)


@kernel_function
def step_env(
    i, state, elapsed, needs_reset, episode, env_seed, actions, consts, reset_bounds,
    max_episode_steps, sutton_barto_reward, autoreset_mode,
    obs, rewards, terminated, truncated, final_obs, has_final_obs,
):
    """Advance env ``i`` by one step under ``autoreset_mode`` and write its outputs (one GPU thread)."""
    is_terminal = False
    if not (autoreset_mode == NEXT_STEP and needs_reset[i]):
        costheta, sintheta = pole_cos_sin(state[2, i])
        is_terminal = advance_env(i, state, actions[i], costheta, sintheta, consts)
    record_step(i, is_terminal, elapsed, needs_reset, max_episode_steps, sutton_barto_reward, autoreset_mode,
                rewards, terminated, truncated, has_final_obs)
    write_obs(i, state, obs)
    complete_autoreset(i, state, elapsed, needs_reset, episode, env_seed, reset_bounds, autoreset_mode,
                       obs, terminated, truncated, final_obs, has_final_obs)

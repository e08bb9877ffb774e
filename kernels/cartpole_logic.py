"""CartPole-v1 step logic for one env, written once for every target.

The functions here are ``kernel_function``s (see ``targets``): the CPU driver (njit) and the CUDA
kernel each compile
them for their own target, and the CUDA simulator runs them as Python. They follow gymnasium's
``CartPoleEnv`` operation by operation (see SPEC-cartpole.md), so a float64 trajectory equals
gymnasium's bit for bit. Physical constants come in the ``consts`` array (or a tuple of its values),
already in the state dtype, so no untyped literal can change the precision of a target.

The state is stored by component, ``state[k, i]`` (k = x, x_dot, theta, theta_dot; i = env): GPU
threads then read neighbouring addresses, and the CPU driver's physics pass vectorises.

One step of env ``i`` is: ``pole_cos_sin`` of its angle, ``physics`` (a pure function of the
state), ``record_step`` (counter, reward, flags; no branch on the env's data), ``write_obs`` and
the rare resets that ``autoreset.autoreset_due`` asks for: :func:`step_envs` runs them as passes
over a block of envs, for both drivers (the CPU's blocks hold many envs, a CUDA thread's block
one).
"""

import math

import numpy as np

from gpu_envs.kernels.autoreset import autoreset_due, record_episode_step
from gpu_envs.kernels.rng import uniform01
from gpu_envs.kernels.targets import cast_like, kernel_function

# Layout of the ``consts`` array.
(
    GRAVITY,
    MASSPOLE,
    TOTAL_MASS,
    LENGTH,
    POLEMASS_LENGTH,
    FORCE_MAG,
    TAU,
    X_THRESHOLD,
    THETA_THRESHOLD,
    FOUR_THIRDS,
) = range(10)
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
    """cos and sin of the pole angle in its dtype, computed in float64 like gymnasium's
    math.cos/sin."""
    return cast_like(math.cos(np.float64(theta)), theta), cast_like(
        math.sin(np.float64(theta)), theta
    )


@kernel_function
def physics(x, x_dot, theta, theta_dot, action, costheta, sintheta, consts):
    """One Euler step: the next (x, x_dot, theta, theta_dot) and whether that state is terminal."""
    if action == 1:
        force = consts[FORCE_MAG]
    else:
        force = -consts[FORCE_MAG]
    # Same association as gymnasium (squares first, left to right): needed for bit-exactness.
    temp = (force + consts[POLEMASS_LENGTH] * (theta_dot * theta_dot) * sintheta) / consts[
        TOTAL_MASS
    ]
    thetaacc = (consts[GRAVITY] * sintheta - costheta * temp) / (
        consts[LENGTH]
        * (consts[FOUR_THIRDS] - consts[MASSPOLE] * (costheta * costheta) / consts[TOTAL_MASS])
    )
    xacc = temp - consts[POLEMASS_LENGTH] * thetaacc * costheta / consts[TOTAL_MASS]
    x = x + consts[TAU] * x_dot
    x_dot = x_dot + consts[TAU] * xacc
    theta = theta + consts[TAU] * theta_dot
    theta_dot = theta_dot + consts[TAU] * thetaacc
    is_terminal = (
        (x < -consts[X_THRESHOLD])
        | (x > consts[X_THRESHOLD])
        | (theta < -consts[THETA_THRESHOLD])
        | (theta > consts[THETA_THRESHOLD])
    )
    return x, x_dot, theta, theta_dot, is_terminal


@kernel_function
def write_obs(i, state, obs):
    """Env ``i``'s observation: its state in float32."""
    for k in range(4):
        obs[i, k] = state[k, i]


@kernel_function
def record_step(
    i,
    is_terminal,
    elapsed,
    needs_reset,
    max_episode_steps,
    sutton_barto_reward,
    autoreset_mode,
    rewards,
    terminated,
    truncated,
    has_final_obs,
):
    """Counter, flags (:func:`~gpu_envs.kernels.autoreset.record_episode_step`) and reward of env
    ``i`` after its physics, without a branch on the env's data."""
    live = record_episode_step(
        i,
        is_terminal,
        elapsed,
        needs_reset,
        max_episode_steps,
        autoreset_mode,
        terminated,
        truncated,
        has_final_obs,
    )
    if sutton_barto_reward:
        rewards[i] = -1.0 if live & is_terminal else 0.0
    else:
        rewards[i] = 1.0 if live else 0.0


@kernel_function
def step_envs(
    start,
    stop,
    trig,
    state,
    elapsed,
    needs_reset,
    episode,
    env_seed,
    obs,
    rewards,
    terminated,
    truncated,
    final_obs,
    has_final_obs,
    actions,
    consts,
    reset_bounds,
    max_episode_steps,
    sutton_barto_reward,
    autoreset_mode,
):
    """Advance envs ``start..stop-1`` by one step under ``autoreset_mode`` and write their outputs.

    Five passes over the block (a CUDA thread's block is its one env): the cos/sin of every pole
    angle into the ``trig`` scratch (libm calls), the physics (branch-free arithmetic on the
    component-major state), :func:`record_step`, :func:`write_obs`, then the rare resets
    (:func:`~gpu_envs.kernels.autoreset.autoreset_due`). Split this way, the physics and
    bookkeeping loops have no branch on the envs' data and a CPU vectorises them; the results are
    the same bits as one env at a time.
    """
    for i in range(start, stop):
        trig[0, i], trig[1, i] = pole_cos_sin(state[2, i])
    # The constants as values, so that they stay in registers across the vectorised loop.
    values = (
        consts[0],
        consts[1],
        consts[2],
        consts[3],
        consts[4],
        consts[5],
        consts[6],
        consts[7],
        consts[8],
        consts[9],
    )
    # One 1-D view per component over the block, indexed from 0: the compiler then proves the
    # indices non-negative and the views disjoint, and vectorises the loop.
    x, x_dot = state[0, start:stop], state[1, start:stop]
    theta, theta_dot = state[2, start:stop], state[3, start:stop]
    costheta, sintheta = trig[0, start:stop], trig[1, start:stop]
    block_actions, is_terminal = actions[start:stop], terminated[start:stop]
    for j in range(stop - start):
        # Envs about to be reset (NEXT_STEP) are advanced too: branch-free, and the reset overwrites
        # them.
        x[j], x_dot[j], theta[j], theta_dot[j], is_terminal[j] = physics(
            x[j],
            x_dot[j],
            theta[j],
            theta_dot[j],
            block_actions[j],
            costheta[j],
            sintheta[j],
            values,
        )
    block_elapsed, block_needs_reset = elapsed[start:stop], needs_reset[start:stop]
    block_rewards, block_truncated = rewards[start:stop], truncated[start:stop]
    block_has_final_obs = has_final_obs[start:stop]
    for j in range(stop - start):
        record_step(
            j,
            is_terminal[j],
            block_elapsed,
            block_needs_reset,
            max_episode_steps,
            sutton_barto_reward,
            autoreset_mode,
            block_rewards,
            is_terminal,
            block_truncated,
            block_has_final_obs,
        )
    block_state, block_obs = state[:, start:stop], obs[start:stop]
    for j in range(stop - start):
        write_obs(j, block_state, block_obs)
    for i in range(start, stop):
        if autoreset_due(
            i, autoreset_mode, needs_reset, terminated, truncated, has_final_obs, obs, final_obs
        ):
            reset_env(i, state, elapsed, needs_reset, episode, env_seed, reset_bounds)
            write_obs(i, state, obs)


@kernel_function
def reset_envs(
    start,
    stop,
    mask,
    trig,
    state,
    elapsed,
    needs_reset,
    episode,
    env_seed,
    obs,
    rewards,
    terminated,
    truncated,
    final_obs,
    has_final_obs,
    actions,
    consts,
    reset_bounds,
    max_episode_steps,
    sutton_barto_reward,
    autoreset_mode,
):
    """Start the next episode of the envs ``i`` in ``start..stop-1`` where ``mask[i]``."""
    for i in range(start, stop):
        if mask[i]:
            reset_env(i, state, elapsed, needs_reset, episode, env_seed, reset_bounds)
            write_obs(i, state, obs)

"""CartPole-v1 step logic for one env, written once for every target.

The functions here are ``kernel_function``s (see ``targets``): the CPU driver (njit) and the CUDA
kernel each compile them for their own target, and the CUDA simulator runs them as Python. They
follow gymnasium's ``CartPoleEnv`` operation by operation (docs/spec-cartpole.md, Dynamics), so a
float64 trajectory equals gymnasium's bit for bit. Physical constants come in the ``consts`` array
(or a tuple of its values), already in the state dtype, so no untyped literal can change the
precision of a target: a float32 env computes in float32 throughout, cos/sin included (``cosf`` /
``sinf``), a float64 env in float64.

The state is stored by component, ``state[k, i]`` (k = x, x_dot, theta, theta_dot; i = env): GPU
threads then read neighbouring addresses, and the CPU driver's physics pass vectorises.

One step of env ``i`` is: ``pole_cos_sin`` of its angle, ``physics`` (a pure function of the
state), ``record_step`` (counter, reward, flags; no branch on the env's data), ``write_obs`` and
the rare resets that ``autoreset.autoreset_due`` asks for: :func:`step_envs` runs them as passes
over a block of envs, for both drivers (the CPU's blocks hold many envs, a CUDA thread's block
one).
"""

import collections
import math

import numpy as np

from gpu_envs.kernels.autoreset import autoreset_due, count_episode, record_episode_step
from gpu_envs.kernels.rng import uniform01
from gpu_envs.kernels.rounding import mul_rn
from gpu_envs.kernels.targets import cos, kernel_function, sin

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
def pole_cos_sin(theta):
    """cos and sin of the pole angle in its dtype (float64: gymnasium's math.cos/sin)."""
    return cos(theta), sin(theta)


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
    # The threshold inputs x and theta are left to the compiler: a GPU may fuse ``x + tau * x_dot``
    # (no ``mul_rn``). Its x_dot and theta_dot already differ from the CPU's in the last bits
    # (libdevice's sin/cos, the fused products above), so an unfused update could not make the
    # threshold test exact; a termination that differs there is a near-tie of the device check.
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


#: The kernels' arguments (``envs``): the buffers of ``CartPoleVectorEnv.buffer_layout`` in order,
#: the actions, the constants (``consts``: ``make_consts``; ``reset_bounds``: the start-state
#: draw's ``[low, high]``) and the settings.
KernelArgs = collections.namedtuple(
    "KernelArgs",
    "trig state elapsed needs_reset episode env_seed obs rewards terminated truncated final_obs"
    " has_final_obs actions consts reset_bounds max_episode_steps sutton_barto_reward"
    " autoreset_mode",
)


@kernel_function
def step_envs(start, stop, envs):
    """Advance envs ``start..stop-1`` by one step under ``envs.autoreset_mode`` and write their
    outputs.

    Five passes over the block (a CUDA thread's block is its one env): the cos/sin of every pole
    angle into the ``trig`` scratch (libm calls), the physics (branch-free arithmetic on the
    component-major state), :func:`record_step`, :func:`write_obs`, then the rare resets
    (:func:`~gpu_envs.kernels.autoreset.autoreset_due`). Split this way, the physics and
    bookkeeping loops have no branch on the envs' data and a CPU vectorises them; the results are
    the same bits as one env at a time.
    """
    state, trig, consts = envs.state, envs.trig, envs.consts
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
    block_actions, is_terminal = envs.actions[start:stop], envs.terminated[start:stop]
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
    block_elapsed, block_needs_reset = envs.elapsed[start:stop], envs.needs_reset[start:stop]
    block_rewards, block_truncated = envs.rewards[start:stop], envs.truncated[start:stop]
    block_has_final_obs = envs.has_final_obs[start:stop]
    for j in range(stop - start):
        record_step(
            j,
            is_terminal[j],
            block_elapsed,
            block_needs_reset,
            envs.max_episode_steps,
            envs.sutton_barto_reward,
            envs.autoreset_mode,
            block_rewards,
            is_terminal,
            block_truncated,
            block_has_final_obs,
        )
    block_state, block_obs = state[:, start:stop], envs.obs[start:stop]
    for j in range(stop - start):
        write_obs(j, block_state, block_obs)
    for i in range(start, stop):
        if autoreset_due(i, envs):
            start_episode(i, envs)


@kernel_function
def start_episode(i, envs):
    """Env ``i``'s next episode: its start state drawn uniformly in ``[low, high)`` =
    ``envs.reset_bounds`` (one draw per component), and its observation.

    The draw is float64 (53 random bits, float64 bounds) rounded once to the state dtype: a float32
    env starts where the float64 env with the same seed does, and the product is a ``mul_rn`` so
    that a GPU starts from the same bits as the CPU.
    """
    low = envs.reset_bounds[0]
    high = envs.reset_bounds[1]
    for k in range(4):
        u = uniform01(envs.env_seed[i], envs.episode[i], k)
        envs.state[k, i] = low + mul_rn(high - low, u)
    count_episode(i, envs)
    write_obs(i, envs.state, envs.obs)


@kernel_function
def reset_envs(start, stop, mask, envs):
    """Start the next episode of the envs ``i`` in ``start..stop-1`` where ``mask[i]``."""
    for i in range(start, stop):
        if mask[i]:
            start_episode(i, envs)

"""Pendulum-v1 step logic for one env, written once for every target.

The functions are ``kernel_function``\\ s (see ``targets``): the CPU driver (njit) and the CUDA
kernel compile them for their own target, and the CUDA simulator runs them as Python. They follow
gymnasium's ``PendulumEnv.step`` operation by operation (docs/pendulum.md, Spaces and dynamics), so
a float64 state trajectory equals gymnasium's bit for bit; rewards may differ by one float32 ulp of
``u*u`` (gymnasium squares the torque with libm's ``powf``; docs/pendulum.md, What is bit-exact).

The state is stored by component, ``state[k, i]`` (k = theta, theta_dot; i = env). The torque is
float32 (the action space's dtype), and its products use typed float32 constants, as NumPy 2
computes ``0.001 * u**2`` and ``3.0 * u`` for a float32 ``u``. The other constants come in the
``consts`` array, already in the state dtype: a float32 env computes in float32 throughout (sin,
cos and fmod included), a float64 env as gymnasium. The angle is not wrapped in the state; only the
cost normalises it.
"""

import collections

import numpy as np

from gpu_envs.kernels.autoreset import autoreset_due, count_episode, record_env_step
from gpu_envs.kernels.rng import uniform01
from gpu_envs.kernels.rounding import mul_rn
from gpu_envs.kernels.targets import cast_like, cos, fmod, kernel_function, sin

# Layout of the ``consts`` array.
GRAVITY_TERM, DT, MAX_SPEED, SPEED_COST, PI, TWO_PI = range(6)
NUM_CONSTS = 6

# Torque arithmetic in float32, as NumPy 2 evaluates it for a float32 action.
_MAX_TORQUE = np.float32(2.0)
_TORQUE_COST = np.float32(0.001)
_TORQUE_GAIN = np.float32(3.0)  # 3.0 / (m * l**2) with m = l = 1


def make_consts(g: float, dtype) -> np.ndarray:
    """The constants of Pendulum-v1 with gravity ``g``, computed as gymnasium computes them, in
    ``dtype``."""
    length, dt, max_speed = 1.0, 0.05, 8
    values = [0.0] * NUM_CONSTS
    values[GRAVITY_TERM] = 3 * g / (2 * length)
    values[DT] = dt
    values[MAX_SPEED] = max_speed
    values[SPEED_COST] = 0.1
    values[PI] = np.pi
    values[TWO_PI] = 2 * np.pi
    return np.array(values, dtype=dtype)


@kernel_function
def normalized_angle(theta, pi, two_pi):
    """``((theta + pi) % two_pi) - pi`` with NumPy's remainder (its sign follows the modulus)."""
    shifted = theta + pi
    r = fmod(shifted, two_pi)
    zero = cast_like(0.0, r)
    if r != zero and (r < zero) != (two_pi < zero):
        r += two_pi
    return r - pi


@kernel_function
def physics(theta, theta_dot, torque, consts):
    """One step of gymnasium's pendulum: the next (theta, theta_dot) and the step's cost."""
    u = torque  # clipped like np.clip: NaN passes through
    if u < -_MAX_TORQUE:
        u = -_MAX_TORQUE
    elif u > _MAX_TORQUE:
        u = _MAX_TORQUE
    angle = normalized_angle(theta, consts[PI], consts[TWO_PI])
    cost = (angle * angle + consts[SPEED_COST] * (theta_dot * theta_dot)) + cast_like(
        _TORQUE_COST * (u * u), theta
    )
    sin_theta = sin(theta)
    theta_dot = (
        theta_dot
        + (consts[GRAVITY_TERM] * sin_theta + cast_like(_TORQUE_GAIN * u, theta)) * consts[DT]
    )
    if theta_dot < -consts[MAX_SPEED]:
        theta_dot = -consts[MAX_SPEED]
    elif theta_dot > consts[MAX_SPEED]:
        theta_dot = consts[MAX_SPEED]
    theta = theta + theta_dot * consts[DT]
    return theta, theta_dot, cost


@kernel_function
def write_obs(i, state, obs):
    """Env ``i``'s observation ``[cos(theta), sin(theta), theta_dot]`` in the state dtype, each
    rounded to float32 once."""
    theta = state[0, i]
    obs[i, 0] = cos(theta)
    obs[i, 1] = sin(theta)
    obs[i, 2] = state[1, i]


#: The kernels' arguments (``envs``): the buffers of ``PendulumVectorEnv.buffer_layout`` in order,
#: the actions, the constants (``consts``: ``make_consts``; ``reset_bounds``: the start-state
#: draw's ``[x_init, y_init]``) and the settings.
KernelArgs = collections.namedtuple(
    "KernelArgs",
    "state elapsed needs_reset episode env_seed obs rewards terminated truncated final_obs"
    " has_final_obs actions consts reset_bounds max_episode_steps autoreset_mode",
)


@kernel_function
def step_envs(start, stop, envs):
    """Advance envs ``start..stop-1`` by one step under ``envs.autoreset_mode`` and write their
    outputs.

    Envs about to be reset (NEXT_STEP) are advanced too (no branch on the env's data); the reset
    overwrites them.
    """
    state = envs.state
    for i in range(start, stop):
        state[0, i], state[1, i], cost = physics(
            state[0, i], state[1, i], envs.actions[i, 0], envs.consts
        )
        # Counter and flags (the pendulum never terminates); the reward is 0 on NEXT_STEP's
        # restart step.
        live = record_env_step(i, False, envs)
        envs.rewards[i] = -cost if live else cast_like(0.0, cost)
        write_obs(i, state, envs.obs)
        if autoreset_due(i, envs):
            start_episode(i, envs)


@kernel_function
def start_episode(i, envs):
    """Env ``i``'s next episode: its start state drawn uniformly in ``[-x_init, x_init] x
    [-y_init, y_init]`` (``envs.reset_bounds``), and its observation.

    The draw is float64 (53 random bits, float64 bounds) rounded once to the state dtype; the
    product is a ``mul_rn`` so that a GPU starts from the same bits as the CPU.
    """
    for k in range(2):
        high = envs.reset_bounds[k]
        u = uniform01(envs.env_seed[i], envs.episode[i], k)
        envs.state[k, i] = -high + mul_rn(high + high, u)
    count_episode(i, envs)
    write_obs(i, envs.state, envs.obs)


@kernel_function
def reset_envs(start, stop, mask, envs):
    """Start the next episode of the envs ``i`` in ``start..stop-1`` where ``mask[i]``."""
    for i in range(start, stop):
        if mask[i]:
            start_episode(i, envs)

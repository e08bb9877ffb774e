"""Acrobot-v1 step logic for one env, written once for every target.

The functions are ``kernel_function``\\ s (see ``targets``): the CPU driver (njit) and the CUDA
kernel compile them for their own target, and the CUDA simulator runs them as Python. They follow
gymnasium's ``AcrobotEnv.step`` (the "book" dynamics) operation by operation, so a float64 state
trajectory equals gymnasium's bit for bit:

- one rk4 step of ``dt = 0.2`` over the augmented state (the four state values and the torque), with
  gymnasium's association (``y + dt/6 * (((k1 + 2 k2) + 2 k3) + k4)``);
- every square of the equations of motion is ``x**2`` in gymnasium, libm's ``pow(x, 2.0)``, which is
  not always the correctly rounded ``x*x``; the logic calls ``pow`` with the exponent read from
  ``consts`` (a literal 2.0 would let the compiler turn it into ``x*x``);
- the angles are wrapped into [-pi, pi] by repeated subtraction of 2 pi, the speeds bounded.

The state is stored by component, ``state[k, i]`` (k = theta1, theta2, dtheta1, dtheta2; i = env);
the constants come in the ``consts`` array in the state dtype, precomputed as Python evaluates
gymnasium's constant subexpressions: a float32 env computes in float32 throughout (cos, sin and pow
included), a float64 env in float64. A start state is drawn in float64 and rounded to float32, as
gymnasium rounds its ``np_random.uniform(...)`` draw.
"""

import collections
import math

import numpy as np

from gpu_envs.kernels.autoreset import autoreset_due, count_episode, record_env_step
from gpu_envs.kernels.rng import uniform01
from gpu_envs.kernels.rounding import mul_rn
from gpu_envs.kernels.targets import cast_like, cos, kernel_function, power, sin

# Layout of the ``consts`` array: gymnasium's constant subexpressions, named by what they are.
(
    D1_BASE,  # m1 * lc1**2
    D1_SUM,  # l1**2 + lc2**2
    D1_COS,  # 2 * l1 * lc2
    M2,
    I1,
    I2,
    D2_BASE,  # lc2**2
    D2_COS,  # l1 * lc2
    PHI2_GAIN,  # m2 * lc2 * g
    PHI1_SQUARE,  # -m2 * l1 * lc2
    PHI1_CROSS,  # 2 * m2 * l1 * lc2
    PHI1_GRAVITY,  # (m1 * lc1 + m2 * l1) * g
    CENTRIFUGAL,  # m2 * l1 * lc2
    DENOMINATOR,  # m2 * lc2**2 + I2
    HALF_PI,
    PI,
    TWO_PI,
    DT,
    HALF_DT,
    SIXTH_DT,
    MAX_VEL_1,
    MAX_VEL_2,
    TWO,  # the exponent of gymnasium's squares (a runtime value: pow is not turned into x*x)
) = range(23)
NUM_CONSTS = 23
#: The torque of each action (gymnasium's ``AVAIL_TORQUE``).
TORQUES = (-1.0, 0.0, 1.0)


def make_consts(dtype) -> np.ndarray:
    """The constants of Acrobot-v1, computed as gymnasium computes them, in ``dtype``."""
    m1 = m2 = l1 = 1.0
    lc1 = lc2 = 0.5
    moi, g, dt, pi = 1.0, 9.8, 0.2, math.pi
    values = [0.0] * NUM_CONSTS
    values[D1_BASE] = m1 * lc1**2
    values[D1_SUM] = l1**2 + lc2**2
    values[D1_COS] = 2 * l1 * lc2
    values[M2] = m2
    values[I1] = values[I2] = moi
    values[D2_BASE] = lc2**2
    values[D2_COS] = l1 * lc2
    values[PHI2_GAIN] = m2 * lc2 * g
    values[PHI1_SQUARE] = -m2 * l1 * lc2
    values[PHI1_CROSS] = 2 * m2 * l1 * lc2
    values[PHI1_GRAVITY] = (m1 * lc1 + m2 * l1) * g
    values[CENTRIFUGAL] = m2 * l1 * lc2
    values[DENOMINATOR] = m2 * lc2**2 + moi
    values[HALF_PI] = pi / 2.0
    values[PI] = pi
    values[TWO_PI] = pi - -pi
    dt = dt - 0  # rk4's ``t[i + 1] - t[i]`` over ``[0, dt]``
    values[DT] = dt
    values[HALF_DT] = dt / 2.0
    values[SIXTH_DT] = dt / 6.0
    values[MAX_VEL_1] = 4 * pi
    values[MAX_VEL_2] = 9 * pi
    values[TWO] = 2.0
    return np.array(values, dtype=dtype)


@kernel_function
def _square(x, two):
    """gymnasium's ``x**2``: ``pow(x, two)`` in the precision of ``x`` (float64: libm's ``pow``)."""
    return power(x, two)


@kernel_function
def derivatives(theta1, theta2, dtheta1, dtheta2, torque, c):
    """gymnasium's ``_dsdt``: the time derivatives of (theta1, theta2, dtheta1, dtheta2)."""
    cos2, sin2 = cos(theta2), sin(theta2)
    d1 = ((c[D1_BASE] + c[M2] * (c[D1_SUM] + c[D1_COS] * cos2)) + c[I1]) + c[I2]
    d2 = c[M2] * (c[D2_BASE] + c[D2_COS] * cos2) + c[I2]
    phi2 = c[PHI2_GAIN] * cos((theta1 + theta2) - c[HALF_PI])
    phi1 = (
        (
            c[PHI1_SQUARE] * _square(dtheta2, c[TWO]) * sin2
            - c[PHI1_CROSS] * dtheta2 * dtheta1 * sin2
        )
        + c[PHI1_GRAVITY] * cos(theta1 - c[HALF_PI])
    ) + phi2
    ddtheta2 = ((torque + d2 / d1 * phi1) - c[CENTRIFUGAL] * _square(dtheta1, c[TWO]) * sin2) - phi2
    ddtheta2 = ddtheta2 / (c[DENOMINATOR] - _square(d2, c[TWO]) / d1)
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


@kernel_function(inline=False)  # inlined branches trip numba's IR scope check
def wrap(x, low, high, span):
    """gymnasium's ``wrap``: ``x`` moved into [low, high] by whole ``span``\\ s, one at a time.

    An infinite ``x`` becomes NaN (gymnasium's loop would never end)."""
    if math.isinf(x):
        return x - x
    while x > high:
        x = x - span
    while x < low:
        x = x + span
    return x


@kernel_function(inline=False)
def bound(x, limit):
    """gymnasium's ``bound``: Python's ``min(max(x, -limit), limit)`` (NaN passes through)."""
    lifted = -limit if -limit > x else x
    return limit if limit < lifted else lifted


@kernel_function
def physics(i, state, torque, c):
    """Env ``i``'s next state after one rk4 step with ``torque``; returns whether it is terminal."""
    y0, y1, y2, y3 = state[0, i], state[1, i], state[2, i], state[3, i]
    h, two = c[HALF_DT], c[TWO]
    a0, a1, a2, a3 = derivatives(y0, y1, y2, y3, torque, c)
    b0, b1, b2, b3 = derivatives(y0 + h * a0, y1 + h * a1, y2 + h * a2, y3 + h * a3, torque, c)
    e0, e1, e2, e3 = derivatives(y0 + h * b0, y1 + h * b1, y2 + h * b2, y3 + h * b3, torque, c)
    dt = c[DT]
    f0, f1, f2, f3 = derivatives(y0 + dt * e0, y1 + dt * e1, y2 + dt * e2, y3 + dt * e3, torque, c)
    sixth = c[SIXTH_DT]
    pi, two_pi = c[PI], c[TWO_PI]
    theta1 = wrap(y0 + sixth * (((a0 + two * b0) + two * e0) + f0), -pi, pi, two_pi)
    theta2 = wrap(y1 + sixth * (((a1 + two * b1) + two * e1) + f1), -pi, pi, two_pi)
    state[0, i] = theta1
    state[1, i] = theta2
    state[2, i] = bound(y2 + sixth * (((a2 + two * b2) + two * e2) + f2), c[MAX_VEL_1])
    state[3, i] = bound(y3 + sixth * (((a3 + two * b3) + two * e3) + f3), c[MAX_VEL_2])
    return -cos(theta1) - cos(theta2 + theta1) > cast_like(1.0, theta1)


@kernel_function
def write_obs(i, state, obs):
    """Env ``i``'s observation ``[cos t1, sin t1, cos t2, sin t2, dt1, dt2]`` in float32 (cos and
    sin in the state dtype)."""
    theta1, theta2 = state[0, i], state[1, i]
    obs[i, 0] = cos(theta1)
    obs[i, 1] = sin(theta1)
    obs[i, 2] = cos(theta2)
    obs[i, 3] = sin(theta2)
    obs[i, 4] = state[2, i]
    obs[i, 5] = state[3, i]


#: The kernels' arguments (``envs``): the buffers of ``AcrobotVectorEnv.buffer_layout`` in order,
#: the actions, the constants (``consts``: ``make_consts``; ``reset_bounds``: the start-state
#: draw's ``[low, high]``) and the settings.
KernelArgs = collections.namedtuple(
    "KernelArgs",
    "state elapsed needs_reset episode env_seed obs rewards terminated truncated final_obs"
    " has_final_obs actions consts reset_bounds max_episode_steps autoreset_mode",
)


@kernel_function
def step_envs(start, stop, envs):
    """Advance envs ``start..stop-1`` by one step under ``envs.autoreset_mode`` and write their
    outputs (envs NEXT_STEP resets now are advanced too; the reset overwrites them)."""
    state = envs.state
    for i in range(start, stop):
        torque = cast_like(envs.actions[i] - 1, state[0, i])  # -1.0, 0.0 or 1.0
        terminal = physics(i, state, torque, envs.consts)
        live = record_env_step(i, terminal, envs)
        envs.rewards[i] = -1.0 if live and not terminal else 0.0
        write_obs(i, state, envs.obs)
        if autoreset_due(i, envs):
            start_episode(i, envs)


@kernel_function
def start_episode(i, envs):
    """Env ``i``'s next episode: each state value uniform in ``[low, high)`` (``reset_bounds``),
    rounded to float32 as gymnasium's draw; and its observation."""
    low, high = envs.reset_bounds[0], envs.reset_bounds[1]
    for k in range(4):
        value = low + mul_rn(high - low, uniform01(envs.env_seed[i], envs.episode[i], k))
        envs.state[k, i] = np.float32(value)
    count_episode(i, envs)
    write_obs(i, envs.state, envs.obs)


@kernel_function
def reset_envs(start, stop, mask, envs):
    """Start the next episode of the envs ``i`` in ``start..stop-1`` where ``mask[i]``."""
    for i in range(start, stop):
        if mask[i]:
            start_episode(i, envs)

"""MountainCar-v0 and MountainCarContinuous-v0 step logic for one env, written once for every
target.

The functions are ``kernel_function``\\ s (see ``targets``). Both games share the car's motion after
the velocity update (:func:`move_car`: the speed limit, the track's ends, the goal); they differ in
the velocity update and the reward. They follow gymnasium's ``MountainCarEnv.step`` and
``Continuous_MountainCarEnv.step`` operation by operation, so a float64 trajectory equals
gymnasium's bit for bit:

- MountainCar-v0 computes in float64 throughout (gymnasium keeps the state as Python/NumPy
  float64).
- MountainCarContinuous-v0 stores its state as float32 after every step, and NumPy 2 computes with
  the float32 values (a Python constant is rounded to float32 first, NEP 50); only the first step of
  an episode starts from gymnasium's float64 draw and computes in float64. The logic therefore
  steps in the state's own precision on an episode's first step and in float32 after it, and rounds
  the stored state to float32. ``math.cos`` is evaluated in float64, on ``3 * position`` rounded to
  the precision of the step; a force outside [-1, 1] is clipped to a Python float, so the velocity
  update is then a float64 sum (as in gymnasium).

That is a float64 env (the state dtype float64). A float32 env computes every step of both games in
float32, ``cos`` and the reward included. The state is stored by component, ``state[k, i]`` (k =
position, velocity; i = env). The constants come in the float64 ``consts`` array and are rounded to
the step's (or the env's) precision where they are used (``cast_like``).
"""

import collections
from types import SimpleNamespace

import numpy as np

from gpu_envs.kernels.autoreset import autoreset_due, count_episode, record_env_step
from gpu_envs.kernels.rng import uniform01
from gpu_envs.kernels.rounding import mul_rn
from gpu_envs.kernels.targets import cast_like, cos, kernel_function

# Layout of the ``consts`` array (float64).
MIN_POSITION, MAX_POSITION, MAX_SPEED, GOAL_POSITION, GOAL_VELOCITY, FORCE, GRAVITY = range(7)
NUM_CONSTS = 7

_POWER = np.float32(0.0015)  # the continuous car's force * power, in float32 as NumPy 2 does it
_MIN_ACTION, _MAX_ACTION = np.float32(-1.0), np.float32(1.0)


def make_consts(continuous: bool, goal_velocity: float) -> np.ndarray:
    """The constants of MountainCar-v0 (or the continuous variant) in float64."""
    values = [0.0] * NUM_CONSTS
    values[MIN_POSITION] = -1.2
    values[MAX_POSITION] = 0.6
    values[MAX_SPEED] = 0.07
    values[GOAL_POSITION] = 0.45 if continuous else 0.5
    values[GOAL_VELOCITY] = goal_velocity
    values[FORCE] = 0.0015 if continuous else 0.001
    values[GRAVITY] = 0.0025
    return np.array(values, dtype=np.float64)


@kernel_function
def move_car(position, velocity, c):
    """The car after its velocity update: speed limit, one step of motion, the track's ends (the
    left end stops it); returns ``(position, velocity, reached_goal)`` in the precision of
    ``position``."""
    max_speed = cast_like(c[MAX_SPEED], velocity)
    if velocity > max_speed:
        velocity = max_speed
    if velocity < -max_speed:
        velocity = -max_speed
    position = position + velocity
    min_position = cast_like(c[MIN_POSITION], position)
    max_position = cast_like(c[MAX_POSITION], position)
    if position > max_position:
        position = max_position
    if position < min_position:
        position = min_position
    zero = cast_like(0.0, velocity)
    if position == min_position and velocity < zero:
        velocity = zero
    goal = position >= cast_like(c[GOAL_POSITION], position) and velocity >= cast_like(
        c[GOAL_VELOCITY], velocity
    )
    return position, velocity, goal


@kernel_function
def slope_term(position, like, c):
    """``gravity * cos(3 * position)`` in the env's precision (the type of ``like``: float64 as
    gymnasium's ``math.cos``), ``3 * position`` in the precision of ``position``."""
    angle = cast_like(cast_like(3.0, position) * position, like)
    return cast_like(c[GRAVITY], like) * cos(angle)


@kernel_function
def discrete_physics(i, state, action, c):
    """MountainCar-v0: push left (0), nothing (1) or right (2); returns whether the goal is
    reached."""
    position, velocity = state[0, i], state[1, i]
    push = cast_like(action - 1, velocity) * cast_like(c[FORCE], velocity)
    velocity = velocity + (push - slope_term(position, velocity, c))
    state[0, i], state[1, i], goal = move_car(position, velocity, c)
    return goal


@kernel_function
def continuous_velocity(position, velocity, force, like, c):
    """The continuous car's velocity update in the precision of ``position``, the slope and a
    clipped force's product in the env's (``like``; see the module)."""
    if force < _MIN_ACTION or force > _MAX_ACTION:  # clipped to a Python float: a float64 sum
        clipped = cast_like(1.0 if force > _MAX_ACTION else -1.0, like)
        push = clipped * cast_like(c[FORCE], like)
        return velocity + cast_like(push - slope_term(position, like, c), velocity)
    accel = force * _POWER - np.float32(slope_term(position, like, c))
    return velocity + cast_like(accel, velocity)


@kernel_function
def continuous_move(position, velocity, force, like, c):
    """One step of the continuous car from a state of the step's precision."""
    return move_car(position, continuous_velocity(position, velocity, force, like, c), c)


@kernel_function
def continuous_physics(i, state, elapsed, force, c):
    """MountainCarContinuous-v0's step of env ``i`` (float64 on an episode's first step, float32
    after it), the state stored rounded to float32; returns whether the goal is reached."""
    like = state[0, i]
    if elapsed[i] == 0:
        position, velocity, goal = continuous_move(state[0, i], state[1, i], force, like, c)
    else:
        position, velocity, goal = continuous_move(
            np.float32(state[0, i]), np.float32(state[1, i]), force, like, c
        )
    state[0, i] = np.float32(position)
    state[1, i] = np.float32(velocity)
    return goal


@kernel_function
def write_obs(i, state, obs):
    """Env ``i``'s observation ``[position, velocity]`` in float32."""
    obs[i, 0] = state[0, i]
    obs[i, 1] = state[1, i]


#: The kernels' arguments (``envs``) of both games: the buffers of the env's ``buffer_layout`` in
#: order, the actions, the constants (``consts``: ``make_consts``; ``reset_bounds``: the start
#: position's ``[low, high]``) and the settings.
KernelArgs = collections.namedtuple(
    "KernelArgs",
    "state elapsed needs_reset episode env_seed obs rewards terminated truncated final_obs"
    " has_final_obs actions consts reset_bounds max_episode_steps autoreset_mode",
)


@kernel_function
def finish_step(i, goal, reward, envs):
    """Env ``i``'s counter, flags, reward (0 on NEXT_STEP's restart step), observation and
    autoreset after its physics."""
    live = record_env_step(i, goal, envs)
    envs.rewards[i] = reward if live else 0.0
    write_obs(i, envs.state, envs.obs)
    if autoreset_due(i, envs):
        start_episode(i, envs)


@kernel_function
def step_discrete_envs(start, stop, envs):
    """Advance MountainCar-v0 envs ``start..stop-1`` by one step (reward -1 per step)."""
    for i in range(start, stop):
        goal = discrete_physics(i, envs.state, envs.actions[i], envs.consts)
        finish_step(i, goal, -1.0, envs)


@kernel_function
def step_continuous_envs(start, stop, envs):
    """Advance MountainCarContinuous-v0 envs ``start..stop-1`` by one step (reward 100 at the
    goal, minus 0.1 * force**2 every step, in float64 with the unclipped force)."""
    for i in range(start, stop):
        force = envs.actions[i, 0]
        goal = continuous_physics(i, envs.state, envs.elapsed, force, envs.consts)
        like = envs.rewards[i]
        # float64: exact, pow(force, 2) of a float32 in gymnasium
        square = cast_like(force, like) * cast_like(force, like)
        reward = cast_like(100.0 if goal else 0.0, like) - square * cast_like(0.1, like)
        finish_step(i, goal, reward, envs)


@kernel_function
def start_episode(i, envs):
    """Env ``i``'s next episode: position uniform in ``[low, high)`` (``reset_bounds``), velocity
    0; and its observation."""
    low, high = envs.reset_bounds[0], envs.reset_bounds[1]
    envs.state[0, i] = low + mul_rn(high - low, uniform01(envs.env_seed[i], envs.episode[i], 0))
    envs.state[1, i] = 0.0
    count_episode(i, envs)
    write_obs(i, envs.state, envs.obs)


@kernel_function
def reset_envs(start, stop, mask, envs):
    """Start the next episode of the envs ``i`` in ``start..stop-1`` where ``mask[i]``."""
    for i in range(start, stop):
        if mask[i]:
            start_episode(i, envs)


#: The two games' logic as the engine reads it (``step_envs``, ``reset_envs``, ``KernelArgs``).
DISCRETE = SimpleNamespace(
    step_envs=step_discrete_envs, reset_envs=reset_envs, KernelArgs=KernelArgs
)
CONTINUOUS = SimpleNamespace(
    step_envs=step_continuous_envs, reset_envs=reset_envs, KernelArgs=KernelArgs
)

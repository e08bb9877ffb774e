"""A float32 env does its math in float32, trigonometry included; a float64 env in float64.

Read from the LLVM IR that numba compiles for the CPU: the per-env physics of each classic game,
specialised for a float32 state, holds no float64 operation at all (a constant rounded from the
float64 ``consts`` is allowed: ``fptrunc``), and the whole step that the CPU driver compiles calls
no float64 math function. The CUDA kernels are typed by the same logic and primitives
(``targets.cos_typing``, ...), so they compile the same float32 operations to libdevice.
"""

import re

import numba
import numpy as np
import pytest
import torch

from gpu_envs.games import GAMES, load
from gpu_envs.kernels import (
    acrobot_logic,
    cartpole_logic,
    mountain_car_logic,
    pendulum_logic,
    rounding,
    targets,
)

#: A float64 operation in LLVM IR: arithmetic, comparison, widening, conversion to double, an
#: intrinsic on doubles, or a libm call on doubles.
FLOAT64_OPERATION = re.compile(
    r"\b(?:fadd|fsub|fmul|fdiv|frem|fneg|fcmp \w+)(?: \w+)* double\b"
    r"|\bfpext\b|\b[su]itofp\b.* to double\b|@llvm\.\w+\.f64\b"
    r"|\bcall\b.*@(?:cos|sin|tan|pow|sqrt|fmod|exp|log)\("
)
#: A call of a float64 math function (llvm intrinsic or libm), or a float64 remainder.
FLOAT64_MATH_CALL = re.compile(
    r"@llvm\.(?:cos|sin|pow|sqrt|exp|log)\.f64\b|\bcall\b.*@(?:cos|sin|pow|fmod)\(|\bfrem double\b"
)


def float64_lines(ir: str, pattern: re.Pattern) -> list[str]:
    return [line.strip() for line in ir.splitlines() if pattern.search(line)]


def compiled_ir(function, *args) -> str:
    dispatcher = numba.njit(error_model="numpy")(function)
    dispatcher.compile(tuple(numba.typeof(arg) for arg in args))
    return dispatcher.inspect_llvm(dispatcher.signatures[0])


# The per-env physics of each game (no reset: its start-state draw is float64 by design).
def cartpole_physics(i, state, actions, consts, out):
    cos_t, sin_t = cartpole_logic.pole_cos_sin(state[2, i])
    x, x_dot, theta, theta_dot, terminal = cartpole_logic.physics(
        state[0, i], state[1, i], state[2, i], state[3, i], actions[i], cos_t, sin_t, consts
    )
    out[0], out[1], out[2], out[3] = x, x_dot, theta, theta_dot
    return terminal


def pendulum_physics(i, state, actions, consts, obs):
    state[0, i], state[1, i], cost = pendulum_logic.physics(
        state[0, i], state[1, i], actions[i, 0], consts
    )
    pendulum_logic.write_obs(i, state, obs)
    obs[i, 2] = cost


def acrobot_physics(i, state, actions, consts, obs):
    torque = targets.cast_like(actions[i] - 1, state[0, i])
    terminal = acrobot_logic.physics(i, state, torque, consts)
    acrobot_logic.write_obs(i, state, obs)
    return terminal


def mountain_car_physics(i, state, actions, consts, obs):
    return mountain_car_logic.discrete_physics(i, state, actions[i], consts)


def continuous_car_physics(i, state, actions, consts, elapsed):
    return mountain_car_logic.continuous_physics(i, state, elapsed, actions[i, 0], consts)


def physics_case(dtype):
    """``(name, physics, args)`` of every classic game with a state of ``dtype``."""
    state = np.zeros((4, 2), dtype)
    obs = np.zeros((2, 6), np.float32)
    discrete, continuous = np.zeros(2, np.int64), np.zeros((2, 1), np.float32)
    elapsed = np.zeros(2, np.int32)
    car = mountain_car_logic.make_consts
    cases = [
        ("cartpole", cartpole_physics, (discrete, cartpole_logic.make_consts(dtype), obs)),
        ("pendulum", pendulum_physics, (continuous, pendulum_logic.make_consts(10, dtype), obs)),
        ("acrobot", acrobot_physics, (discrete, acrobot_logic.make_consts(dtype), obs)),
        ("mountaincar", mountain_car_physics, (discrete, car(False, 0.0), obs)),
        ("mountaincar continuous", continuous_car_physics, (continuous, car(True, 0.0), elapsed)),
    ]
    return [(name, physics, (0, state, *args)) for name, physics, args in cases]


@pytest.mark.parametrize("name, physics, args", physics_case(np.float32))
def test_float32_physics_holds_no_float64_operation(name, physics, args):
    lines = float64_lines(compiled_ir(physics, *args), FLOAT64_OPERATION)
    assert not lines, f"{name}: float64 operations in the float32 physics: {lines[:5]}"


@pytest.mark.parametrize("name, physics, args", physics_case(np.float64))
def test_the_float64_physics_is_float64(name, physics, args):
    """The pattern finds float64 math where there is some (the float64 envs, gymnasium's)."""
    assert float64_lines(compiled_ir(physics, *args), FLOAT64_OPERATION)


def classic_game_classes() -> list[type]:
    classes = [load(record.trainer_env or record.vector_env) for record in GAMES.values()]
    return [cls for cls in classes if cls.__name__ != "TagEnv" and hasattr(cls, "state_size")]


@pytest.mark.parametrize("env_class", classic_game_classes(), ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_whole_step_calls_float64_math_only_in_a_float64_env(env_class, dtype):
    env = env_class(2, dtype=dtype)
    args = env.logic.KernelArgs(*env.kernel_args)
    lines = float64_lines(compiled_ir(env.logic.step_envs, 0, 2, args), FLOAT64_MATH_CALL)
    if dtype == torch.float32:
        assert not lines, f"float64 math in the float32 step: {lines[:5]}"
    elif env_class.__name__ != "MountainCarVectorEnv":  # cos: the float64 step's math
        assert lines


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math_primitives_keep_the_precision_of_their_arguments(dtype):
    @numba.njit
    def on_cpu(x, y):
        return (
            targets.cos(x),
            targets.sin(x),
            targets.sqrt(x),
            targets.power(x, y),
            targets.fmod(x, y),
        )

    rng = np.random.default_rng(0)
    for value in rng.uniform(0.0, 100.0, 50).astype(dtype):
        two = dtype(2.0)
        expected = on_cpu(value, two)
        # the simulator's Python: the CPU's results, bit for bit, in the arguments' type
        simulated = (
            targets.cos(value),
            targets.sin(value),
            targets.sqrt(value),
            targets.power(value, two),
            targets.fmod(value, two),
        )
        for got, want in zip(simulated, expected):
            assert type(got) is dtype and got == dtype(want)
    assert on_cpu.nopython_signatures[0].return_type.dtype == numba.from_dtype(np.dtype(dtype))


def test_float32_cos_is_not_float64_cos_rounded():
    """The float32 trigonometry is libm's cosf, not the float64 cos rounded (they differ in the
    last bit somewhere in a large sample), so the IR tests above could fail."""
    values = np.random.default_rng(1).uniform(-100.0, 100.0, 20000).astype(np.float32)
    float32_cos = np.array([targets.cos(v) for v in values])
    rounded = np.cos(values.astype(np.float64)).astype(np.float32)
    assert float32_cos.dtype == np.float32 and (float32_cos != rounded).any()


def test_mixed_precision_math_is_refused():
    @numba.njit
    def mixed(x, y):
        return targets.fmod(x, y) + rounding.mul_rn(x, y)

    with pytest.raises(numba.core.errors.TypingError):
        mixed(np.float32(1.0), 2.0)

"""Property tests of the rsl_rl, skrl and rl_games adapters: any batch of actions (any shape,
dtype and values: out of range, NaN, infinite, bool, complex, not a tensor) gives either a valid
step or an error naming the problem, never a silent step on garbage."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

N = 3
GAMES = {"cartpole": "gpu_envs/CartPole-v1", "pendulum": "gpu_envs/Pendulum-v1"}
DTYPES = [
    torch.int64,
    torch.int32,
    torch.uint8,
    torch.int8,
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bool,
    torch.complex64,
]
SHAPES = [(N,), (N, 1), (N, 2), (N + 1,), (N, 1, 1), (), (1, N), (N, 3)]
VALUES = [0, 1, 2, -1, 7, 255, 0.5, -2.5, 3.7, 1e30, float("nan"), float("inf"), -float("inf")]


def _rsl_rl(env_id: str):
    pytest.importorskip("rsl_rl")
    from gpu_envs.adapters.rsl_rl import make_rsl_rl_env

    env = make_rsl_rl_env(env_id, num_envs=N, seed=0)

    def step(actions):
        obs, rewards, dones, extras = env.step(actions)
        return obs["policy"], rewards, dones

    return env, step


def _skrl(env_id: str):
    pytest.importorskip("skrl")
    from gpu_envs.adapters.skrl import make_skrl_env

    env = make_skrl_env(env_id, num_envs=N, seed=0)
    env.reset()

    def step(actions):
        obs, rewards, terminated, truncated, _ = env.step(actions)
        return obs, rewards.squeeze(-1), (terminated | truncated).squeeze(-1)

    return env, step


def _rl_games(env_id: str):
    pytest.importorskip("rl_games")
    from gpu_envs.adapters.rl_games import RlGamesVecEnv
    from gpu_envs.adapters.same_step import same_step_vec_env

    env = RlGamesVecEnv(same_step_vec_env(env_id, N, "cpu"))
    env.seed(0)
    env.reset()

    def step(actions):
        obs, rewards, dones, _ = env.step(actions)
        return obs, rewards, dones

    return env, step


ADAPTERS: dict[str, Callable] = {"rsl_rl": _rsl_rl, "skrl": _skrl, "rl_games": _rl_games}
_BUILT: dict[tuple[str, str], tuple] = {}


def built(adapter: str, game: str):
    """One adapter env per (adapter, game), stepped on by every example."""
    key = (adapter, game)
    if key not in _BUILT:
        _BUILT[key] = ADAPTERS[adapter](GAMES[game])
    return _BUILT[key]


@st.composite
def action_batches(draw):
    """A tensor of a drawn shape and dtype filled with drawn values (cast as torch casts), or the
    same values as a NumPy array or a list."""
    plausible = draw(st.booleans())  # half the batches look like a policy's: mostly valid steps
    shape = draw(st.sampled_from(SHAPES[:3] if plausible else SHAPES))
    dtype = draw(st.sampled_from(DTYPES[:6] if plausible else DTYPES))
    size = int(np.prod(shape, dtype=np.int64))
    values = draw(
        st.lists(st.sampled_from(VALUES[:2] if plausible else VALUES), min_size=size, max_size=size)
    )
    with np.errstate(all="ignore"):
        array = np.array(values, dtype=np.float64).reshape(shape)
    if dtype.is_floating_point or dtype.is_complex:
        tensor = torch.as_tensor(array).to(dtype)
    elif dtype == torch.bool:
        tensor = torch.as_tensor(np.nan_to_num(array) != 0)
    else:  # integers: the values as int32 numbers, cast (wrapped) to the dtype by torch
        finite = np.clip(np.nan_to_num(array, nan=0.0, posinf=0.0, neginf=0.0), -(2**31), 2**31 - 1)
        tensor = torch.as_tensor(finite.astype(np.int64)).to(dtype)
    container = draw(st.sampled_from(["tensor", "tensor", "tensor", "numpy", "list"]))
    if container == "numpy":
        return tensor.numpy()
    if container == "list":
        return tensor.tolist()
    return tensor


def expected_error(adapter: str, game: str, actions) -> tuple[type, str] | None:
    """The error (type, message pattern) ``actions`` must raise, or None for a valid step."""
    if not isinstance(actions, torch.Tensor):
        return TypeError, "expected a torch tensor"
    discrete = game == "cartpole"
    numel = actions.numel()
    if discrete:
        if adapter == "rsl_rl" and actions.dim() == 2 and actions.shape == (N, 2):
            is_binary = bool(((actions == 0) | (actions == 1)).all())
            if actions.is_complex() or not (is_binary and bool((actions.sum(1) == 1).all())):
                return ValueError, "not one-hot rows"
            return None
        if numel != N:
            return ValueError, "shape"
        if actions.is_floating_point() or actions.is_complex() or actions.dtype == torch.bool:
            return TypeError, "for a Discrete space"
        if not bool(((actions >= 0) & (actions <= 1)).all()):
            return ValueError, "out of range"
        return None
    if numel != N:
        return ValueError, "shape"
    if actions.is_complex() or actions.dtype == torch.bool:
        return TypeError, "for a Box space"
    if bool(torch.isnan(actions.to(torch.float32)).any()):
        return ValueError, "must be finite"
    return None


@pytest.mark.parametrize("game", sorted(GAMES))
@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(actions=action_batches())
def test_any_action_batch_steps_validly_or_names_the_problem(adapter, game, actions):
    env, step = built(adapter, game)
    error = expected_error(adapter, game, actions)
    if error is not None:
        kind, pattern = error
        with pytest.raises(kind, match=re.compile(pattern)):
            step(actions)
        return
    obs, rewards, dones = step(actions)
    event("valid step")
    assert obs.shape[0] == rewards.shape[0] == dones.shape[0] == N
    assert torch.isfinite(obs).all() and torch.isfinite(rewards).all()
    assert dones.dtype == torch.bool
    if game == "pendulum":  # the torque is clipped to [-2, 2]: a reward no worse than gymnasium's
        assert bool((rewards >= -(np.pi**2 + 0.1 * 8**2 + 0.001 * 2**2) - 1e-4).all())

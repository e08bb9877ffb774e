"""Property test: any ``options`` given to ``reset`` either resets to finite states or raises a
``TypeError``/``ValueError`` that names the option (no NaN, no crash, no other exception)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_envs.games.cartpole import CartPoleVectorEnv
from gpu_envs.games.mountain_car import MountainCarVectorEnv
from gpu_envs.games.pendulum import PendulumVectorEnv

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.lists(st.floats(-1, 1), max_size=2),
)
ENVS = {
    "cartpole": (CartPoleVectorEnv, ("low", "high")),
    "pendulum": (PendulumVectorEnv, ("x_init", "y_init")),
    "mountaincar": (MountainCarVectorEnv, ("low", "high")),
}


@pytest.mark.parametrize("game", sorted(ENVS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@settings(max_examples=60)
@given(data=st.data())
def test_reset_options_give_finite_states_or_a_named_error(game, dtype, data):
    make, names = ENVS[game]
    keys = st.sampled_from([*names, "other"])
    options = data.draw(
        st.one_of(st.dictionaries(keys, VALUES, max_size=2), VALUES), label="options"
    )
    env = make(3, dtype=dtype)
    try:
        env.reset(seed=0, options=options)
    except (TypeError, ValueError) as error:
        message = str(error)
        assert "options" in message or "option" in message, message
        return
    assert torch.isfinite(env.state).all(), (options, env.state)

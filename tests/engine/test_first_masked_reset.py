"""A first reset with ``options["reset_mask"]`` starts only the masked envs, as gymnasium's vector
envs reset only the masked sub-envs: the others never step from an all-zero state; ``step`` names
them until resets have started every env, which then hold the start states a full first reset
with the same seed gives."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_envs.games.cartpole import CartPoleVectorEnv
from gpu_envs.games.pendulum import PendulumVectorEnv


def test_envs_outside_a_first_masked_reset_do_not_step_until_they_are_reset():
    env, full = CartPoleVectorEnv(4), CartPoleVectorEnv(4)
    mask = torch.tensor([True, False, True, False])
    obs, _ = env.reset(seed=3, options={"reset_mask": mask})
    assert not obs[mask].eq(0).all() and obs[~mask].eq(0).all()
    actions = torch.ones(4, dtype=torch.int64)
    with pytest.raises(RuntimeError, match=r"2 env\(s\) were never reset \(envs 1, 3\)"):
        env.step(actions)
    env.reset(options={"reset_mask": torch.tensor([False, True, False, False])})
    with pytest.raises(RuntimeError, match=r"envs 3\)"):
        env.step(actions)
    env.reset(options={"reset_mask": torch.tensor([False, False, False, True])})
    full.reset(seed=3)
    assert torch.equal(env.state, full.state)
    for got, want in zip(env.step(actions)[:4], full.step(actions)[:4]):
        assert torch.equal(got, want)
    other = PendulumVectorEnv(3)
    other.reset(seed=1, options={"reset_mask": torch.tensor([False, True, False])})
    with pytest.raises(RuntimeError, match=r"envs 0, 2\)"):
        other.step(torch.zeros(3, 1))
    other.reset()  # a full reset starts every env
    other.step(torch.zeros(3, 1))


@settings(max_examples=40)
@given(masks=st.lists(st.lists(st.booleans(), min_size=5, max_size=5), min_size=1, max_size=4))
def test_step_runs_exactly_when_every_env_was_started(masks):
    env = CartPoleVectorEnv(5)
    started = torch.zeros(5, dtype=torch.bool)
    for number, mask in enumerate(masks):
        mask = torch.tensor(mask)
        if not mask.any():
            continue
        env.reset(seed=number, options={"reset_mask": mask})
        started |= mask
    if not started.all():
        never = ", ".join(map(str, (~started).nonzero().flatten().tolist()))
        message = rf"never reset \(envs {never}\)" if started.any() else r"call reset\(\) before"
        with pytest.raises(RuntimeError, match=message):
            env.step(torch.zeros(5, dtype=torch.int64))
        return
    env.step(torch.zeros(5, dtype=torch.int64))
    assert not (env.state == 0).all(dim=1).any(), "an env stepped from an all-zero state"

"""``load_buffers_state`` restores an env's buffers without writing into the outputs a caller holds
from the last step or reset (the default ``copy_outputs=True``), and the restored env steps on as
the saved one did."""

import numpy as np
import pytest
import torch

from gpu_envs.games.cartpole import CartPoleVectorEnv
from gpu_envs.games.pendulum import PendulumVectorEnv
from gpu_envs.games.tag.env import TagEnv

MAKERS = {
    "cartpole": lambda: CartPoleVectorEnv(4),
    "pendulum": lambda: PendulumVectorEnv(4),
    "tag": lambda: TagEnv(2, num_taggers=1, num_runners=2),
}


def actions(env, seed: int) -> torch.Tensor:
    """Random valid actions of one step: a value of the single action space per env (per agent)."""
    shape, _ = env.action_layout()
    space = env.single_action_space
    space.seed(seed)
    draws = [
        space.sample()
        for _ in range(int(torch.Size(shape[: len(shape) - len(space.shape)]).numel()))
    ]
    return torch.as_tensor(np.array(draws)).reshape(shape)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_outputs_held_from_the_last_step_and_reset_are_not_written(name):
    env = MAKERS[name]()
    env.reset(seed=0)
    env.step(actions(env, 0))
    saved = env.buffers_state()
    held_reset = env.reset(seed=1)[0]
    held_step = env.step(actions(env, 1))[:4]
    before = [t.clone() for t in (held_reset, *held_step)]
    env.load_buffers_state(saved)
    for tensor, copy in zip((held_reset, *held_step), before):
        assert torch.equal(tensor, copy)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_restored_env_steps_on_as_the_saved_one(name):
    env, twin = MAKERS[name](), MAKERS[name]()
    env.reset(seed=0)
    for k in range(3):
        env.step(actions(env, k))
    saved = env.buffers_state()
    twin.reset(seed=5)
    twin.step(actions(twin, 9))
    twin.load_buffers_state(saved)
    assert all(torch.equal(saved[n], t) for n, t in twin.buffers_state().items())
    for k in range(3, 8):
        for got, want in zip(twin.step(actions(twin, k))[:4], env.step(actions(env, k))[:4]):
            assert torch.equal(got, want)

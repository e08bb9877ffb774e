"""What the engine gives every game: copies that step on like the original, and use after
close()."""

import copy
import pickle

import cloudpickle
import pytest
import torch

from gpu_envs.games.cartpole import CartPoleVectorEnv
from gpu_envs.games.pendulum import PendulumVectorEnv
from gpu_envs.games.tag.env import TagEnv

GAMES = {
    "cartpole": (
        lambda: CartPoleVectorEnv(6, max_episode_steps=30, autoreset_mode="same_step"),
        lambda g: torch.randint(0, 2, (6,), generator=g),
    ),
    "pendulum": (
        lambda: PendulumVectorEnv(6, max_episode_steps=30),
        lambda g: torch.rand((6, 1), generator=g) * 4 - 2,
    ),
    "tag": (
        lambda: TagEnv(
            3,
            num_runners=4,
            episode_length=12,
            use_full_observation=False,
            num_other_agents_observed=2,
        ),
        lambda g: torch.randint(0, 11, (3, 5, 2), generator=g),
    ),
}
COPIES = {
    "pickle": lambda env: pickle.loads(pickle.dumps(env)),
    "cloudpickle": lambda env: cloudpickle.loads(cloudpickle.dumps(env)),
    "deepcopy": copy.deepcopy,
}


@pytest.mark.parametrize("how", COPIES)
@pytest.mark.parametrize("game", GAMES)
def test_a_copy_steps_on_exactly_like_the_original(game, how):
    make, actions = GAMES[game]
    env = make()
    env.reset(seed=3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(7):  # mid-episode state, RNG counters and outputs
        env.step(actions(generator))
    clone = COPIES[how](env)
    assert all(
        torch.equal(a, b)
        for a, b in zip(env.state_snapshot().values(), clone.state_snapshot().values())
    )
    for _ in range(100):
        step = actions(generator)
        for a, b in zip(env.step(step)[:4], clone.step(step)[:4]):
            assert torch.equal(a, b)
    assert torch.equal(env.state_snapshot()["episode"], clone.state_snapshot()["episode"])
    assert (
        int(env.state_snapshot()["episode"].max()) >= 2
    )  # the copies also went through autoresets
    env.step(actions(generator))  # and they are independent: stepping one leaves the other
    assert not all(
        torch.equal(a, b)
        for a, b in zip(env.state_snapshot().values(), clone.state_snapshot().values())
    )


@pytest.mark.parametrize("game", GAMES)
def test_a_closed_env_says_so(game):
    make, actions = GAMES[game]
    env = make()
    env.reset(seed=0)
    env.close()
    for call in (
        lambda: env.step(actions(torch.Generator())),
        lambda: env.reset(),
        env.state_snapshot,
    ):
        with pytest.raises(RuntimeError, match="is closed"):
            call()
    assert pickle.loads(pickle.dumps(env))._closed


def test_torchrl_step_without_an_action_names_the_entry():
    pytest.importorskip("torchrl")
    from gpu_envs.adapters.torchrl import CartPoleTorchRLEnv

    env = CartPoleTorchRLEnv(2)
    with pytest.raises(KeyError, match="no 'action' entry"):
        env.step(env.reset())


def test_buffers_larger_than_free_memory_are_refused_before_allocating(monkeypatch):
    from gpu_envs.engine import devices

    monkeypatch.setattr(devices, "available_cpu_memory", lambda: 2**20)  # 1 MiB left
    with pytest.raises(ValueError, match=r"GiB of buffers on cpu, but only 0.00 GiB are free"):
        TagEnv(
            64,
            num_runners=100,
            num_taggers=5,
            use_full_observation=False,
            num_other_agents_observed=10,
        )
    CartPoleVectorEnv(64)  # a few KiB: fits


def test_a_first_partial_reset_seeds_every_env():
    import torch

    from gpu_envs.games.cartpole import CartPoleVectorEnv

    env = CartPoleVectorEnv(6)
    mask = torch.tensor([True, False, False, False, False, False])
    env.reset(seed=3, options={"reset_mask": mask})
    env.reset(options={"reset_mask": ~mask})
    starts = env.state.T if env.state.shape[0] != 6 else env.state
    assert len({tuple(row.tolist()) for row in starts}) == 6, "two envs share a start state"
    full = CartPoleVectorEnv(6)
    full.reset(seed=3)
    assert torch.equal(env.state, full.state)


def test_host_memory_left_is_bounded_by_the_cgroup_limit(monkeypatch, tmp_path):
    from gpu_envs.engine import devices

    limit, usage = tmp_path / "memory.max", tmp_path / "memory.current"
    limit.write_text(f"{3 * 2**20}\n")
    usage.write_text(f"{2**20}\n")
    monkeypatch.setattr(devices, "_CGROUP_FILES", ((str(limit), str(usage)),))
    assert devices.available_cpu_memory() == 2 * 2**20
    limit.write_text("max\n")
    import psutil

    assert devices.available_cpu_memory() <= psutil.virtual_memory().available

"""Bad use of the torch-tensor adapters (rsl_rl, skrl, rl_games; gpu_envs.adapters.same_step'
``SameStepCore`` under each): every refusal names the library and the fix, the same for all three.
Each adapter's case is skipped where its library is not installed."""

from __future__ import annotations

import importlib

import gymnasium as gym
import pytest
import torch

from tests.helpers.torch_vec_training import GymnasiumTorch

#: library -> (the adapter's module, its class).
ADAPTERS = {
    "rsl_rl": ("gpu_envs.adapters.rsl_rl", "RslRlVecEnv"),
    "skrl": ("gpu_envs.adapters.skrl", "SkrlVecEnv"),
    "rl_games": ("gpu_envs.adapters.rl_games", "RlGamesVecEnv"),
}


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request):
    """``(library, adapter class)``; skipped when the library is not installed."""
    library = request.param
    pytest.importorskip(library)
    module, name = ADAPTERS[library]
    return library, getattr(importlib.import_module(module), name)


def cartpole(mode: str = "same_step"):
    return gym.make_vec("gpu_envs/CartPole-v1", num_envs=2, autoreset_mode=mode)


@pytest.mark.parametrize("mode", ["next_step", "disabled"])
def test_wrong_autoreset_mode_is_refused(adapter, mode):
    library, adapter_class = adapter
    with pytest.raises(ValueError, match=f"{library} expects .*SAME_STEP"):
        adapter_class(cartpole(mode))


def test_multi_agent_env_is_refused(adapter):
    _, adapter_class = adapter
    tag = gym.make_vec("gpu_envs/Tag-v0", num_envs=2, autoreset_mode="same_step")
    with pytest.raises(ValueError, match="single-agent envs"):
        adapter_class(tag)


def test_device_mismatch_is_refused(adapter):
    library, adapter_class = adapter
    env = cartpole()
    with pytest.raises(ValueError, match=f"{library} was asked for device 'cuda'"):
        adapter_class(env, device="cuda")
    wrapped = adapter_class(env)
    with pytest.raises(ValueError, match=f"{library} handed actions on meta"):
        wrapped.step(torch.zeros(2, dtype=torch.long, device="meta"))
    with pytest.raises(TypeError, match=f"{library} handed the env list actions; expected a torch"):
        wrapped.step([0, 1])


def test_non_engine_env_needs_a_device(adapter):
    library, adapter_class = adapter
    with pytest.raises(ValueError, match=f"the {library} adapter .* pass device="):
        adapter_class(GymnasiumTorch("CartPole-v1", 2))

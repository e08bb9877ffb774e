"""Bad input gets a clear exception naming the problem."""

import numpy as np
import pytest
import torch

import gpu_envs


@pytest.fixture
def env():
    env = gpu_envs.CartPoleVectorEnv(4)
    env.reset(seed=0)
    return env


@pytest.mark.parametrize(
    "actions, error, message",
    [
        (torch.tensor([0, 1, 2, 0]), ValueError, r"actions\[2\] = 2 is out of range"),
        (torch.tensor([0, -1, 0, 0]), ValueError, r"actions\[1\] = -1 is out of range"),
        (np.array([0, 1, 0, 3]), ValueError, r"actions\[3\] = 3 is out of range"),
        (torch.tensor([0, 1, 0, 0, 9, 9, 9, 0])[::2], ValueError, r"actions\[2\] = 9 is out of"),
        (np.array([0, 1, 0]), ValueError, r"shape \(4,\)"),
        (torch.zeros((4, 1), dtype=torch.int64), ValueError, "shape"),
        (torch.tensor([0.0, 1.0, 0.0, 1.0]), TypeError, "integer dtype"),
        (np.array([0.0, np.nan, 0.0, 1.0]), TypeError, "NaN"),
        (torch.tensor([True, False, True, False]), TypeError, "integer dtype"),
        (["a", "b", "c", "d"], TypeError, "integer dtype|integer array"),
    ],
)
def test_bad_actions(env, actions, error, message):
    with pytest.raises(error, match=message):
        env.step(actions)


def _readonly(array):
    array.flags.writeable = False
    return array


def test_every_form_of_the_same_actions_steps_the_same():
    """int64 tensors and arrays (read as they are), strided views, other integer dtypes, read-only
    arrays and lists (converted) are the same actions."""
    actions = np.random.default_rng(0).integers(0, 2, (20, 6))
    forms = [
        torch.from_numpy,
        lambda a: a.copy(),
        lambda a: torch.from_numpy(np.repeat(a, 2))[::2],
        lambda a: torch.from_numpy(a.astype(np.int32)),
        lambda a: _readonly(a.copy()),
        lambda a: a.tolist(),
    ]
    outputs = []
    for form in forms:
        env = gpu_envs.CartPoleVectorEnv(6)
        env.reset(seed=3)
        outputs.append([env.step(form(row))[0] for row in actions])
    for other in outputs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(outputs[0], other))


@pytest.mark.parametrize("num_envs", [5, 4096])  # the serial and the parallel CPU driver
def test_a_bad_action_steps_no_env(num_envs):
    env = gpu_envs.CartPoleVectorEnv(num_envs)
    env.reset(seed=0)
    before = env.state.clone()
    actions = torch.ones(num_envs, dtype=torch.int64)
    actions[num_envs - 2] = 3
    with pytest.raises(
        ValueError, match=rf"actions\[{num_envs - 2}\] = 3 is out of range: allowed 0..1"
    ):
        env.step(actions)
    assert torch.equal(env.state, before)
    env.step(torch.ones(num_envs, dtype=torch.int64))  # the env still works
    assert not torch.equal(env.state, before)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_envs": 0}, "num_envs"),
        ({"num_envs": -3}, "num_envs"),
        ({"num_envs": 2.5}, "num_envs"),
        ({"num_envs": 2, "device": "tpu"}, "device"),
        ({"num_envs": 2, "device": "banana"}, "device"),
        ({"num_envs": 2, "autoreset_mode": "sometimes"}, "autoreset_mode"),
        ({"num_envs": 2, "dtype": "int8"}, "dtype"),
        ({"num_envs": 2, "render_mode": "human"}, "render_mode"),
        ({"num_envs": 2, "max_episode_steps": -1}, "max_episode_steps"),
    ],
)
def test_bad_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gpu_envs.CartPoleVectorEnv(**kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_gpu_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        gpu_envs.CartPoleVectorEnv(2, device="cuda")
    assert gpu_envs.CartPoleVectorEnv(2, device="auto").device.type == "cpu"


@pytest.mark.parametrize(
    "mask, error, message",
    [
        (np.ones(3, dtype=bool), ValueError, r"reset_mask.*shape \(4,\)"),
        (np.ones(4, dtype=np.int64), TypeError, "reset_mask.*boolean"),
    ],
)
def test_bad_reset_mask(env, mask, error, message):
    with pytest.raises(error, match=message):
        env.reset(options={"reset_mask": mask})


def test_bad_reset_options_and_seed(env):
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"lo": 0.1})
    with pytest.raises(ValueError, match=r"options\[.low.\] must be <= options\[.high.\]"):
        env.reset(options={"low": 0.2, "high": 0.1})
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=-1)
    with pytest.raises(ValueError, match="seed sequence"):
        env.reset(seed=[1, 2])


def test_step_before_reset_and_bad_state():
    env = gpu_envs.CartPoleVectorEnv(2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"state must have shape \(2, 4\)"):
        env.state = torch.zeros(3, 4)


def test_single_env_rejects_bad_action():
    env = gpu_envs.CartPoleEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action must be 0 or 1"):
        env.step(2)

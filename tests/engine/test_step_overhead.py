"""The CPU step's host path: the common action input reaches the step loop as it is (a tensor as its
address), the loop range-checks it before any env moves, and every input gives the same bits."""

import warnings

import numpy as np
import pytest
import torch

import gpu_envs
from gpu_envs.engine.validation import ActionCheck, as_tensor


def _env(num_envs: int, **kwargs) -> gpu_envs.CartPoleVectorEnv:
    env = gpu_envs.CartPoleVectorEnv(num_envs, max_episode_steps=40, **kwargs)
    env.reset(seed=3)
    return env


def _actions(num_envs: int, steps: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [torch.randint(0, 2, (num_envs,), generator=generator) for _ in range(steps)]


def test_the_common_cpu_step_makes_no_numpy_view_and_no_host_range_check(monkeypatch):
    env = _env(256)
    env.copy_outputs = False
    actions = _actions(256, 3)
    env.step(actions[0])  # compiles the loop
    calls = {"numpy": 0, "kernel_array": 0}
    numpy, kernel_array = torch.Tensor.numpy, ActionCheck.kernel_array

    def counted_numpy(self, *args, **kwargs):
        calls["numpy"] += 1
        return numpy(self, *args, **kwargs)

    def counted_kernel_array(self, *args, **kwargs):
        calls["kernel_array"] += 1
        return kernel_array(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "numpy", counted_numpy)
    monkeypatch.setattr(ActionCheck, "kernel_array", counted_kernel_array)
    first = env.step(actions[1])
    second = env.step(actions[2])
    assert calls == {"numpy": 0, "kernel_array": 0}
    # copy_outputs=False: the env's own buffers, the same tensors every step
    assert all(a is b for a, b in zip(first[:4], second[:4]))
    assert first[4] == {} and first[4] is not second[4]


@pytest.mark.parametrize("num_envs", [256, 4096])  # the serial and (2+ threads) parallel loop
@pytest.mark.parametrize("kind", ["tensor", "numpy"])
@pytest.mark.parametrize("value", [-1, 2])
def test_an_out_of_range_action_raises_before_any_env_moves(num_envs, kind, value):
    env, reference = _env(num_envs), _env(num_envs)
    actions = _actions(num_envs, 2)
    env.step(actions[0])
    reference.step(actions[0])
    bad = actions[1].clone()
    bad[num_envs - 7] = value
    before = env.state_snapshot()
    with pytest.raises(ValueError, match=rf"actions\[{num_envs - 7}\] = {value} is out of range"):
        env.step(bad if kind == "tensor" else bad.numpy())
    after = env.state_snapshot()
    assert all(torch.equal(before[name], after[name]) for name in before)
    # the env steps on as if the bad call never happened
    for got, expected in zip(env.step(actions[1])[:4], reference.step(actions[1])[:4]):
        assert torch.equal(got, expected)


def test_without_validation_the_loop_does_not_check():
    env = _env(16, validate_actions=False)
    env.step(torch.full((16,), 5, dtype=torch.int64))  # the kernel reads it (pushes left)


INPUTS = {
    "int64 tensor (its address)": lambda a: a,
    "int64 NumPy array": lambda a: a.numpy().copy(),
    "read-only NumPy array": lambda a: _read_only(a.numpy().copy()),
    "int32 tensor": lambda a: a.to(torch.int32),
    "non-contiguous tensor": lambda a: torch.stack([a, a], 1)[:, 0],
    "list": lambda a: a.tolist(),
}


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


@pytest.mark.parametrize("copy_outputs", [True, False])
@pytest.mark.parametrize("validate", [True, False])
def test_every_action_input_gives_the_same_bits(copy_outputs, validate):
    steps = 60  # past the 40-step truncation: autoresets included
    actions = _actions(32, steps)
    runs = {}
    for name, convert in INPUTS.items():
        env = _env(32, validate_actions=validate)
        env.copy_outputs = copy_outputs
        outputs = []
        for step_actions in actions:
            obs, rewards, terminated, truncated, _ = env.step(convert(step_actions))
            outputs.append([t.clone() for t in (obs, rewards, terminated, truncated)])
        runs[name] = (outputs, env.state_snapshot())
    expected_outputs, expected_state = runs.pop("int64 tensor (its address)")
    for name, (outputs, state) in runs.items():
        for got, expected in zip(outputs, expected_outputs):
            assert all(torch.equal(g, e) for g, e in zip(got, expected)), name
        assert all(torch.equal(state[k], expected_state[k]) for k in state), name


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_read_only_actions_reach_torch_as_a_copy(dtype):
    """torch warns (once per process) on a tensor made from a read-only array: the actions it
    sees are a copy, and the step reads the same values."""
    actions = _read_only(np.ones(8, dtype))
    tensor = as_tensor(actions, "actions", "an integer array")
    assert tensor.numpy().flags.writeable and not np.shares_memory(tensor.numpy(), actions)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        obs = _env(8).step(actions)[0]
    assert torch.equal(obs, _env(8).step(torch.ones(8, dtype=torch.int64))[0])


def test_fresh_outputs_stay_the_callers_after_the_next_step():
    env = _env(8)  # copy_outputs=True: each step's outputs are new tensors
    actions = _actions(8, 2)
    first = env.step(actions[0])
    kept = [t.clone() for t in first[:4]]
    second = env.step(actions[1])
    assert all(a is not b for a, b in zip(first[:4], second[:4]))
    assert all(torch.equal(a, b) for a, b in zip(first[:4], kept))
    # the kernels' obs buffer is the last step's obs tensor (a reset writes where the user reads)
    obs_slot = env._layout_index("obs")
    assert np.shares_memory(env.kernel_args[obs_slot], second[0].numpy())


def _linear_input(obs: torch.Tensor) -> torch.Tensor:
    """The obs as an autograd record keeps it (the input a linear layer saves for backward)."""
    return torch.nn.Linear(4, 2)(obs).grad_fn._saved_mat1


#: Ways a caller keeps a step's output (obs, rewards, terminated, truncated) past later steps, and
#: how the kept object reads as a tensor.
HOLDERS = {
    "the tensor": (lambda o: o[0], lambda kept: kept),
    "a view": (lambda o: o[0][1:], lambda kept: kept),
    "a NumPy array of it": (lambda o: o[0].numpy(), torch.from_numpy),
    "a detached alias": (lambda o: o[1].detach(), lambda kept: kept),
    "a reinterpreting view": (lambda o: o[2].view(torch.uint8), lambda kept: kept),
    "an autograd record": (lambda o: o[0].sum() * 0 + _linear_input(o[0]), lambda kept: kept),
}


def test_a_step_reuses_output_memory_only_when_nothing_outside_holds_it():
    env = _env(64)
    actions = _actions(64, 60)
    addresses = set()
    for step_actions in actions[:20]:  # a loop that keeps nothing: a few arrays, reused
        obs, rewards, terminated, truncated, _ = env.step(step_actions)
        addresses.add(obs.data_ptr())
    assert len(addresses) <= 3
    del obs, rewards, terminated, truncated
    held = []
    for index, step_actions in enumerate(actions[20:]):
        keep, read = list(HOLDERS.values())[index % len(HOLDERS)]
        kept = keep(env.step(step_actions))  # the step's other outputs are dropped at once
        held.append((kept, read, read(kept).clone()))
    for kept, read, values in held:  # each kept output still reads as when it was returned
        assert torch.equal(read(kept), values)

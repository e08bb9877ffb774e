"""What a step or reset returns is the caller's: editing it in place (``obs /= 10``, through torch
or through ``.numpy()``) changes nothing the env does later, as with gymnasium's vector envs (which
hand out copies): not the rows a partial reset keeps, not ``buffers_state``, not later steps.

On the CPU path with fresh outputs the rewards and flags a step hands out are not read back by the
env (a step writes them whole); ``buffers_state`` reports them as handed out, so the comparisons
below leave those three out of the state.
"""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_envs.games.cartpole import CartPoleVectorEnv
from gpu_envs.games.pendulum import PendulumVectorEnv

#: Outputs a CPU step writes whole and never reads back (see the module docstring).
WRITE_ONLY = ("rewards", "terminated", "truncated")


def twins(make):
    """Two envs seeded alike: one whose outputs get edited, one left alone."""
    edited, untouched = make(), make()
    for env in (edited, untouched):
        env.reset(seed=7)
    return edited, untouched


def assert_same_state(edited, untouched):
    ours, theirs = edited.buffers_state(), untouched.buffers_state()
    for name in set(ours) - set(WRITE_ONLY):
        assert torch.equal(ours[name], theirs[name]), f"buffer {name!r} differs"


def test_an_observation_divided_in_place_stays_out_of_the_partial_reset_and_the_state():
    edited, untouched = twins(lambda: CartPoleVectorEnv(4))
    actions = torch.tensor([0, 1, 1, 0])
    obs, *_ = edited.step(actions)
    expected, *_ = untouched.step(actions)
    obs /= 10  # the caller's own tensor now
    assert torch.equal(edited.buffers_state()["obs"], untouched.buffers_state()["obs"])
    mask = torch.tensor([True, False, True, False])
    got, _ = edited.reset(options={"reset_mask": mask})
    want, _ = untouched.reset(options={"reset_mask": mask})
    assert torch.equal(got, want) and torch.equal(got[1], expected[1])
    got.numpy()[:] = 0  # what a reset returns is the caller's as well
    got, _ = edited.reset(options={"reset_mask": ~mask})
    want, _ = untouched.reset(options={"reset_mask": ~mask})
    assert torch.equal(got, want)
    assert_same_state(edited, untouched)


def test_a_copy_of_an_env_whose_outputs_were_edited_steps_as_the_untouched_one():
    edited, untouched = twins(lambda: PendulumVectorEnv(3))
    action = torch.zeros(3, 1)
    obs, *_ = edited.step(action)
    untouched.step(action)
    obs.fill_(float("nan"))
    clone = copy.deepcopy(edited)
    mask = torch.tensor([False, True, False])
    assert torch.equal(
        clone.reset(options={"reset_mask": mask})[0],
        untouched.reset(options={"reset_mask": mask})[0],
    )
    assert_same_state(clone, untouched)


def edit(data, tensor: torch.Tensor, label: str) -> None:
    """Change random entries of ``tensor`` in place, through torch or through NumPy."""
    flat = tensor.view(-1)
    index = data.draw(st.integers(0, flat.numel() - 1), label=f"{label} entry")
    how = data.draw(st.sampled_from(["torch", "numpy", "all"]), label=f"{label} edit")
    if tensor.dtype == torch.bool:
        value = not bool(flat[index])
    else:
        value = data.draw(st.sampled_from([0.0, -1e6, float("nan"), 3.5]), label=f"{label} to")
    if how == "torch":
        flat[index] = value
    elif how == "numpy":
        tensor.numpy().reshape(-1)[index] = value
    elif tensor.dtype == torch.bool:
        tensor.logical_not_()
    else:
        tensor.mul_(10).add_(1)


GAMES = {
    "cartpole": (lambda mode: CartPoleVectorEnv(3, autoreset_mode=mode, max_episode_steps=6)),
    "pendulum": (lambda mode: PendulumVectorEnv(3, autoreset_mode=mode, max_episode_steps=6)),
}


@pytest.mark.parametrize("game", sorted(GAMES))
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
@settings(max_examples=25)
@given(data=st.data())
def test_in_place_edits_of_any_output_never_change_what_the_env_does(game, mode, data):
    edited, untouched = twins(lambda: GAMES[game](mode))
    for turn in range(data.draw(st.integers(1, 12), label="operations")):
        if data.draw(st.booleans(), label=f"{turn}: step?"):
            if game == "cartpole":
                actions = torch.tensor(
                    data.draw(st.lists(st.integers(0, 1), min_size=3, max_size=3))
                )
            else:
                actions = torch.tensor(
                    data.draw(st.lists(st.floats(-2, 2, width=32), min_size=3, max_size=3))
                ).reshape(3, 1)
            if mode == "disabled":
                edited.clear_finished()
                untouched.clear_finished()
            *ours, info = edited.step(actions)
            *theirs, their_info = untouched.step(actions)
            ours += [info[key] for key in sorted(info) if isinstance(info[key], torch.Tensor)]
            theirs += [their_info[k] for k in sorted(info) if isinstance(info[k], torch.Tensor)]
        else:
            mask = torch.tensor(data.draw(st.lists(st.booleans(), min_size=3, max_size=3)))
            options = {"reset_mask": mask} if mask.any() else None
            ours, theirs = [edited.reset(options=options)[0]], [untouched.reset(options=options)[0]]
        for number, (got, want) in enumerate(zip(ours, theirs)):
            assert torch.equal(got, want), f"output {number} of operation {turn} differs"
            if data.draw(st.booleans(), label=f"{turn}: edit output {number}?"):
                edit(data, got, f"{turn}.{number}")
    assert_same_state(edited, untouched)

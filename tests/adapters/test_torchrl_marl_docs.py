"""docs/using-with-marl.md's TorchRL section: TorchRL's multi-agent PPO tutorial on Quick Tag with a
categorical policy runs as written (its hyperparameters shrunk to a few seconds, as the tutorial's
own test mode does): the env block prints what the page shows, and the training loop samples
joint-action indices, trains the policy and the critic, and logs both sides' returns."""

import re

import pytest
import torch

pytest.importorskip("torchrl")
from gpu_envs.games.tag.quick import QUICK_TAG
from tests.helpers.marl_docs import run_block, section_blocks

SECTION = "TorchRL's multi-agent PPO tutorial"
#: The tutorial's sizes, shrunk: 2 iterations of 8 games x 25 steps, 2 epochs of 2 minibatches.
SMALL = dict(frames_per_batch=200, n_iters=2, total_frames=400, num_epochs=2, minibatch_size=100)
pytestmark = pytest.mark.filterwarnings(
    "ignore:The env passed to Collector is missing transforms:FutureWarning"
)


def test_the_tutorial_with_a_categorical_policy_trains_on_quick_tag():
    blocks = section_blocks(SECTION)
    assert len(blocks) == 4
    namespace: dict = {"__name__": "__docs__"}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small networks: more threads only contend on a shared machine
    try:
        printed = [run_block(blocks[0][0], namespace, f"{SECTION} #0")]
        assert namespace["total_frames"] == 30_000  # the tutorial's budget, as the page says
        namespace.update(SMALL)
        for i, (code, _) in enumerate(blocks[1:3], start=1):
            printed.append(run_block(code, namespace, f"{SECTION} #{i}"))
        before = [p.detach().clone() for p in namespace["policy"].parameters()]
        printed.append(run_block(blocks[3][0], namespace, f"{SECTION} #3"))
    finally:
        torch.set_num_threads(threads)
    assert printed[1] == blocks[1][1], "the env block prints what the page shows"
    env, data = namespace["env"], namespace["tensordict_data"]
    assert env.batch_size == (8,) and data.batch_size == (8, 25)
    actions = data["agents", "action"]
    agents = QUICK_TAG["num_taggers"] + QUICK_TAG["num_runners"]
    assert actions.dtype == torch.int64 and actions.shape == (8, 25, agents)
    assert int(actions.min()) >= 0 and int(actions.max()) < 9 and actions.unique().numel() > 1
    after = list(namespace["policy"].parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after)), "the policy trained"
    lines = printed[3].splitlines()
    assert len(lines) == 2
    for iteration, line in enumerate(lines):
        match = re.fullmatch(
            rf"iteration {iteration}: (\d+) games, episode return taggers (\S+), runners (\S+)",
            line,
        )
        assert match and int(match.group(1)) == 8, line  # each of the 8 games ended once
        assert all(float(value) == float(value) for value in match.groups()[1:])  # not NaN

"""Tag: per-policy parameter isolation, and agents out of the game masked out of the losses."""

import copy

import pytest
import torch

from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset

SMALL_TAG = [
    "env.num_taggers=2",
    "env.num_runners=6",
    "env.grid_length=2.0",
    "env.episode_length=12",
    "env.tagging_distance=0.25",
    "env.num_other_agents_observed=3",
    "trainer.num_envs=4",
    "trainer.train_batch_size=48",
    "trainer.total_timesteps=96",
    "trainer.progress_bar=false",
    "trainer.accelerator=cpu",
    "policy.runner.model.fc_dims=[8]",
    "policy.tagger.model.fc_dims=[8]",
    "evaluation.eval_freq=0",
    "saving.metrics_log_freq=1",
]


def _trainer(tmp_path, extra=()):
    from gpu_envs.trainers.fabric_loop import Trainer, make_fabric

    config = RunConfig.from_dict(
        apply_overrides(preset("tag"), SMALL_TAG + [f"saving.basedir={tmp_path}", *extra])
    )
    return Trainer(make_fabric(config), config)


def _params(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("compile_step", [False, True])
def test_policies_own_their_agents_networks_and_optimizers(tmp_path, compile_step):
    trainer = _trainer(tmp_path, [f"trainer.compile={str(compile_step).lower()}"])
    groups = {g.tag: g for g in trainer.groups}
    env = trainer.game.env
    assert groups["tagger"].agents == slice(0, 2) and groups["runner"].agents == slice(2, 8)
    assert list(range(8))[groups["tagger"].agents] == env.taggers
    assert list(range(8))[groups["runner"].agents] == env.runners
    tagger_ids = {id(p) for p in groups["tagger"].module.parameters()}
    runner_ids = {id(p) for p in groups["runner"].module.parameters()}
    assert not tagger_ids & runner_ids
    for group in groups.values():
        own = {id(p) for p in group.module.parameters()}
        assert {id(p) for pg in group.optimizer.param_groups for p in pg["params"]} == own
    before = {tag: _params(g.module) for tag, g in groups.items()}
    trainer.fit()
    # each policy's A2C step on its MultiDiscrete heads went through its own analytic step
    # (one process: nothing to compile, whatever trainer.compile says)
    assert all(g.step.kind == "analytic" for g in groups.values())
    lrs = {tag: g.optimizer.param_groups[0]["lr"] for tag, g in groups.items()}
    assert lrs["runner"] == pytest.approx(0.005 / 2) and lrs["tagger"] == pytest.approx(0.002 / 2)
    for tag, group in groups.items():
        after = _params(group.module)
        assert any(not torch.equal(before[tag][k], after[k]) for k in after), tag


def test_a_frozen_policy_is_untouched_while_the_other_learns(tmp_path):
    trainer = _trainer(tmp_path, ["policy.runner.to_train=false"])
    groups = {g.tag: g for g in trainer.groups}
    assert groups["runner"].optimizer is None
    before = {tag: _params(g.module) for tag, g in groups.items()}
    trainer.fit()
    runner_after, tagger_after = _params(groups["runner"].module), _params(groups["tagger"].module)
    assert all(torch.equal(before["runner"][k], runner_after[k]) for k in runner_after)
    assert any(not torch.equal(before["tagger"][k], tagger_after[k]) for k in tagger_after)


def test_tagged_runners_are_masked_and_their_data_cannot_move_the_weights(tmp_path):
    from gpu_envs.trainers.ppo import update

    trainer = _trainer(tmp_path)
    trainer.collector.reset(3)
    buffers = trainer.collector.collect()
    buf = buffers["runner"]
    env_done = trainer.collector.env_done  # [T, E]
    env_reset = trainer.collector.env_reset
    tagged = (
        buf.terminated.bool() & ~env_done[:, :, None]
    )  # a runner left the game, its game goes on
    assert tagged.any(), "the small arena should produce tags"
    steps = buf.valid.shape[0]
    for t, e, j in tagged.nonzero().tolist():
        later = t + 1
        while later < steps and not env_reset[later, e]:
            assert buf.valid[later, e, j] == 0 and buf.rewards[later, e, j] == 0
            later += 1
    # The env's reset step is invalid for every agent; a done env's end reaches all its agents.
    assert (buf.valid[env_reset] == 0).all()
    assert (buf.done[env_done] == 1).all() and (buffers["tagger"].done[env_done] == 1).all()
    # Garbage in the masked entries changes nothing in the update.
    group = trainer.groups[[g.tag for g in trainer.groups].index("runner")]
    poisoned = copy.deepcopy(buf)
    invalid = poisoned.valid == 0
    poisoned.obs[invalid] = 1e6
    poisoned.actions[invalid] = 0
    poisoned.log_probs[invalid] = -50.0
    results = []
    for data in (buf, poisoned):
        module_state = copy.deepcopy(group.module.state_dict())
        optim_state = copy.deepcopy(group.optimizer.state_dict())
        torch.manual_seed(0)
        update(group, data)
        results.append(_params(group.module))
        group.module.load_state_dict(module_state)
        group.optimizer.load_state_dict(optim_state)
    for key in results[0]:
        torch.testing.assert_close(results[0][key], results[1][key], rtol=0, atol=0)

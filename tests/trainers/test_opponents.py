"""Self-play with a pool of frozen opponents (``opponents.*``): who plays where, what is trained on,
how the pool grows, and that a checkpoint resumes it exactly."""

import pytest
import torch

from gpu_envs.runs.checkpoint import load_checkpoint
from gpu_envs.runs.config import ConfigError, RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from tests.trainers.test_tag_policies import SMALL_TAG as TAG_SMALL_GAME

# test_trainer_tag's small game, more envs and iterations, PPO for both teams, a pool.
SMALL_TAG = [
    *(o for o in TAG_SMALL_GAME if not o.startswith("trainer.")),
    "trainer.num_envs=8",
    "trainer.train_batch_size=48",
    "trainer.total_timesteps=288",
    "trainer.progress_bar=false",
    "trainer.accelerator=cpu",
    "trainer.torch_threads=1",
    "policy.runner.algorithm=PPO",
    "policy.tagger.algorithm=PPO",
    "opponents.share=0.5",
    "opponents.snapshot_freq=2",
    "opponents.pool_size=1",
]


def _config(tmp_path, extra=()) -> RunConfig:
    return RunConfig.from_dict(
        apply_overrides(
            preset("tag"),
            SMALL_TAG + [f"saving.basedir={tmp_path}", "saving.tag=example", *extra],
        )
    )


def _trainer(tmp_path, extra=(), resume=None):
    from gpu_envs.trainers.fabric_loop import Trainer, make_fabric

    config = _config(tmp_path, extra)
    return Trainer(make_fabric(config), config, resume)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["opponents.share=1.0"], "opponents.share: must be in [0, 1)"),
        (["opponents.share=0.1"], "leaves fewer than one env per policy"),
        (["opponents.snapshot_freq=0"], "opponents.snapshot_freq: must be >= 1"),
        (["opponents.pool_size=-1"], "opponents.pool_size: must be >= 0"),
    ],
)
def test_bad_opponent_settings_name_the_field(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(")", r"\)")):
        _config(tmp_path, overrides)


def test_one_policy_has_no_opponent_to_freeze():
    data = apply_overrides(preset("cartpole"), ["opponents.share=0.5"])
    with pytest.raises(ConfigError, match="opponents.share: frozen opponents need two policies"):
        RunConfig.from_dict(data)


def test_each_policy_is_frozen_in_its_own_envs_and_not_trained_there(tmp_path):
    trainer = _trainer(tmp_path)
    pool = trainer.collector.opponents
    assert pool.envs == {"runner": slice(0, 2), "tagger": slice(2, 4)}
    # Make every frozen copy play one fixed action, which the learning policies never pick.
    for player in pool.players.values():
        torch.nn.init.zeros_(player.actor.weight)
        player.actor.bias.data.fill_(-1e4)
        player.actor.bias.data[[0, 11]] = 0.0  # heads of 11 + 11 choices: action (0, 0)
    pool.next_rollout = lambda: None  # keep those weights for this rollout
    trainer.collector.reset(5)
    buffers = trainer.collector.collect()
    for tag, envs in pool.envs.items():
        buf = buffers[tag]
        assert (buf.valid[:, envs] == 0).all()
        assert (buf.actions[:, envs] == 0).all()
        others = [e for e in range(8) if not envs.start <= e < envs.stop]
        assert buf.valid[:, others].any()
        assert (buf.actions[:, others] != 0).any()


def test_the_pool_keeps_the_initial_weights_and_the_newest_snapshots(tmp_path):
    trainer = _trainer(tmp_path, ["opponents.pool_size=2"])
    pool = trainer.collector.opponents
    runner = next(g for g in trainer.groups if g.tag == "runner")
    initial = {k: v.clone() for k, v in runner.module.state_dict().items()}
    trainer.fit()  # 6 rollouts: snapshots before rollouts 3 and 5
    assert pool.rollouts == 6 and len(pool.snapshots["runner"]) == 2
    assert all(torch.equal(initial[k], pool.initial["runner"][k]) for k in initial)
    newest = pool.snapshots["runner"][-1]
    assert any(not torch.equal(initial[k], newest[k]) for k in initial)


def test_a_checkpoint_resumes_the_pool(tmp_path):
    first = _trainer(tmp_path, ["trainer.total_timesteps=144"])
    first.fit()  # 3 iterations, a snapshot before the third, then a checkpoint
    pool = first.collector.opponents
    saved = load_checkpoint(next(tmp_path.rglob("iteration_3.pth.tar")))
    assert saved["opponents"]["rollouts"] == 3
    resumed = _trainer(tmp_path, resume=True)  # the same folder, 6 iterations in all
    again = resumed.collector.opponents
    assert again.rollouts == 3
    assert torch.equal(again.generator.get_state(), pool.generator.get_state())
    for tag, snapshots in pool.snapshots.items():
        assert len(again.snapshots[tag]) == len(snapshots) == 1
        for name, tensor in snapshots[0].items():
            assert torch.equal(again.snapshots[tag][0][name], tensor)
    resumed.fit()
    assert again.rollouts == 6
    assert (
        load_checkpoint(next(tmp_path.rglob("iteration_6.pth.tar")))["opponents"]["rollouts"] == 6
    )


def test_a_checkpoint_without_a_pool_cannot_resume_a_run_with_one(tmp_path):
    from gpu_envs.runs.checkpoint import CheckpointError

    _trainer(tmp_path, ["opponents.share=0.0", "trainer.total_timesteps=48"]).fit()
    with pytest.raises(CheckpointError, match="holds no opponent pool"):
        _trainer(tmp_path, resume=True)

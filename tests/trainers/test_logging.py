"""Metrics through Fabric's loggers under CleanRL's names: the folder's TensorBoard and CSV files,
and any logger the caller gave the Fabric."""

import csv

import pytest
from lightning.fabric.loggers import Logger

from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset

SMALL = [
    "trainer.num_envs=8",
    "trainer.train_batch_size=64",
    "trainer.total_timesteps=384",
    "trainer.progress_bar=false",
    "trainer.compile=false",
    "policy.agent.model.fc_dims=[8]",
    "env.max_episode_steps=5",  # episodes end in every window
    "evaluation.eval_freq=0",
    "saving.metrics_log_freq=3",
    "saving.scalars_log_freq=3",  # (default: every iteration)
    "saving.tag=example",  # a fixed folder name (the presets' is the start time)
]
CLEANRL = [
    "charts/train_seconds",
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
    "charts/learning_rate",
    "charts/episodic_return",
    "charts/episodic_length",
    "charts/SPS",
]


class Recorder(Logger):
    """A Fabric logger that keeps what it is given."""

    def __init__(self):
        super().__init__()
        self.logged = []

    name = "recorder"
    version = 0

    def log_metrics(self, metrics, step=None):
        self.logged.append((step, dict(metrics)))

    def log_hyperparams(self, params, *args, **kwargs):
        pass


def test_cleanrl_names_reach_tensorboard_csv_and_the_callers_loggers(tmp_path):
    from lightning.fabric import Fabric
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from gpu_envs.trainers.fabric_loop import Trainer

    config = RunConfig.from_dict(
        apply_overrides(preset("cartpole"), [*SMALL, f"saving.basedir={tmp_path}"])
    )
    recorder = Recorder()
    fabric = Fabric(accelerator="cpu", devices=1, loggers=recorder)
    trainer = Trainer(fabric, config)
    summary = trainer.fit()
    assert summary["iterations"] == 6
    assert fabric.loggers == [recorder]  # the folder's loggers are handed back after the run
    assert [step for step, _ in recorder.logged] == [192, 384]  # one write per log window
    for _, metrics in recorder.logged:
        assert sorted(metrics) == sorted(CLEANRL)
        assert metrics["charts/episodic_return"] == metrics["charts/episodic_length"] == 5.0
    # linear annealing: iteration 6 of 6 runs at a sixth of the preset's rate
    assert recorder.logged[-1][1]["charts/learning_rate"] == pytest.approx(0.003 / 6)

    root = tmp_path / "cartpole_ppo" / "example"
    events = EventAccumulator(str(root / "log" / "serial"))
    tags = events.Reload().Tags()["scalars"]
    assert set(CLEANRL) <= set(tags)
    assert [e.step for e in events.Scalars("losses/value_loss")] == [192, 384]
    with open(root / "log" / "csv" / "version_0" / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["step"]) for row in rows] == [192, 384]
    assert float(rows[-1]["losses/value_loss"]) == recorder.logged[-1][1]["losses/value_loss"]


def test_a_resumed_run_writes_a_new_csv_version_and_keeps_the_first(tmp_path):
    from gpu_envs.trainers.fabric_loop import train

    base = [*SMALL, f"saving.basedir={tmp_path}"]
    train(RunConfig.from_dict(apply_overrides(preset("cartpole"), base)))
    longer = base + ["trainer.total_timesteps=576"]
    train(RunConfig.from_dict(apply_overrides(preset("cartpole"), longer)), resume=True)
    folder = tmp_path / "cartpole_ppo" / "example" / "log" / "csv"
    steps = []
    for version in ("version_0", "version_1"):
        with open(folder / version / "metrics.csv", newline="") as handle:
            steps.append([int(row["step"]) for row in csv.DictReader(handle)])
    assert steps == [[192, 384], [576]]

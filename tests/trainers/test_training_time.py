"""A run's training time: it ends with the update whose evaluation stops the run, and the loggers'
first use (TensorBoard's imports) comes before the clock starts."""

import time

from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from gpu_envs.trainers import core

SMALL = [
    "trainer.num_envs=4",
    "trainer.train_batch_size=16",
    "trainer.progress_bar=false",
    "policy.agent.model.fc_dims=[8]",
    "trainer.compile=false",
    "evaluation.num_episodes=2",
]


def _train(tmp_path, *overrides: str) -> dict:
    from gpu_envs.trainers.fabric_loop import train

    config = apply_overrides(preset("cartpole"), [*SMALL, f"saving.basedir={tmp_path}", *overrides])
    return train(RunConfig.from_dict(config))


def test_a_run_stopped_by_its_evaluation_times_its_updates_only(tmp_path, monkeypatch):
    """The metrics log and the checkpoint written after the evaluation that reached
    ``stop_value`` are not training time (a slow save shows in ``train_seconds`` only)."""
    save = core.TrainingRun.save

    def slow_save(self, path):
        time.sleep(1.0)
        save(self, path)

    monkeypatch.setattr(core.TrainingRun, "save", slow_save)
    # any greedy CartPole episode lasts 8+ steps: the first evaluation reaches 1
    summary = _train(tmp_path, "evaluation.eval_freq=2", "evaluation.stop_value=1")
    assert summary["reason"] == core.REACHED and summary["iterations"] == 2
    assert summary["update_seconds"] is not None
    assert summary["train_seconds"] - summary["update_seconds"] >= 1.0


def test_the_loggers_writers_exist_before_the_clock_starts(tmp_path, monkeypatch):
    runs, writer_at_start = [], []
    init, start = core.TrainingRun.__init__, core.TrainClock.start

    def remember(self, *args, **kwargs):
        init(self, *args, **kwargs)
        runs.append(self)

    def start_and_look(self):
        (run,) = runs
        writer_at_start.append(run.experiment.tensorboard._experiment is not None)
        start(self)

    monkeypatch.setattr(core.TrainingRun, "__init__", remember)
    monkeypatch.setattr(core.TrainClock, "start", start_and_look)
    _train(tmp_path, "trainer.total_timesteps=16", "evaluation.eval_freq=0")
    assert writer_at_start == [True]

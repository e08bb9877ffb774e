"""End-to-end CartPole runs: the experiment folder layout, and resuming after SIGKILL."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gpu_envs.runs.checkpoint import load_checkpoint
from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset

SMALL = [
    "trainer.num_envs=8",
    "trainer.train_batch_size=64",
    "trainer.progress_bar=false",
    "policy.agent.model.fc_dims=[8]",
    "trainer.compile=false",
    "saving.tag=example",  # a fixed folder name (the presets' is the start time)
]  # compiling: test_trainer_compile


def test_experiment_folder_layout(tmp_path):
    from gpu_envs.trainers.fabric_loop import train

    config = RunConfig.from_dict(
        apply_overrides(
            preset("cartpole"),
            SMALL
            + [
                f"saving.basedir={tmp_path}",
                "trainer.total_timesteps=384",
                "evaluation.eval_freq=2",
                "saving.metrics_log_freq=3",
                "saving.model_params_save_freq=2",
                "trainer.capture_video=true",
            ],
        )
    )
    summary = train(config)
    root = tmp_path / "cartpole_ppo" / "example"
    assert summary["iterations"] == 6 and summary["env_steps"] == 384
    ckpts = sorted(p.name for p in (root / "ckpt").iterdir())
    assert ckpts == [
        "ckpt_best.pth.tar",
        "iteration_2.pth.tar",
        "iteration_4.pth.tar",
        "iteration_6.pth.tar",
    ]
    for name in ("collector", "evaluator", "learner"):
        assert (root / "log" / name / f"{name}_logger.txt").stat().st_size > 0
    learner_log = (root / "log" / "learner" / "learner_logger.txt").read_text()
    assert learner_log.index("ActorCritic(") < learner_log.index("cur_lr_avg")
    for column in (
        "total_loss_avg",
        "policy_loss_avg",
        "value_loss_avg",
        "entropy_avg",
        "grad_norm_avg",
        "approx_kl_avg",
        "clip_fraction_avg",
        "explained_variance_avg",
    ):
        assert column in learner_log
    collector_log = (root / "log" / "collector" / "collector_logger.txt").read_text()
    for key in (
        "episode_count",
        "envstep_count",
        "avg_envstep_per_sec",
        "avg_episode_per_sec",
        "collect_time",
        "reward_mean",
        "reward_std",
        "reward_max",
        "reward_min",
        "total_envstep_count",
        "total_episode_count",
        "total_duration",
    ):
        assert f"\n{key}: " in collector_log
    assert "reward_mean" in (root / "log" / "evaluator" / "evaluator_logger.txt").read_text()
    events = list((root / "log" / "serial").glob("events.out.tfevents.*"))
    assert len(events) == 1
    assert (
        RunConfig.from_dict(__import__("yaml").safe_load((root / "total_config.yaml").read_text()))
        == config
    )
    lines = [json.loads(line) for line in (root / "results.json").read_text().splitlines()]
    assert [line["Iterations Completed"] for line in lines] == [3, 6]
    assert "Mean episodic reward" in lines[-1]["agent"] and "Perf. Stats" in lines[-1]
    assert sorted(p.suffix for p in (root / "videos").iterdir())[0] in (".gif", ".mp4")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = EventAccumulator(str(events[0])).Reload().Tags()["scalars"]
    assert (
        "learner_iter/agent/total_loss_avg" in tags and "learner_step/agent/total_loss_avg" in tags
    )
    assert "collector_step/agent/reward_mean" in tags and "evaluator_iter/agent/reward_mean" in tags
    # A second run with the same name does not overwrite the first one (DI-engine's renaming).
    config.trainer.total_timesteps = 64
    assert train(config)["experiment"] != str(root)


def _run_cli(args, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-m", "gpu_envs.commands.train", "cartpole", *SMALL, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


@pytest.mark.timeout(600)  # a hang guard, not a speed bound
def test_resume_after_sigkill_continues_the_counters(tmp_path):
    args = [
        f"saving.basedir={tmp_path}",
        "trainer.total_timesteps=1920",
        "evaluation.eval_freq=0",
        "saving.model_params_save_freq=1",
        "saving.metrics_log_freq=1000",
    ]
    ckpt_dir = tmp_path / "cartpole_ppo" / "example" / "ckpt"
    proc = _run_cli(args)
    while not (ckpt_dir / "iteration_3.pth.tar").exists():
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = max(
        int(p.name.split("_")[1].split(".")[0]) for p in ckpt_dir.glob("iteration_*.pth.tar")
    )
    assert 3 <= killed_at < 30
    state = load_checkpoint(
        ckpt_dir / f"iteration_{killed_at}.pth.tar"
    )  # the last file is complete
    assert state["env_step"] == killed_at * 64

    resumed = _run_cli(args + ["--resume"])
    output = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, output
    assert f"at iteration {killed_at} (env step {killed_at * 64})" in output
    final = load_checkpoint(ckpt_dir / "iteration_30.pth.tar")
    assert final["iteration"] == 30 and final["env_step"] == 1920
    assert final["counters"]["total_episodes"] > state["counters"]["total_episodes"]
    assert len(list((tmp_path / "cartpole_ppo").iterdir())) == 1  # resumed into the same folder


def test_resume_with_mismatched_network_is_a_clear_error(tmp_path):
    from gpu_envs.trainers.fabric_loop import train

    base = SMALL + [
        f"saving.basedir={tmp_path}",
        "trainer.total_timesteps=64",
        "evaluation.eval_freq=0",
    ]
    train(RunConfig.from_dict(apply_overrides(preset("cartpole"), base)))
    other = RunConfig.from_dict(
        apply_overrides(preset("cartpole"), base + ["policy.agent.model.fc_dims=[16]"])
    )
    from gpu_envs.runs.checkpoint import CheckpointError

    with pytest.raises(CheckpointError, match="policy 'agent' has a different network"):
        train(other, resume=True)


def test_fabric_run_with_mixed_precision_is_a_clear_error(monkeypatch):
    from gpu_envs.trainers.fabric_loop import make_fabric

    # What `fabric run --precision bf16-mixed ...` hands the script it launches.
    for key, value in {
        "LT_CLI_USED": "1",
        "LT_PRECISION": "bf16-mixed",
        "LT_ACCELERATOR": "cpu",
        "LT_DEVICES": "1",
    }.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ValueError, match="32-bit precision"):
        make_fabric(RunConfig.from_dict(preset("cartpole")))


def test_train_clock_stands_still_while_paused(monkeypatch):
    from gpu_envs.runs import speed as timing

    now = [100.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    clock = timing.TrainClock()
    clock.previous = 5.0  # seconds before a resume
    clock.start()
    now[0] = 102.0
    with clock.paused():
        now[0] = 110.0
        assert clock.seconds() == 7.0  # the evaluation's own time is not training time
    now[0] = 111.0
    assert clock.seconds() == 8.0


def test_training_steps_all_epochs_in_one_call_and_resumes_its_adam_state(tmp_path, monkeypatch):
    from gpu_envs.trainers import analytic_step
    from gpu_envs.trainers.fabric_loop import train

    epoch_calls = []
    original_epochs = analytic_step.AnalyticStep.epochs
    monkeypatch.setattr(
        analytic_step.AnalyticStep,
        "epochs",
        lambda self, mb, epochs: epoch_calls.append(epochs) or original_epochs(self, mb, epochs),
    )
    base = [
        *SMALL,
        "trainer.compile=true",
        f"saving.basedir={tmp_path}",
        "evaluation.eval_freq=0",
        "saving.model_params_save_freq=2",
    ]
    train(
        RunConfig.from_dict(
            apply_overrides(preset("cartpole"), base + ["trainer.total_timesteps=256"])
        )
    )
    # 4 iterations, each one call of its 10 whole-batch epochs
    assert epoch_calls == [10] * 4
    train(
        RunConfig.from_dict(
            apply_overrides(preset("cartpole"), base + ["trainer.total_timesteps=384"])
        ),
        resume=True,
    )
    state = load_checkpoint(tmp_path / "cartpole_ppo" / "example" / "ckpt" / "iteration_6.pth.tar")
    adam_steps = {
        s["step"].item() for s in state["policies"]["agent"]["optimizer"]["state"].values()
    }
    assert adam_steps == {60.0}  # torch Adam's own state, carried through the resume

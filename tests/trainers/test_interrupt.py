"""Runs a user can interrupt and trust: SIGINT/SIGTERM save and stop, ``--resume`` finds the run
and continues it bit for bit, a log without a terminal shows progress, the stop figure is what
``gpu-envs evaluate`` prints, and the folder gets its learning curves."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import torch

from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs import curves, experiment, run_control
from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from gpu_envs.trainers import learner, ppo
from gpu_envs.trainers.fabric_loop import train
from gpu_envs.trainers.scores import evaluate_checkpoint

CARTPOLE = [
    "trainer.num_envs=16",
    "trainer.train_batch_size=128",
    "trainer.total_timesteps=1536",  # 12 iterations
    "trainer.compile=false",
    "trainer.progress_bar=false",
    "policy.agent.model.fc_dims=[16]",
    "evaluation.eval_freq=4",
    "evaluation.num_episodes=8",
    "evaluation.stop_value=null",
]
TAG = [
    "trainer.num_envs=4",
    "trainer.train_batch_size=40",
    "trainer.total_timesteps=480",
    "trainer.accelerator=cpu",
    "trainer.progress_bar=false",
    "env.num_taggers=2",
    "env.num_runners=5",
    "env.num_other_agents_observed=3",
    "env.episode_length=15",  # episodes end within the run
    "policy.runner.model.fc_dims=[16]",
    "policy.tagger.model.fc_dims=[16]",
    "evaluation.eval_freq=0",
]


def _config(game: str, basedir: Path, *overrides: str) -> RunConfig:
    base = CARTPOLE if game == "cartpole" else TAG
    return RunConfig.from_dict(
        apply_overrides(preset(game), [*base, f"saving.basedir={basedir}", *overrides])
    )


def _signal_at(monkeypatch, iteration: int, number: int = signal.SIGINT) -> None:
    """Deliver signal ``number`` to this process while iteration ``iteration`` is learning."""
    real = ppo.learn

    def learn(groups, rollout, at, num_iterations):
        if at == iteration:
            signal.raise_signal(number)
        return real(groups, rollout, at, num_iterations)

    monkeypatch.setattr(ppo, "learn", learn)


def _weights(path) -> dict:
    return {tag: p["model"] for tag, p in ckpt.load_checkpoint(path)["policies"].items()}


def _assert_same_weights(a, b) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for tag in wa:
        for name, tensor in wa[tag].items():
            assert torch.equal(tensor, wb[tag][name]), f"{tag}.{name} differs"


@pytest.mark.parametrize("game", ["cartpole", "tag"])
def test_interrupted_and_resumed_run_ends_with_the_uninterrupted_weights(
    game, tmp_path, monkeypatch
):
    handler_before = signal.getsignal(signal.SIGINT)  # SIG_IGN in a background job, say
    whole = train(_config(game, tmp_path / "whole"))
    assert whole["status"] == "finished" and whole["iterations"] == 12

    _signal_at(monkeypatch, 5)
    stopped = train(_config(game, tmp_path / "parts"))
    assert (stopped["status"], stopped["reason"], stopped["iterations"]) == (
        "interrupted",
        "SIGINT",
        5,
    )
    folder = Path(stopped["experiment"])
    assert Path(stopped["checkpoint"]) == folder / "ckpt" / "iteration_5.pth.tar"
    assert run_control.read_status(folder)["status"] == "interrupted"
    assert stopped["resume_command"].endswith(f"--resume {folder}")
    assert signal.getsignal(signal.SIGINT) is handler_before  # handlers put back

    monkeypatch.undo()
    resumed = train(_config(game, tmp_path / "parts"), resume=True)  # finds the run by itself
    assert resumed["experiment"] == str(folder) and resumed["status"] == "finished"
    assert run_control.read_status(folder)["status"] == "finished"
    _assert_same_weights(whole["checkpoint"], resumed["checkpoint"])


def test_sigterm_stops_like_sigint_and_names_itself(tmp_path, monkeypatch):
    _signal_at(monkeypatch, 3, signal.SIGTERM)
    stopped = train(_config("cartpole", tmp_path))
    assert (stopped["status"], stopped["reason"], stopped["iterations"]) == (
        "interrupted",
        "SIGTERM",
        3,
    )
    from gpu_envs.commands.train import exit_code

    assert exit_code(stopped) == 143


def test_resume_picks_the_newest_unfinished_run_of_this_config(tmp_path, monkeypatch):
    mine = _config("cartpole", tmp_path)
    _signal_at(monkeypatch, 2)
    older = Path(train(mine)["experiment"])
    newer = Path(train(mine)["experiment"])
    other = Path(train(_config("cartpole", tmp_path, "trainer.seed=7"))["experiment"])
    assert len({older, newer, other}) == 3
    assert run_control.find_resumable(mine) == newer  # not the other config's, newer still
    monkeypatch.undo()
    train(mine, resume=True)
    assert run_control.find_resumable(mine) == older  # the newer one is finished now
    train(mine, resume=True)
    with pytest.raises(ckpt.CheckpointError, match=f"{re.escape(str(older))}, is finished"):
        run_control.find_resumable(mine)
    with pytest.raises(ckpt.CheckpointError, match="is finished"):  # by path too
        train(mine, resume=str(older))
    with pytest.raises(ckpt.CheckpointError, match="no unfinished run of this config"):
        run_control.find_resumable(_config("cartpole", tmp_path, "trainer.seed=8"))


def test_runs_go_to_a_time_stamped_folder_under_experiments(tmp_path, monkeypatch):
    for name in ("cartpole", "pendulum", "tag", "tag-selfplay"):
        saving = RunConfig.from_dict(preset(name)).saving
        assert saving.basedir == "experiments" and saving.tag is None, name
        assert saving.name.startswith(name.split("-")[0]), name

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 12, 2, 9, 5, 7)

    monkeypatch.setattr(experiment, "datetime", Frozen)
    config = _config("cartpole", tmp_path)
    root = experiment.experiment_root(config)
    assert root == tmp_path / "cartpole_ppo" / "261202_090507"
    assert [experiment.fresh_root(root).name for _ in range(3)] == [
        "261202_090507",
        "261202_090507_1",
        "261202_090507_2",
    ]


def test_the_stop_figure_is_what_evaluate_prints(tmp_path):
    config = _config(
        "cartpole", tmp_path, "evaluation.eval_freq=2", "evaluation.stop_value=-1.0"
    )  # stops at the first evaluation, which is the best so far
    summary = train(config)
    assert summary["reason"] == "stop_value reached"
    best = Path(summary["experiment"]) / "ckpt" / "ckpt_best.pth.tar"
    report = evaluate_checkpoint(best, episodes=8, seed=config.evaluation.seed, game="cartpole")
    assert report.mean("agent") == summary["best_eval"]
    assert summary["evaluate_command"].endswith(f"{best} --episodes 8 --seed 0")


def test_checkpoints_by_wall_time_and_scalars_every_iteration(tmp_path):
    summary = train(
        _config(
            "cartpole",
            tmp_path,
            "saving.model_params_save_freq=1000",
            "saving.checkpoint_minutes=1e-9",  # overdue at every iteration
            "env.max_episode_steps=5",
        )
    )
    folder = Path(summary["experiment"])
    saved = sorted(int(p.name.split("_")[1].split(".")[0]) for p in folder.glob("ckpt/iter*"))
    assert saved == list(range(1, 13))
    train_curve = curves.read_curves(folder)["train"]
    assert train_curve.steps == [128.0 * i for i in range(1, 13)]  # one point per iteration
    assert train_curve.seconds == sorted(train_curve.seconds)
    assert (folder / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_resumed_run_has_one_curve_and_plot_draws_seeds_as_a_band(tmp_path, monkeypatch):
    _signal_at(monkeypatch, 6)
    first = Path(train(_config("cartpole", tmp_path, "env.max_episode_steps=5"))["experiment"])
    monkeypatch.undo()
    train(_config("cartpole", tmp_path, "env.max_episode_steps=5"), resume=True)
    second = Path(
        train(_config("cartpole", tmp_path, "env.max_episode_steps=5", "trainer.seed=2"))[
            "experiment"
        ]
    )
    assert len(list(first.glob("log/csv/version_*"))) == 2
    steps = curves.read_curves(first)["train"].steps
    assert steps == sorted(set(steps)) and len(steps) == 12
    out = tmp_path / "plot.png"
    from gpu_envs import cli

    assert cli.main(["plot", str(tmp_path / "cartpole_ppo"), "--out", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert curves.groups_of([tmp_path / "cartpole_ppo"]) == {"cartpole_ppo": [first, second]}
    with pytest.raises(SystemExit, match="holds none"):
        cli.main(["plot", str(tmp_path / "nothing-here"), "--out", str(out)])


def _cli(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "gpu_envs.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        **kwargs,
    )


@pytest.mark.timeout(600)
def test_ctrl_c_on_the_command_line_saves_and_prints_the_resume_command(tmp_path):
    """The real thing: ``gpu-envs train`` to a pipe (no terminal), Ctrl-C once the run is going,
    then the printed command resumes it to the end."""
    words = [
        "train",
        "cartpole",
        *CARTPOLE,
        "trainer.total_timesteps=10000000",
        "trainer.progress_bar=true",
        "saving.progress_seconds=0.001",  # a progress line after every iteration
        f"saving.basedir={tmp_path}",
    ]
    proc = _cli(*words, cwd=tmp_path)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("[progress] iteration 3/"):
            proc.send_signal(signal.SIGINT)
            break
    output = "".join(lines) + proc.communicate()[0]
    assert proc.returncode == 130, output
    assert output.startswith("gpu-envs train: cartpole on cpu: 16 envs x 8 steps"), output
    assert "  output: " in output
    assert re.search(r"\[progress\] iteration 1/\d+ \| env steps 128 \| .* SPS \| return", output)
    final = output.strip().splitlines()[-1]
    found = re.fullmatch(
        r"gpu-envs train: stopped by SIGINT at iteration (\d+)/\d+, saved (\S+); resume with: "
        r"python -m gpu_envs.commands.train --resume (\S+)",
        final,
    )
    assert found, output
    iteration, saved, folder = int(found.group(1)), Path(found.group(2)), Path(found.group(3))
    assert saved == folder / "ckpt" / f"iteration_{iteration}.pth.tar" and saved.is_file()
    assert "Traceback" not in output

    # Resume as printed (shortened: the config is the run's own, plus a run length).
    more = f"--total-timesteps={128 * (iteration + 2)}"
    resumed = subprocess.run(
        [sys.executable, "-m", "gpu_envs.commands.train", "--resume", str(folder), more],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"Resuming from {saved} at iteration {iteration}" in resumed.stdout
    assert run_control.read_status(folder)["status"] == "finished"


def test_ctrl_c_while_compiling_leaves_no_empty_folder(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(learner, "make_steps", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(_config("cartpole", tmp_path))
    assert not list((tmp_path / "cartpole_ppo").iterdir())

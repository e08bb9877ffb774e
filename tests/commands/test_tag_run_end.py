"""The end of a Tag run prints the ``gpu-envs evaluate tag`` command that scores its teams against
random ones, and that command runs as printed (fresh processes, as a user types them)."""

import shlex
import subprocess
import sys

import pytest

TINY_TAG = [
    "env.num_taggers=1",
    "env.num_runners=3",
    "env.grid_length=2.0",
    "env.episode_length=8",
    "env.num_other_agents_observed=2",
    "trainer.num_envs=4",
    "trainer.train_batch_size=32",
    "trainer.total_timesteps=32",
    "trainer.progress_bar=false",
    "trainer.compile=false",
    "trainer.accelerator=cpu",
    "policy.runner.model.fc_dims=[8]",
    "policy.tagger.model.fc_dims=[8]",
]


def _gpu_envs(*argv: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpu_envs.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def _printed_command(out: str) -> list[str]:
    lines = [line for line in out.splitlines() if "`gpu-envs evaluate tag " in line]
    assert len(lines) == 1, out
    return shlex.split(lines[0].split("`")[1])


@pytest.mark.slow
def test_a_tag_run_ends_with_the_evaluate_tag_command_that_runs(tmp_path):
    trained = _gpu_envs(
        "train",
        "tag",
        *TINY_TAG,
        "evaluation.eval_freq=0",
        f"saving.basedir={tmp_path}",
        cwd=tmp_path,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    command = _printed_command(trained.stdout)
    checkpoint = trained.stdout.strip().splitlines()[-1].split("checkpoint: ")[1]
    assert command[:4] == ["gpu-envs", "evaluate", "tag", checkpoint]  # the last one (no best)
    scored = _gpu_envs(*command[1:], cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr[-3000:]
    assert "random taggers vs random runners" in scored.stdout
    assert "tagger ratio (trained taggers / random)" in scored.stdout


@pytest.mark.slow
def test_with_an_evaluation_the_command_scores_the_best_checkpoint(tmp_path):
    trained = _gpu_envs(
        "train",
        "tag",
        *TINY_TAG,
        "evaluation.eval_freq=1",
        "evaluation.num_episodes=2",
        f"saving.basedir={tmp_path}",
        cwd=tmp_path,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    command = _printed_command(trained.stdout)
    assert command[3].endswith("/ckpt/ckpt_best.pth.tar"), command
    assert trained.stdout.strip().splitlines()[-1] == f"best checkpoint: {command[3]}"

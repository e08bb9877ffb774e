"""Every ``gpu-envs`` subcommand a user runs on a game, each in a fresh process (as from a shell),
for every game of the registry: ``train`` a tiny run, then ``evaluate``, ``render`` and ``plot``
on what it wrote. A command that works only after another import has run fails here."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from gpu_envs.games import GAMES

TINY = [
    "trainer.progress_bar=false",
    "trainer.compile=false",
    "trainer.accelerator=cpu",
    "trainer.num_envs=4",
    "trainer.train_batch_size=32",
    "trainer.total_timesteps=64",
    "evaluation.eval_freq=1",
    "evaluation.num_episodes=2",
]
SINGLE_AGENT = ["policy.agent.model.fc_dims=[8]", "env.max_episode_steps=20"]
TAG = [
    "env.num_taggers=1",
    "env.num_runners=3",
    "env.grid_length=2.0",
    "env.episode_length=8",
    "env.num_other_agents_observed=2",
    "policy.runner.model.fc_dims=[8]",
    "policy.tagger.model.fc_dims=[8]",
]


def gpu_envs(*args: str) -> str:
    """Run ``gpu-envs ARGS`` in a new interpreter; its stdout (the test fails on a non-zero
    exit, showing stderr)."""
    command = [sys.executable, "-c", "import sys; from gpu_envs.cli import main; sys.exit(main())"]
    result = subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 0, f"gpu-envs {' '.join(args)}:\n{result.stderr[-4000:]}"
    return result.stdout


@pytest.mark.parametrize("game", sorted(GAMES))
def test_train_evaluate_render_and_plot_each_in_its_own_process(game, tmp_path):
    overrides = TAG if GAMES[game].trainer_face == "tag" else SINGLE_AGENT
    out = gpu_envs("train", game, *TINY, *overrides, f"saving.basedir={tmp_path}")
    folder = re.search(r"experiment folder: (\S+)", out).group(1)
    checkpoint = re.search(r"checkpoint: (\S+)$", out.strip()).group(1)

    report = gpu_envs("evaluate", game, checkpoint, "--episodes", "2")
    assert re.search(r"\d", report), report
    animation = tmp_path / "episode.gif"
    gpu_envs("render", game, checkpoint, "--out", str(animation))
    assert animation.stat().st_size > 0
    curves = tmp_path / "curves.png"
    gpu_envs("plot", folder, "--out", str(curves))
    assert curves.stat().st_size > 0


def test_ctrl_c_while_the_command_starts_is_one_line_and_exit_130(monkeypatch, capsys):
    from gpu_envs import cli

    def interrupted(argv):
        raise KeyboardInterrupt  # as Ctrl-C while torch and the kernels load

    monkeypatch.setattr(cli, "_run", interrupted)
    assert cli.main(["train", "cartpole"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "gpu-envs: interrupted\n" and captured.out == ""


@pytest.mark.parametrize(
    "command", [[], ["train"], ["plot"], ["evaluate"], ["render"], ["bench"], ["device-check"]]
)
def test_help_is_plain_text(command):
    text = gpu_envs(*command, "--help")
    assert "``" not in text and not re.search(r":[a-z]+:`", text), text

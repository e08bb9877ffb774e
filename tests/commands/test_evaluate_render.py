"""``gpu-envs train`` (its closing lines), ``evaluate cartpole|tag`` and ``render cartpole|tag`` on
checkpoints of tiny training runs made through the CLI itself; what ``render`` and ``evaluate
--on-gymnasium`` print, in fresh processes; the ``evaluate`` commands the docs show."""

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import pytest
from PIL import Image, ImageSequence

from gpu_envs import cli
from gpu_envs.commands.train import results_message
from gpu_envs.trainers.scores import evaluate_checkpoint, load_trained_game, returns_on

COMMON = [
    "trainer.progress_bar=false",
    "trainer.compile=false",
    "trainer.accelerator=cpu",
    "trainer.num_envs=4",
]
CARTPOLE = [
    "trainer.train_batch_size=32",
    "trainer.total_timesteps=64",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=1",
    "evaluation.num_episodes=2",
    "env.max_episode_steps=20",
]
TAG = [
    "env.num_taggers=1",
    "env.num_runners=3",
    "env.grid_length=2.0",
    "env.episode_length=8",
    "env.num_other_agents_observed=2",
    "trainer.train_batch_size=32",
    "trainer.total_timesteps=32",
    "policy.runner.model.fc_dims=[8]",
    "policy.tagger.model.fc_dims=[8]",
    "evaluation.eval_freq=0",
]


def train(game: str, overrides: list[str], basedir) -> tuple[str, str]:
    """Run ``gpu-envs train``; returns (its stdout, the checkpoint path it printed last)."""
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert cli.main(["train", game, *COMMON, *overrides, f"saving.basedir={basedir}"]) == 0
    out = stdout.getvalue()
    return out, re.search(r"checkpoint: (\S+)$", out.strip()).group(1)


@pytest.fixture(scope="module")
def tag_run(tmp_path_factory):
    """(train's output, checkpoint) of one tiny Tag run: one iteration, no evaluation."""
    return train("tag", TAG, tmp_path_factory.mktemp("tag"))


def test_train_prints_the_folder_and_best_checkpoint_then_evaluate_and_render_cartpole(
    tmp_path, capsys
):
    out, checkpoint = train("cartpole", CARTPOLE, tmp_path)
    folder = re.search(r"experiment folder: (\S+)", out).group(1)
    assert checkpoint == f"{folder}/ckpt/ckpt_best.pth.tar" and "best checkpoint: " in out

    report_path = tmp_path / "report.json"
    assert (
        cli.main(
            [
                "evaluate",
                "cartpole",
                checkpoint,
                "--episodes",
                "3",
                "--seed",
                "5",
                "--json",
                str(report_path),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    report = json.loads(report_path.read_text())
    returns = report["policies"]["agent"]["returns"]
    assert len(returns) == 3 and all(
        1 <= r <= 20 for r in returns
    )  # max_episode_steps=20 of the run
    assert f"agent: mean return {sum(returns) / 3:.2f}" in text
    assert "(CartPole-v1 reward threshold 475: not reached)" in text
    # The same seeds play the same episodes.
    assert evaluate_checkpoint(checkpoint, episodes=3, seed=5).returns["agent"] == returns

    video = tmp_path / "cartpole.gif"
    assert cli.main(["render", "cartpole", checkpoint, "--out", str(video), "--seed", "5"]) == 0
    # The start frame and one per step of the seeded episode, 20 ms each at 50 fps (Pillow merges
    # identical frames, so count time, not frames).
    with Image.open(video) as gif:
        durations = [frame.info["duration"] for frame in ImageSequence.Iterator(gif)]
    assert sum(durations) == pytest.approx((returns[0] + 1) * 20)
    assert f"wrote {video}" in capsys.readouterr().out


def test_evaluate_and_render_tag_from_a_cli_training_run(tag_run, tmp_path, capsys):
    out, checkpoint = tag_run
    assert "no best checkpoint (no evaluation ran" in out and checkpoint.endswith(
        "iteration_1.pth.tar"
    )

    assert cli.main(["evaluate", "tag", checkpoint, "--episodes", "2"]) == 0
    text = capsys.readouterr().out
    ratio = re.search(
        r"tagger ratio \(trained taggers / random\): (\S+) \(target >= 1\.500\): "
        r"learning benchmark target (met|not met)",
        text,
    )
    assert ratio is not None and (ratio.group(2) == "met") == (float(ratio.group(1)) >= 1.5)
    assert "PASS" not in text and "FAIL" not in text

    video = tmp_path / "tag.gif"
    assert cli.main(["render", "tag", checkpoint, "--out", str(video), "--size", "64"]) == 0
    assert iio.imread(video, index=None).shape[0] == 9  # episode_length 8 of the run + the start
    with pytest.raises(SystemExit, match="once"):
        cli.main(["render", "tag", checkpoint, "--checkpoint", checkpoint, "--out", str(video)])


def test_evaluate_and_render_cartpole_refuse_a_tag_checkpoint(tag_run, tmp_path):
    _, checkpoint = tag_run
    with pytest.raises(SystemExit, match="is of a tag run .* not of cartpole"):
        cli.main(["evaluate", "cartpole", checkpoint])
    with pytest.raises(SystemExit, match="not of cartpole"):
        cli.main(["render", "cartpole", checkpoint, "--out", str(tmp_path / "x.gif")])
    with pytest.raises(SystemExit, match="--episodes must be >= 1"):
        cli.main(["evaluate", "cartpole", checkpoint, "--episodes", "0"])
    with pytest.raises(SystemExit, match="does not exist"):
        cli.main(["evaluate", "cartpole", str(tmp_path / "missing.pth.tar")])
    with pytest.raises(SystemExit, match="--out must end in"):
        cli.main(["render", "cartpole", checkpoint, "--out", str(tmp_path / "x.png")])


def test_loaded_game_places_each_policy_on_its_agents(tag_run):
    _, checkpoint = tag_run
    game, groups = load_trained_game(checkpoint, 2, game="tag")
    assert {g.tag: g.agents.tolist() for g in groups} == {"tagger": [0], "runner": [1, 2, 3]}
    assert all(not g.module.training for g in groups)
    game.close()


def test_results_message_without_any_checkpoint(tmp_path):
    (tmp_path / "ckpt").mkdir()
    for n in (2, 10):
        (tmp_path / "ckpt" / f"iteration_{n}.pth.tar").write_bytes(b"")
    assert results_message(tmp_path).endswith(
        f"latest checkpoint: {tmp_path}/ckpt/iteration_10.pth.tar"
    )


def test_results_message_says_the_training_time_and_speed(tmp_path):
    (tmp_path / "ckpt").mkdir()
    summary = {"reason": "stop_value reached", "env_steps": 22528, "train_seconds": 3.5}
    timed = {**summary, "update_seconds": 2.0}
    assert "training time: 2.00 s for 22,528 env steps (11,264 env-steps/s" in results_message(
        tmp_path, timed
    )
    assert "(6,437 env-steps/s" in results_message(tmp_path, {**summary, "update_seconds": None})


def test_evaluate_and_render_a_pendulum_checkpoint(tmp_path, capsys):
    """A continuous-action checkpoint rebuilds its Gaussian head: greedy torques, seeded
    episodes."""
    overrides = [
        "trainer.train_batch_size=32",
        "trainer.total_timesteps=64",
        "policy.agent.model.fc_dims=[8]",
        "evaluation.eval_freq=1",
        "evaluation.num_episodes=2",
        "env.max_episode_steps=10",
    ]
    _, checkpoint = train("pendulum", overrides, tmp_path)
    report_path = tmp_path / "report.json"
    assert (
        cli.main(
            ["evaluate", "pendulum", checkpoint, "--episodes", "2", "--json", str(report_path)]
        )
        == 0
    )
    returns = json.loads(report_path.read_text())["policies"]["agent"]["returns"]
    assert len(returns) == 2 and all(
        -10 * 16.3 <= r <= 0 for r in returns
    )  # 10 steps, cost <= 16.3 each
    assert "(Pendulum training target -250: " in capsys.readouterr().out
    assert evaluate_checkpoint(checkpoint, episodes=2, seed=0).returns["agent"] == returns
    video = tmp_path / "pendulum.gif"
    assert cli.main(["render", "pendulum", checkpoint, "--out", str(video)]) == 0
    assert iio.imread(video, index=None).shape[0] >= 2


@pytest.mark.parametrize(
    "game, env_id",
    [("mountaincar", "MountainCar-v0"), ("mountaincar-continuous", "MountainCarContinuous-v0")],
)
def test_evaluate_on_gymnasium_plays_the_real_env_as_ours(game, env_id, tmp_path, capsys):
    """``--on-gymnasium``: the checkpoint's policy (scaled observations; clipped forces for the
    continuous car) on gymnasium's own env scores what it scores on our single env of the same
    seeds, which is bit-exact with it; the episodes last the run's ``max_episode_steps``."""
    overrides = [
        "trainer.train_batch_size=32",
        "trainer.total_timesteps=64",
        "policy.agent.model.fc_dims=[8]",
        "evaluation.eval_freq=0",
        "env.max_episode_steps=40",
    ]
    _, checkpoint = train(game, overrides, tmp_path)
    report_path = tmp_path / "report.json"
    argv = ["evaluate", game, checkpoint, "--on-gymnasium", "--episodes", "3", "--seed", "7"]
    assert cli.main([*argv, "--json", str(report_path)]) == 0
    assert f"3 greedy episodes on gymnasium's own {env_id} (gym.make" in capsys.readouterr().out
    returns = json.loads(report_path.read_text())["policies"]["agent"]["returns"]
    ours = returns_on(f"gpu_envs/{env_id}", checkpoint, game, episodes=3, seed=7)
    assert ours.returns["agent"] == returns and len(returns) == 3
    if game == "mountaincar":
        assert returns == [-40.0] * 3  # an untrained car never reaches the flag in 40 steps


@pytest.fixture(scope="module")
def cartpole_checkpoint(tmp_path_factory) -> str:
    """The best checkpoint of one tiny CartPole run (20-step episodes)."""
    return train("cartpole", CARTPOLE, tmp_path_factory.mktemp("cartpole"))[1]


def gpu_envs(*argv: str) -> str:
    """``gpu-envs ARGV`` run as a user runs it, in a fresh process: its stdout."""
    command = [sys.executable, "-m", "gpu_envs.cli", *argv]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_render_prints_the_return_of_the_episode_it_draws(cartpole_checkpoint, tmp_path):
    """The printed return is the greedy episode's of that seed (the evaluator's figure), and
    its steps are the animation's frames after the first."""
    video = tmp_path / "cartpole.gif"
    out = gpu_envs("render", "cartpole", cartpole_checkpoint, "--out", str(video), "--seed", "4")
    line = re.search(r"^episode return (\S+) over (\d+) steps \(seed 4\)$", out, flags=re.M)
    assert line is not None, out
    (expected,) = evaluate_checkpoint(cartpole_checkpoint, episodes=1, seed=4).returns["agent"]
    assert float(line.group(1)) == pytest.approx(expected, abs=0.005)
    assert int(line.group(2)) == expected  # CartPole: +1 per step
    with Image.open(video) as gif:
        durations = [frame.info["duration"] for frame in ImageSequence.Iterator(gif)]
    assert sum(durations) == pytest.approx((int(line.group(2)) + 1) * 20)


def test_evaluate_on_gymnasium_says_which_env_played(cartpole_checkpoint, tmp_path):
    """The default report and the ``--on-gymnasium`` one differ in their first line and their
    JSON ``env``, not only in their figures."""
    reports = {}
    for where, flags in (("ours", []), ("gymnasium", ["--on-gymnasium"])):
        path = tmp_path / f"{where}.json"
        argv = ["evaluate", "cartpole", cartpole_checkpoint, "--episodes", "2", *flags]
        reports[where] = (gpu_envs(*argv, "--json", str(path)), json.loads(path.read_text()))
    (ours, ours_json), (theirs, theirs_json) = reports["ours"], reports["gymnasium"]
    assert "2 greedy episodes on gpu_envs/CartPole-v1 (the run's env), seeds 0..1" in ours
    assert ours_json["env"] == "gpu_envs/CartPole-v1 (the run's env)"
    assert (
        "2 greedy episodes on gymnasium's own CartPole-v1 (gym.make, one episode at a time)"
        in theirs
    )
    assert theirs_json["env"].startswith("gymnasium's own CartPole-v1")
    assert "gymnasium's own" not in ours
    expected = returns_on("CartPole-v1", cartpole_checkpoint, "cartpole", episodes=2, seed=0)
    assert theirs_json["policies"]["agent"]["returns"] == expected.returns["agent"]


def test_every_evaluate_command_in_the_docs_names_its_game():
    """``gpu-envs evaluate`` takes the game first (``evaluate GAME CHECKPOINT``): every command
    the docs show does, and the concrete ones parse."""
    from gpu_envs.cli import build_parser
    from gpu_envs.games import GAMES

    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    games = {*GAMES, "GAME", "point_goal"}  # point_goal: the game docs/write-an-env.md registers
    shown = [
        (page.name, command.replace("`", "").split())
        for page in pages
        for command in re.findall(r"gpu-envs evaluate [^`\n]+(?:\n[^`\n]+)?", page.read_text())
    ]
    assert len(shown) >= 10
    for page, words in shown:
        assert words[2] in games, f"{page}: {' '.join(words)}"
        if words[2] == "cartpole" and len(words) > 3:
            assert build_parser().parse_args(words[1:]).game == "cartpole"

"""Tag frames, animations and the ``gpu-envs render tag`` command."""

import sys

import imageio.v3 as iio
import numpy as np
import pytest

from gpu_envs import cli
from gpu_envs.games.tag.rendering import (
    RUNNER_COLOUR,
    TAGGED_COLOUR,
    TAGGER_COLOUR,
    animate_episode,
    render_tag_frame,
    render_tag_frames,
    save_animation,
)
from gpu_envs.games.tag.replay import render_episode

SIZE = 200
TINY = dict(num_taggers=1, num_runners=3, grid_length=4.0, episode_length=6)


def colour_near(frame: np.ndarray, x: float, y: float, grid_length: float) -> set[tuple[int, ...]]:
    """The colours within 2 pixels of where arena point (x, y) lands: the arena is the bottom
    ``SIZE``-square of the frame (the label sits above it), y pointing up, a margin of < 6%."""
    label = frame.shape[0] - frame.shape[1]
    col = round(x / grid_length * SIZE)
    row = label + round((1 - y / grid_length) * SIZE)
    patch = frame[row - 2 : row + 3, col - 2 : col + 3].reshape(-1, 3)
    return {tuple(int(v) for v in pixel) for pixel in patch}


def test_frame_draws_taggers_runners_and_tagged_runners_in_their_colours():
    # Tagger at the centre; an active runner and a tagged runner on the diagonal: where the margin
    # is negligible (centre) or symmetric, the pixel lies within 2 px of the naive position.
    x = np.array([5.0, 2.5, 7.5], dtype=np.float32)
    y = np.array([5.0, 2.5, 7.5], dtype=np.float32)
    active = np.array([True, True, False])
    frame = render_tag_frame(x, y, active, 1, 10.0, 3, 10, size=SIZE)
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[1:] == (SIZE, 3)
    assert frame.shape[0] > SIZE  # room for the label
    centre = colour_near(frame, 5.0, 5.0, 10.0)
    assert TAGGER_COLOUR in centre
    # The quarter points move towards the centre by the margin: look a few pixels inwards.
    runner = set().union(*(colour_near(frame, 2.5 + d, 2.5 + d, 10.0) for d in (0.0, 0.1, 0.2)))
    tagged = set().union(*(colour_near(frame, 7.5 - d, 7.5 - d, 10.0) for d in (0.0, 0.1, 0.2)))
    assert RUNNER_COLOUR in runner and TAGGED_COLOUR not in runner
    assert TAGGED_COLOUR in tagged and RUNNER_COLOUR not in tagged
    # Exactly the three discs are coloured in the arena: no pink outside the tagger's
    # neighbourhood (the legend's disc sits above the arena).
    arena = frame[frame.shape[0] - SIZE :]
    pink_rows, pink_cols = np.nonzero(np.all(arena == TAGGER_COLOUR, axis=-1))
    assert pink_cols.min() > SIZE * 0.4 and pink_cols.max() < SIZE * 0.6


def test_a_legend_above_the_arena_names_the_three_colours_whatever_the_state():
    """The label carries a disc of each colour (taggers, runners, tagged runners) even when no
    runner is tagged, the same in every frame, and text beside them."""
    x = y = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    frames = [
        render_tag_frame(x, y, active, 1, 4.0, t, 9, size=SIZE)
        for active, t in ((np.ones(3, bool), 0), (np.array([True, False, False]), 7))
    ]
    label = frames[0].shape[0] - SIZE
    legend_rows = [frame[label // 2 : label] for frame in frames]
    colours = {tuple(int(v) for v in pixel) for pixel in legend_rows[0].reshape(-1, 3)}
    assert {TAGGER_COLOUR, RUNNER_COLOUR, TAGGED_COLOUR} <= colours
    assert (legend_rows[0] < 64).all(axis=-1).any()  # dark text: the legend's words
    assert np.array_equal(legend_rows[0], legend_rows[1])
    # the first row (time, runners left) is not the legend: it changes with the state
    assert not np.array_equal(frames[0][: label // 2], frames[1][: label // 2])


def test_label_changes_with_time_and_runners_left():
    x = y = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    label_rows = slice(
        0, render_tag_frame(x, y, np.ones(3, bool), 1, 4.0, 0, 9, size=SIZE).shape[0] - SIZE
    )
    base = render_tag_frame(x, y, np.ones(3, bool), 1, 4.0, 0, 9, size=SIZE)
    later = render_tag_frame(x, y, np.ones(3, bool), 1, 4.0, 5, 9, size=SIZE)
    fewer = render_tag_frame(x, y, np.array([True, False, True]), 1, 4.0, 0, 9, size=SIZE)
    assert (base[label_rows] < 128).any()  # dark text drawn
    assert not np.array_equal(base[label_rows], later[label_rows])
    assert not np.array_equal(base[label_rows], fewer[label_rows])


def test_frame_rejects_inconsistent_input():
    with pytest.raises(ValueError, match="same length"):
        render_tag_frame(np.zeros(3), np.zeros(2), np.ones(3, bool), 1, 1.0, 0, 1)
    with pytest.raises(ValueError, match="num_taggers"):
        render_tag_frame(np.zeros(3), np.zeros(3), np.ones(3, bool), 3, 1.0, 0, 1)


def test_batched_state_gives_one_frame_per_game():
    state = {
        "x": np.ones((2, 3)),
        "y": np.ones((2, 3)),
        "active": np.ones((2, 3), bool),
        "t": np.array([0, 4]),
    }
    frames = render_tag_frames(state, 1, 4.0, 9, size=SIZE)
    assert len(frames) == 2 and not np.array_equal(frames[0], frames[1])  # the labels differ


def test_gif_round_trip(tmp_path):
    frames = [np.full((64, 80, 3), value, dtype=np.uint8) for value in (0, 120, 250)]
    path = save_animation(frames, tmp_path / "a.gif", fps=10)
    back = iio.imread(path, index=None)
    assert back.shape[:3] == (3, 64, 80)
    assert abs(int(back[1, 10, 10, 0]) - 120) <= 2


def test_animation_errors(tmp_path, monkeypatch):
    frame = np.zeros((64, 64, 3), np.uint8)
    with pytest.raises(ValueError, match="must end in"):
        save_animation([frame], tmp_path / "a.png")
    with pytest.raises(ValueError, match="no frames"):
        save_animation([], tmp_path / "a.gif")
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)
    with pytest.raises(RuntimeError, match="imageio-ffmpeg"):
        save_animation([frame], tmp_path / "a.mp4")


def test_mp4_when_ffmpeg_is_installed(tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    frames = [np.full((65, 81, 3), value, dtype=np.uint8) for value in (0, 120, 250)]
    path = save_animation(frames, tmp_path / "a.mp4", fps=10)
    assert path.stat().st_size > 0


def test_render_episode_writes_one_frame_per_state(tmp_path):
    frames = render_episode(TINY, seed=1, out=tmp_path / "ep.gif", steps=3, size=SIZE)
    assert len(frames) == 4
    assert iio.imread(tmp_path / "ep.gif", index=None).shape[0] == 4
    again = render_episode(TINY, seed=1, steps=3, size=SIZE)
    assert all(np.array_equal(a, b) for a, b in zip(frames, again))


def test_animate_episode_needs_the_episode_fields():
    with pytest.raises(KeyError, match="grid_length"):
        animate_episode(
            {"x": [], "y": [], "active": [], "t": [], "num_taggers": 1, "episode_length": 1}
        )


def test_cli_writes_a_gif(tmp_path, capsys):
    out = tmp_path / "tag.gif"
    config = tmp_path / "run.yaml"
    config.write_text(
        "env:\n  num_taggers: 1\n  num_runners: 2\n  grid_length: 3.0\n  episode_length: 50\n"
    )
    code = cli.main(
        [
            "render",
            "tag",
            "--config",
            str(config),
            "--episode-length",
            "3",
            "--out",
            str(out),
            "--size",
            "96",
        ]
    )
    assert code == 0 and out.exists()
    assert (
        iio.imread(out, index=None).shape[0] <= 4
    )  # 3 steps at most: --episode-length won over the file
    assert "wrote" in capsys.readouterr().out


def test_cli_render_tag_prints_each_teams_return_in_a_fresh_process(tmp_path):
    """``gpu-envs render tag`` as a user runs it: the printed team returns are the sums of the
    episode's rewards (the same seeded random play, replayed here)."""
    import re
    import subprocess

    from gpu_envs.games.tag.replay import play_episode

    out = tmp_path / "tag.gif"
    params = ["--num-taggers", "1", "--num-runners", "3", "--episode-length", "5"]
    command = [sys.executable, "-m", "gpu_envs.cli", "render", "tag", *params, "--seed", "3"]
    result = subprocess.run(
        [*command, "--size", "64", "--out", str(out)], capture_output=True, text=True, check=True
    )
    line = re.search(
        r"episode returns over (\d+) steps: taggers \(1\) (\S+), runners \(3\) (\S+)$",
        result.stdout,
        flags=re.M,
    )
    assert line is not None, result.stdout
    episode = play_episode(dict(num_taggers=1, num_runners=3, episode_length=5), seed=3)
    rewards = episode["rewards"]
    assert int(line.group(1)) == rewards.shape[0] <= 5
    assert float(line.group(2)) == pytest.approx(rewards[:, :1].sum(), abs=0.005)
    assert float(line.group(3)) == pytest.approx(rewards[:, 1:].sum(), abs=0.005)
    assert rewards.any(), "a tagging episode: the returns are not trivially zero"


def test_cli_rejects_other_suffixes_and_missing_checkpoints(tmp_path):
    with pytest.raises(SystemExit, match="must end in"):
        cli.main(["render", "tag", "--out", str(tmp_path / "x.png")])
    with pytest.raises(SystemExit, match="does not exist"):
        cli.main(
            [
                "render",
                "tag",
                "--out",
                str(tmp_path / "x.gif"),
                "--checkpoint",
                str(tmp_path / "c.pt"),
            ]
        )


def test_cli_plays_a_checkpoint_on_its_env(tmp_path):
    from gpu_envs.games.tag.env import TagEnv
    from gpu_envs.runs.checkpoint import save_checkpoint
    from gpu_envs.runs.config import RunConfig, apply_overrides
    from gpu_envs.runs.presets import preset
    from gpu_envs.trainers.policy import ActorCritic

    config = RunConfig.from_dict(
        apply_overrides(
            preset("tag"),
            [
                "env.num_taggers=1",
                "env.num_runners=3",
                "env.num_other_agents_observed=2",
                "env.episode_length=4",
                "policy.runner.model.fc_dims=[8]",
                "policy.tagger.model.fc_dims=[8]",
            ],
        )
    )
    env = TagEnv(**config.env)
    networks = {
        tag: ActorCritic(env.obs_dim, env.action_nvec, p.model) for tag, p in config.policy.items()
    }
    save_checkpoint(
        {
            "iteration": 0,
            "env_step": 0,
            "num_iterations": 1,
            "best_eval": None,
            "counters": {"total_episodes": 0, "train_seconds": 0.0, "evaluations": 0},
            "sampler": {},
            "rng": {},
            "config": config.to_dict(),
            "spaces": {"obs_dim": env.obs_dim, "action_nvec": env.action_nvec},
            "policies": {
                tag: {"model": n.state_dict(), "optimizer": None} for tag, n in networks.items()
            },
        },
        tmp_path / "c.pth.tar",
    )
    out = tmp_path / "trained.gif"
    # The checkpoint's env (4 steps; the default env's observations would not fit), flags on top.
    for extra, frames in (([], 5), (["--episode-length", "2"], 3)):
        assert (
            cli.main(
                [
                    "render",
                    "tag",
                    "--checkpoint",
                    str(tmp_path / "c.pth.tar"),
                    "--out",
                    str(out),
                    "--size",
                    "96",
                    *extra,
                ]
            )
            == 0
        )
        assert iio.imread(out, index=None).shape[0] == frames


def test_bench_tag_command_produces_records(tmp_path):
    """Smoke test of `gpu-envs bench tag` (no timing assertion): ours only, one batch size."""
    import json

    from gpu_envs.cli import main

    out = tmp_path / "tag.json"
    main(
        [
            "bench",
            "tag",
            "--num-envs",
            "1",
            "--peers",
            "",
            "--scale-num-envs",
            "",
            "--json",
            str(out),
        ]
    )
    records = json.loads(out.read_text())
    records = records if isinstance(records, list) else records["records"]
    ours = [r for r in records if r.get("impl") == "ours"]
    assert (
        ours
        and ours[0]["env_steps_per_s"] > 0
        and ours[0]["agent_steps_per_s"] == 105 * ours[0]["env_steps_per_s"]
    )

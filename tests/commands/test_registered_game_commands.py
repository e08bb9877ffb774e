"""docs/write-an-env.md's PointGoal, installed through its entry point, under the commands as a
user runs them in fresh processes: ``gpu-envs train --resume point_goal`` takes the game's name as
``--resume cartpole`` does, and ``gpu-envs render point_goal`` writes an animation, drawn by the
record's ``draw_frame`` or, without one, as a plot of the observations."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.docs import test_write_an_env_tutorial as tutorial

project = tutorial.project  # the user's project, its entry point installed in project / "site"
CLI = [sys.executable, "-m", "gpu_envs.cli"]


@pytest.fixture(scope="module")
def trained(project, tmp_path_factory):
    """``(folder, cache)``: a folder where ``gpu-envs train point_goal`` ran one iteration of the
    run tagged ``first``, and the numba cache it filled."""
    folder = tmp_path_factory.mktemp("trained")
    cache = folder / "numba_cache"
    tutorial.run(
        [*CLI, "train", "point_goal", *tutorial.TINY_RUN[:2], "trainer.total_timesteps=256"]
        + [*tutorial.TINY_RUN[3:], "saving.tag=first", f"saving.basedir={folder}"],
        folder,
        cache,
        project / "site",
    )
    return folder, cache


def test_resume_takes_a_registered_game_by_name_as_a_built_in_one(project, trained):
    """``--resume point_goal KEY=VALUE``: the game's preset with the overrides, resumed from the
    run of that config (it goes on to a longer budget), not a folder named ``point_goal``."""
    folder, cache = trained
    run = folder / "point_goal_ppo" / "first"
    result = tutorial.run(
        [*CLI, "train", "--resume", "point_goal", *tutorial.TINY_RUN[:2]]
        + ["trainer.total_timesteps=512", *tutorial.TINY_RUN[3:]]
        + ["saving.tag=first", f"saving.basedir={folder}"],
        folder,
        cache,
        project / "site",
    )
    assert f"resuming {run / 'ckpt' / 'iteration_1.pth.tar'} at iteration 1" in result.stdout
    assert f"experiment folder: {run} (num_iterations reached)" in result.stdout
    assert (run / "ckpt" / "iteration_2.pth.tar").is_file()


def render(project, folder: Path, cache: Path, site: Path, out: Path):
    checkpoint = folder / "point_goal_ppo" / "first" / "ckpt" / "iteration_1.pth.tar"
    return tutorial.run(
        [*CLI, "render", "point_goal", str(checkpoint), "--out", str(out), "--seed", "3"],
        folder,
        cache,
        site,
    )


def gif_frames(path: Path) -> np.ndarray:
    import imageio.v3 as iio

    return iio.imread(path, extension=".gif", plugin="pillow", index=None)


def test_render_draws_the_tutorial_game_with_its_draw_frame(project, trained):
    folder, cache = trained
    out = folder / "episode.gif"
    result = render(project, folder, cache, project / "site", out)
    assert f"wrote {out}: frames drawn by point_goal:draw_point_goal" in result.stdout
    steps = int(
        re.search(r"episode return -?\d+\.\d\d over (\d+) steps \(seed 3\)", result.stdout)[1]
    )
    frames = gif_frames(out)  # (a GIF merges repeated frames: the point at rest)
    assert 1 < frames.shape[0] <= steps + 1 and frames.shape[1:3] == (240, 240)
    first = frames[0].reshape(-1, frames.shape[-1])[:, :3]
    colours = {tuple(c) for c in first}  # the table, the goal and the point
    assert {(230, 230, 230), (60, 170, 80), (40, 80, 200)} <= colours


def site_without_draw_frame(project, folder: Path) -> Path:
    """A copy of the project's site in ``folder`` whose game record has no ``draw_frame``."""
    site = folder / "site"
    site.mkdir()
    for path in (project / "site").iterdir():
        if path.is_dir():
            (site / path.name).mkdir()
            for inner in path.iterdir():
                (site / path.name / inner.name).write_text(inner.read_text())
    module = (project / "site" / "point_goal.py").read_text()
    line = '    draw_frame="point_goal:draw_point_goal",\n'
    assert line in module
    (site / "point_goal.py").write_text(module.replace(line, ""))
    return site


def test_render_plots_the_observations_of_a_game_without_frames(project, trained, tmp_path):
    """The same record without ``draw_frame``: the frames plot the observation over time."""
    folder, cache = trained
    site = site_without_draw_frame(project, tmp_path)
    out = tmp_path / "episode.gif"
    result = render(project, folder, cache, site, out)
    assert "the frames plot env 0's observation over time" in result.stdout
    steps = int(re.search(r"over (\d+) steps", result.stdout)[1])
    frames = gif_frames(out)
    assert frames.shape[0] == steps + 1 and frames.shape[1:3] == (400, 640)  # a new title each
    assert not np.array_equal(frames[0], frames[-1])  # the lines grow


@pytest.mark.parametrize("draw_frame", [True, False], ids=["draw_frame", "no_draw_frame"])
def test_training_captures_videos_of_a_game_whose_env_draws_no_frames(
    project, trained, tmp_path, draw_frame
):
    """``trainer.capture_video``: the frames come from the record's ``draw_frame``, else from the
    plot of the observations, as ``gpu-envs render`` draws them."""
    _, cache = trained
    site = project / "site" if draw_frame else site_without_draw_frame(project, tmp_path)
    result = tutorial.run(
        [*CLI, "train", "point_goal", *tutorial.TINY_RUN[:2], "trainer.total_timesteps=256"]
        + [*tutorial.TINY_RUN[3:], "trainer.capture_video=true", f"saving.basedir={tmp_path}"],
        tmp_path,
        cache,
        site,
    )
    (video,) = re.findall(r"\[video\] (\S+)", result.stdout)
    frames = gif_frames(Path(video)) if video.endswith(".gif") else None
    assert Path(video).stat().st_size > 0
    if frames is not None:
        assert frames.shape[1:3] == ((240, 240) if draw_frame else (400, 640))


def test_a_bad_draw_frame_is_refused_naming_the_field():
    from gpu_envs.games import Game, register_game
    from gpu_envs.trainers.played_episode import checked_frame

    with pytest.raises(ValueError, match='Game.draw_frame: must be "module:attribute"'):
        register_game(Game(name="x", env_id="me/X-v0", vector_env="m:Env", draw_frame="m.draw"))
    with pytest.raises(ValueError, match=r"m:draw must return an \(H, W, 3\) array, got \(4, 4\)"):
        checked_frame(np.zeros((4, 4), np.uint8), "m:draw")
    with pytest.raises(ValueError, match="m:draw must return uint8 pixels, got float64"):
        checked_frame(np.zeros((4, 4, 3)), "m:draw")

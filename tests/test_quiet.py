"""Quiet by default: a cheap ``--help``; no wall-clock asserts or hypothesis deadlines in tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

TESTS = Path(__file__).parent
HEAVY = ("torch", "numba", "lightning")


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["bench", "--help"],
        ["train", "--help"],
        ["evaluate", "--help"],
        ["render", "--help"],
    ],
)
def test_help_imports_no_torch_and_no_numba(argv):
    code = (
        "import sys\nfrom gpu_envs.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip() == "[]"
    assert out.stdout.startswith("usage: gpu-envs")


def test_train_help_still_lists_the_trainer_flags():
    out = subprocess.run(
        [sys.executable, "-m", "gpu_envs.cli", "train", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--total-timesteps" in out.stdout and "PRESET" in out.stdout


def test_no_test_asserts_on_wall_clock_time():
    clock = re.compile(r"\b(perf_counter|time\.time|monotonic)\(")
    offenders = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(TESTS.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.lstrip().startswith("assert") and clock.search(line)
    ]
    assert not offenders, "speed-dependent asserts:\n" + "\n".join(offenders)


def test_hypothesis_has_no_time_limits_by_default():
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check


def test_mp4_without_imageio_ffmpeg_fails_before_any_work(tmp_path, monkeypatch):
    from gpu_envs import cli
    from gpu_envs.games.tag import replay

    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)
    monkeypatch.setattr(replay, "play_episode", pytest.fail)  # no episode is played
    with pytest.raises(SystemExit, match=r"pip install imageio-ffmpeg"):
        cli.main(["render", "tag", "--out", str(tmp_path / "x.mp4")])


def test_rendering_prints_no_sdl_audio_noise():
    pytest.importorskip("pygame")
    code = (
        "import numpy as np\nfrom gpu_envs.engine.rendering import gymnasium_frames\n"
        "cartpole = 'gymnasium.envs.classic_control.cartpole:CartPoleEnv'\n"
        "assert len(gymnasium_frames(cartpole, np.zeros((2, 4)))) == 2"
    )
    unset = ("XDG_RUNTIME_DIR", "SDL_VIDEODRIVER", "DISPLAY", "WAYLAND_DISPLAY")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert "XDG_RUNTIME_DIR" not in out.stderr + out.stdout


def test_a_cold_tag_compile_prints_no_numba_ir_warnings(tmp_path):
    code = (
        "import numpy as np, gpu_envs\nenv = gpu_envs.TagEnv(2, num_runners=2)\n"
        "env.reset(seed=0)\nenv.step(np.zeros((2, 3, 2), np.int64))"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}  # empty: compiles from scratch
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert "NumbaIRAssumptionWarning" not in out.stderr
    assert list(tmp_path.rglob("*.nbi"))  # it did compile into the cache


def test_the_license_file_matches_pyproject_and_ships_in_the_wheel():
    tomllib = pytest.importorskip("tomllib")
    root = TESTS.parent
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (root / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text

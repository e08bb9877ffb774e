"""A broken game plug-in costs one warning, nothing else: an installed ``gpu_envs.games`` entry
point whose module does not import, whose import raises or that names no game is skipped with one
warning naming it, and the built-in games and the healthy plug-ins work on, in fresh processes as
a user runs them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.games.test_registration import MY_GAMES, installed_entry_points

GOOD = "my_cartpole = my_games:MY_CARTPOLE"
#: Broken entry points: (line, what the warning says about it).
BROKEN = [
    ("broken = no_such_module:GAME", "does not load: ModuleNotFoundError: No module named"),
    ("broken = broken_games:GAME", "does not load: RuntimeError: the plug-in's own bug"),
    ("broken = my_games:NOT_A_GAME", "must name a gpu_envs.games.Game named 'broken'"),
    ("broken = clash_games:GAME", "the names ['cartpole'] already designate the game 'cartpole'"),
]
BROKEN_MODULE = 'raise RuntimeError("the plug-in\'s own bug")\n'
#: A game whose alias is a built-in game's name.
CLASH_MODULE = """from gpu_envs.games import Game
GAME = Game(name="broken", env_id="me/Broken-v0", aliases=("cartpole",),
            vector_env="gpu_envs.games.cartpole:CartPoleVectorEnv")
"""


def plugins(folder, broken: str) -> dict:
    """A process environment with one broken and one healthy plug-in installed."""
    env = installed_entry_points(folder, f"{broken}\n{GOOD}", MY_GAMES)
    (folder / "broken_games.py").write_text(BROKEN_MODULE)
    (folder / "clash_games.py").write_text(CLASH_MODULE)
    return env


def run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)


def warnings_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "GamePluginWarning" in line]


@pytest.mark.parametrize(("broken", "says"), BROKEN)
def test_a_broken_plugin_is_one_warning_and_the_other_games_load(tmp_path, broken, says):
    code = (
        "from gpu_envs.games import game, single_agent_games\n"
        "print(game('my_cartpole').name, game('cartpole').name)\n"
        "print(sorted(record.name for record in single_agent_games()))\n"
    )
    out = run(["-c", code], plugins(tmp_path, broken))
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line != "my_games imported"]
    assert lines[0] == "my_cartpole cartpole" and "my_cartpole" in lines[1]
    assert "broken" not in lines[1]
    (warning,) = warnings_in(out.stderr)
    name, value = broken.split(" = ")
    assert f"entry point {name} = {value!r}" in warning and says in warning
    assert "Traceback" not in out.stderr


def test_the_commands_work_beside_a_broken_plugin(tmp_path):
    """``gpu-envs evaluate`` / ``render`` list the built-in and the healthy games, and ``train``
    takes the healthy plug-in, each with the one warning."""
    env = plugins(tmp_path, BROKEN[1][0])
    cli = ["-m", "gpu_envs.cli"]
    for command in ("evaluate", "render"):
        out = run([*cli, command, "--help"], env)
        assert out.returncode == 0, out.stderr
        assert "cartpole" in out.stdout and "my_cartpole" in out.stdout
        assert len(warnings_in(out.stderr)) == 1 and "Traceback" not in out.stderr
    out = run([*cli, "train", "my_cartpole", "--print-config", "trainer.num_envs=8"], env)
    assert out.returncode == 0, out.stderr
    assert "name: my_cartpole\n" in out.stdout
    (warning,) = warnings_in(out.stderr)
    assert "broken = 'broken_games:GAME'" in warning and "the plug-in's own bug" in warning

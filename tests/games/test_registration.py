"""Registration with gymnasium, the single env checker, and the torch episode-statistics wrapper."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import gpu_envs
from gpu_envs import RecordEpisodeStatistics


def test_single_env_passes_gymnasium_check_env():
    env = gym.make("gpu_envs/CartPole-v1")
    check_env(env.unwrapped, skip_render_check=False)
    assert env.spec.max_episode_steps == 500 and env.spec.reward_threshold == 475


def test_state_is_readable_and_assignable_like_gymnasium():
    env = gym.make("gpu_envs/CartPole-v1")
    env.reset(seed=0)
    env.unwrapped.state = np.array([0.1, 0.2, 0.03, 0.04])
    obs, *_ = env.step(1)
    ref = gym.make("CartPole-v1")
    ref.reset(seed=0)
    ref.unwrapped.state = np.array([0.1, 0.2, 0.03, 0.04])
    assert np.array_equal(obs, ref.step(1)[0])


def test_make_vec_uses_the_vector_entry_point():
    env = gym.make_vec("gpu_envs/CartPole-v1", num_envs=5, device="cpu")
    assert isinstance(env.unwrapped, gpu_envs.CartPoleVectorEnv)
    assert env.num_envs == 5 and env.unwrapped.max_episode_steps == 500
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, torch.Tensor) and obs.shape == (5, 4) and obs.dtype == torch.float32


def test_module_prefixed_id_works_without_import():
    code = (
        "import gymnasium as gym; e = gym.make('gpu_envs:gpu_envs/CartPole-v1'); "
        "print(type(e.unwrapped).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "CartPoleEnv"


def test_render_gives_one_frame_per_env():
    env = gpu_envs.CartPoleVectorEnv(3, render_mode="rgb_array")
    env.reset(seed=0)
    frames = env.render()
    assert len(frames) == 3 and frames[0].shape == (400, 600, 3) and frames[0].dtype == np.uint8


def play(env, steps: int, seed: int = 0):
    """Steps with constant actions; returns the (return, length) pairs the wrapper reports."""
    reported = []
    actions = torch.ones(env.num_envs, dtype=torch.int64)
    for _ in range(steps):
        *_, info = env.step(actions)
        mask = info["_episode"]
        reported += list(
            zip(info["episode"]["r"][mask].tolist(), info["episode"]["l"][mask].tolist())
        )
    return reported


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_episode_statistics_under_autoreset(mode):
    env = RecordEpisodeStatistics(
        gpu_envs.CartPoleVectorEnv(4, max_episode_steps=500, autoreset_mode=mode)
    )
    env.reset(seed=0)
    reported = play(env, 60)
    # Pushing right always ends an episode in 8-12 steps; every step rewards 1.
    assert len(reported) >= 16
    assert all(ret == length and 8 <= length <= 12 for ret, length in reported)
    assert int(env.episode_count) == len(reported)


def test_episode_statistics_disabled_mode_and_partial_reset():
    env = RecordEpisodeStatistics(
        gpu_envs.CartPoleVectorEnv(2, autoreset_mode="disabled", max_episode_steps=None)
    )
    env.reset(seed=0)
    env.unwrapped.state = torch.tensor(
        [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.25, 0.0]], dtype=torch.float64
    )
    _, _, term, _, info = env.step(torch.ones(2, dtype=torch.int64))
    assert term.tolist() == [False, True] and info["episode"]["l"][1] == 1
    env.reset(options={"reset_mask": np.array([False, True])})
    for _ in range(3):
        _, _, term, _, info = env.step(torch.tensor([1, 0]))
    # env 0 kept its running statistics through env 1's partial reset.
    assert info["episode"]["l"].tolist() == [4, 3]


# --- Games registered from outside the package: register_game and the gpu_envs.games entry points


@pytest.fixture
def registry():
    """``gpu_envs.games.GAMES``, restored after the test (registrations stay in it)."""
    from gpu_envs.games import GAMES

    saved = dict(GAMES)
    yield GAMES
    GAMES.clear()
    GAMES.update(saved)


def user_game(**changes):
    """A game record as a user writes it: CartPole's vector env under another name."""
    from gpu_envs.games import Game

    fields = dict(
        name="my_cartpole",
        env_id="me/MyCartPole-v0",
        vector_env="gpu_envs.games.cartpole:CartPoleVectorEnv",
        max_episode_steps=40,
        solved_threshold=30.0,
    )
    return Game(**{**fields, **changes})


def test_a_registered_game_is_found_by_every_name_and_gets_the_default_preset(registry):
    from gpu_envs.games import game, register_game
    from gpu_envs.runs.config import RunConfig, game_of
    from gpu_envs.runs.presets import PRESETS, preset

    record = register_game(user_game(aliases=("mine",)))
    assert registry["my_cartpole"] is record and register_game(user_game(aliases=("mine",)))
    for name in ("my_cartpole", "MINE", "me/mycartpole-v0", "MyCartPole-v0"):
        assert game(name) is record and game_of(name) == "my_cartpole"
    config = RunConfig.from_dict(preset("mine"))
    assert config.game == "my_cartpole" and "my_cartpole" not in PRESETS
    assert config.env == {} and list(config.policy) == ["agent"]
    assert config.evaluation.stop_value == 30.0 and config.saving.name == "my_cartpole_ppo"
    assert config.policy["agent"].algorithm == "PPO" and config.trainer.total_timesteps == 200_000
    assert config.policy["agent"].entropy_coeff == 0.01  # a discrete action: CleanRL's bonus
    continuous = register_game(
        user_game(name="my_pendulum", env_id="me/P-v0", trainer_face="continuous")
    )
    assert preset(continuous.name)["policy"]["agent"]["entropy_coeff"] == 0.0
    # a built-in game's other names give its own preset, not the default one
    assert preset("mountain_car") == preset("mountaincar")


def test_a_registered_game_refuses_bad_records_naming_the_problem(registry):
    from gpu_envs.games import register_game

    with pytest.raises(ValueError, match=r"\['cartpole'\] already designate the game 'cartpole'"):
        register_game(user_game(aliases=("cartpole",)))
    register_game(user_game())
    with pytest.raises(ValueError, match="already designate the game 'my_cartpole'"):
        register_game(user_game(max_episode_steps=99))  # same name, other record
    with pytest.raises(ValueError, match="Game.name: must be lower case"):
        register_game(user_game(name="My Game"))
    with pytest.raises(ValueError, match="Game.trainer_face: must be one of"):
        register_game(user_game(name="x", env_id="me/X-v0", trainer_face="gaussian"))
    with pytest.raises(ValueError, match='Game.vector_env: must be "module:attribute"'):
        register_game(user_game(name="y", env_id="me/Y-v0", vector_env="my_module.MyEnv"))
    with pytest.raises(TypeError, match="takes a gpu_envs.games.Game, got dict"):
        register_game({"name": "z"})
    assert set(registry) - {"cartpole", "pendulum", "acrobot", "tag"} >= {"my_cartpole"}
    assert not {"my game", "x", "y", "z"} & set(registry)


def test_the_trainer_builds_a_registered_game_and_names_a_wrong_face(registry):
    import torch

    from gpu_envs.games import register_game
    from gpu_envs.runs.config import ConfigError
    from gpu_envs.trainers.game_faces import ContinuousGame, DiscreteGame, make_game

    register_game(user_game())
    face = make_game("my_cartpole", 3, torch.device("cpu"), {})
    assert isinstance(face, DiscreteGame) and face.episode_length == 500  # the env's own first
    assert face.reset(seed=0).shape == (3, 1, 4)
    pendulum = "gpu_envs.games.pendulum:PendulumVectorEnv"
    register_game(user_game(name="my_pendulum", env_id="me/P-v0", vector_env=pendulum))
    with pytest.raises(ConfigError, match="needs trainer_face='continuous'"):
        make_game("my_pendulum", 2, torch.device("cpu"), {})
    register_game(
        user_game(
            name="my_pendulum2", env_id="me/P2-v0", vector_env=pendulum, trainer_face="continuous"
        )
    )
    assert isinstance(make_game("my_pendulum2", 2, torch.device("cpu"), {}), ContinuousGame)
    register_game(user_game(name="missing", env_id="me/M-v0", vector_env="no_such_module:Env"))
    with pytest.raises(ConfigError, match="'no_such_module:Env' of game 'missing' does not load"):
        make_game("missing", 2, torch.device("cpu"), {})


def installed_entry_points(folder, lines: str, module: str) -> dict:
    """The environment of a process that sees a distribution installed in ``folder`` (its
    ``gpu_envs.games`` entry points ``lines``, and the module ``my_games.py``), as ``pip install``
    would lay it out in site-packages."""
    import os

    dist_info = folder / "my_games-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-games\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(f"[gpu_envs.games]\n{lines}\n")
    (folder / "my_games.py").write_text(module)
    return {**os.environ, "PYTHONPATH": str(folder)}


MY_GAMES = """print("my_games imported")
from gpu_envs.games import Game
MY_CARTPOLE = Game(name="my_cartpole", env_id="me/MyCartPole-v0",
                   vector_env="gpu_envs.games.cartpole:CartPoleVectorEnv", max_episode_steps=40)
NOT_A_GAME = 3
"""


def test_entry_points_are_loaded_when_a_name_is_not_found_in_a_fresh_process(tmp_path):
    env = installed_entry_points(tmp_path, "my_cartpole = my_games:MY_CARTPOLE", MY_GAMES)
    code = (
        "from gpu_envs.games import GAMES, game\n"
        "print('cartpole' in GAMES, 'my_cartpole' in GAMES)\n"
        "game('cartpole')\n"  # a built-in name: no entry point is loaded
        "print(game('me/MyCartPole-v0').name, 'my_cartpole' in GAMES)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split("\n")[:3] == ["True False", "my_games imported", "my_cartpole True"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "my_cartpole = my_games:NOT_A_GAME",
            "must name a gpu_envs.games.Game named 'my_cartpole'",
        ),
        ("other_name = my_games:MY_CARTPOLE", "must name a gpu_envs.games.Game named 'other_name'"),
        (
            "my_cartpole = no_such_module:GAME",
            "does not load: ModuleNotFoundError: No module named 'no_such_module'",
        ),
    ],
)
def test_a_broken_entry_point_is_named_in_the_error(tmp_path, line, message):
    """It is skipped with a warning naming it; its game then stays unknown."""
    env = installed_entry_points(tmp_path, line, MY_GAMES)
    code = "from gpu_envs.games import game\ngame('my_cartpole')"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert f"entry point {line.split(' = ')[0]} = '{line.split(' = ')[1]}'" in out.stderr
    assert message in out.stderr


def test_gpu_envs_train_takes_an_entry_point_game_and_names_the_way_to_register(tmp_path):
    """As a user runs it: ``gpu-envs train my_cartpole --print-config`` resolves the installed
    game's default preset; an unknown game is one line naming ``register_game``."""
    env = installed_entry_points(tmp_path, "my_cartpole = my_games:MY_CARTPOLE", MY_GAMES)
    command = [sys.executable, "-m", "gpu_envs.cli", "train"]
    out = subprocess.run(
        [*command, "my_cartpole", "--print-config", "trainer.num_envs=8"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "name: my_cartpole\n" in out.stdout and "num_envs: 8\n" in out.stdout
    assert "name: my_cartpole_ppo\n" in out.stdout  # saving.name of the default preset
    unknown = subprocess.run(
        [*command, "pong", "--print-config"], env=env, capture_output=True, text=True
    )
    assert unknown.returncode != 0 and len(unknown.stderr.strip().splitlines()) == 1
    assert "unknown preset 'pong'" in unknown.stderr
    assert "gpu_envs.games.register_game" in unknown.stderr

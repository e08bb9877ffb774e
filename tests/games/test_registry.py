"""gpu_envs.games: every record is registered with gymnasium as it says, its classes and preset
exist, the tools list it; ``import gpu_envs`` imports no torch; the trainer's observation scale."""

import math
import subprocess
import sys

import gymnasium as gym
import pytest
import torch

import gpu_envs
from gpu_envs.commands import bench
from gpu_envs.games import GAMES, game, load, single_agent_games
from gpu_envs.runs.config import game_of
from gpu_envs.runs.presets import PRESETS
from gpu_envs.trainers.game_faces import make_game


@pytest.mark.parametrize("record", GAMES.values(), ids=list(GAMES))
def test_each_game_is_registered_loadable_and_has_its_preset(record):
    spec = gym.spec(record.env_id)
    assert (
        spec.entry_point == record.single_env
        and spec.vector_entry_point == record.vector_entry_point
    )
    assert spec.max_episode_steps == record.max_episode_steps
    assert spec.reward_threshold == record.reward_threshold
    for path in (record.vector_env, record.single_env, record.trainer_env):
        assert path == "" or callable(load(path))
    assert game_of(PRESETS[record.preset]["name"]) == record.name
    for name in record.names:
        assert game(name) is record and game_of(name.upper()) == record.name
    if record.solved_threshold is not None:
        assert PRESETS[record.preset]["evaluation"]["stop_value"] == record.solved_threshold


def test_unknown_game_names_the_known_ones():
    with pytest.raises(KeyError, match="unknown game 'pong'.*acrobot"):
        game("pong")


def test_tools_list_every_game():
    from gpu_envs.cli import build_parser

    parser = build_parser()
    for command in ("evaluate", "render"):
        for record in single_agent_games():
            args = parser.parse_args(
                [command, record.name, "ckpt.pth.tar", "--out", "x.gif"][
                    : 3 if command == "evaluate" else 5
                ]
            )
            assert args.game == record.name
    assert {"cartpole", "pendulum", "tag", "train-cartpole"} <= set(bench.BENCHMARKS)


def test_import_gpu_envs_imports_no_torch_and_classes_load_on_use():
    code = "import sys, gpu_envs; print('torch' in sys.modules, 'numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    assert gpu_envs.AcrobotVectorEnv is load(GAMES["acrobot"].vector_env)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        gpu_envs.Nope  # noqa: B018


def test_the_trainer_standardises_observations_by_the_games_scale():
    face = make_game("mountaincar", 3, torch.device("cpu"), {})
    obs = face.reset(seed=0)
    raw = face.env.state_snapshot()["obs"]
    center, scale = (torch.tensor(v) for v in GAMES["mountaincar"].observation_scale)
    assert obs.shape == (3, 1, 2) and torch.allclose(obs[:, 0], (raw - center) / scale)
    plain = make_game("cartpole", 2, torch.device("cpu"), {})
    assert torch.equal(plain.reset(seed=0)[:, 0], plain.env.state_snapshot()["obs"])
    # the reward-shaping potential is the game's, of the env's observations
    energy = load(GAMES["mountaincar"].potential)
    assert torch.allclose(face.potential(obs)[:, 0], energy(raw))
    at_flag, in_valley = energy(torch.tensor([[0.5, 0.0], [-math.pi / 6, 0.0]])).tolist()
    assert at_flag == pytest.approx(0, abs=1e-6) and in_valley == pytest.approx(-1 - math.sin(1.5))

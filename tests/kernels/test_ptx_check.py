"""``.ci/ptx_check.py`` compiles the kernels of every game of the registry: its env list, built on
the CPU (the PTX compile itself needs NVRTC/NVVM and runs in CI)."""

import importlib.util
from pathlib import Path

import torch

from gpu_envs.games import GAMES, load

PTX_CHECK = Path(__file__).resolve().parents[2] / ".ci" / "ptx_check.py"


def test_the_ptx_check_builds_every_game_of_the_registry_in_each_dtype():
    spec = importlib.util.spec_from_file_location("ptx_check", PTX_CHECK)
    assert spec is not None and spec.loader is not None
    ptx_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ptx_check)
    envs = list(ptx_check.envs())
    built = [(type(env), getattr(env, "dtype", None)) for env in envs]
    classes = [load(record.trainer_env or record.vector_env) for record in GAMES.values()]
    assert {env_class for env_class, _ in built} == set(classes)
    for env_class in classes:
        dtypes = [dtype for built_class, dtype in built if built_class is env_class]
        assert dtypes in ([torch.float32, torch.float64], [None])
    assert all(env.device.type == "cpu" and env.kernel_args for env in envs)
    (tag,) = (env for env in envs if env.game == "tag")
    assert not tag.params.use_full_observation and tag.params.num_other_agents_observed == 3

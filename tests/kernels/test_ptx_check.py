"""``.ci/ptx_check.py`` compiles the kernels of every game of the registry: its env list, built on
the CPU, and its rule against fused multiply-adds, on PTX text (the PTX compile itself needs
NVRTC/NVVM and runs in CI)."""

import importlib.util
from pathlib import Path

import torch

from gpu_envs.games import GAMES, load

PTX_CHECK = Path(__file__).resolve().parents[2] / ".ci" / "ptx_check.py"


def _ptx_check():
    spec = importlib.util.spec_from_file_location("ptx_check", PTX_CHECK)
    assert spec is not None and spec.loader is not None
    ptx_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ptx_check)
    return ptx_check


def test_the_ptx_check_builds_every_game_of_the_registry_in_each_dtype():
    envs = list(_ptx_check().envs())
    built = [(type(env), getattr(env, "dtype", None)) for env in envs]
    classes = [load(record.trainer_env or record.vector_env) for record in GAMES.values()]
    assert {env_class for env_class, _ in built} == set(classes)
    for env_class in classes:
        dtypes = [dtype for built_class, dtype in built if built_class is env_class]
        assert dtypes in ([torch.float32, torch.float64], [None])
    assert all(env.device.type == "cpu" and env.kernel_args for env in envs)
    (tag,) = (env for env in envs if env.game == "tag")
    assert not tag.params.use_full_observation and tag.params.num_other_agents_observed == 3


def test_the_unfused_rule_names_kernels_the_check_compiles():
    ptx_check = _ptx_check()
    games = {env.game for env in ptx_check.envs()}
    assert {game for game, _ in ptx_check.UNFUSED} <= games
    assert {kernel for _, kernel in ptx_check.UNFUSED} <= {"step", "reset"}
    assert ("tag", "step") in ptx_check.UNFUSED and ("cartpole", "reset") in ptx_check.UNFUSED


def test_a_fused_multiply_add_where_the_rule_forbids_it_is_an_error():
    ptx_check = _ptx_check()
    fused = "\tmul.rn.f32 \t%f3, %f1, %f2;\n\tfma.rn.f32 \t%f4, %f5, %f6, %f3;\n"
    unfused = "\tmul.rn.f32 \t%f3, %f1, %f2;\n\tadd.f32 \t%f4, %f3, %f5;\n"
    float64_trig = "\tfma.rn.f64 \t%fd4, %fd5, %fd6, %fd3;\n"
    assert ptx_check.fused_multiply_adds(fused + float64_trig) == {"fma.rn.f32": 1, "fma.rn.f64": 1}
    (error,) = ptx_check.contraction_errors("tag", "step", fused)
    assert "tag step kernel" in error and "fma.rn.f32" in error and "mul_rn" in error
    assert not ptx_check.contraction_errors("tag", "step", unfused + float64_trig)
    assert ptx_check.contraction_errors("tag", "reset", float64_trig)
    assert not ptx_check.contraction_errors("cartpole", "step", fused)  # no rule: free to fuse


def test_a_float64_fma_in_a_float32_env_is_an_error():
    ptx_check = _ptx_check()
    float64_trig = "\tfma.rn.f64 \t%fd4, %fd5, %fd6, %fd3;\n"
    (error,) = ptx_check.contraction_errors("cartpole", "step", float64_trig, torch.float32)
    assert "float32" in error and "fma.rn.f64" in error
    assert not ptx_check.contraction_errors("cartpole", "step", float64_trig, torch.float64)
    assert not ptx_check.contraction_errors("pendulum", "reset", float64_trig, torch.float32)
    assert not ptx_check.contraction_errors("tag", "step", float64_trig)  # Tag: float64 trig

"""The run's memory check (issue 44, item 8): env buffers, rollout buffers, networks with their
optimiser state and evaluation envs, against the memory left, before anything is allocated."""

import os
import subprocess
import sys

import pytest
import torch

from gpu_envs.engine import devices
from gpu_envs.runs.config import ConfigError, RunConfig, apply_overrides
from gpu_envs.runs.presets import PRESETS, preset
from gpu_envs.trainers import memory_budget, ppo
from gpu_envs.trainers.core import TrainingRun
from gpu_envs.trainers.game_faces import make_game

CPU = torch.device("cpu")
MiB, GiB = 2**20, 2**30


def _config(name: str, *overrides: str) -> RunConfig:
    return RunConfig.from_dict(apply_overrides(preset(name), list(overrides)))


@pytest.fixture
def free_memory(monkeypatch):
    """``set(n)``: the host has ``n`` bytes left (for the engine's own check too)."""

    def set_free(size: int) -> None:
        monkeypatch.setattr(devices, "available_cpu_memory", lambda: size)

    return set_free


def _built_games(monkeypatch) -> list[int]:
    """The env counts of the games the trainer builds from now on."""
    built: list[int] = []

    def counting(name, num_envs, *args, **kwargs):
        built.append(num_envs)
        return make_game(name, num_envs, *args, **kwargs)

    monkeypatch.setattr("gpu_envs.trainers.core.make_game", counting)
    return built


def test_a_rollout_too_large_for_the_memory_left_is_refused_before_the_envs_exist(
    free_memory, monkeypatch
):
    """8 envs pass the engine's check of their own buffers, but 8 x 100,000 steps of rollout do
    not fit in 256 MiB: refused naming the batch, with both sizes, before any env is built."""
    free_memory(256 * MiB)
    built = _built_games(monkeypatch)
    config = _config("cartpole", "trainer.num_envs=8", "trainer.train_batch_size=800000")
    with pytest.raises(ConfigError) as error:
        TrainingRun(config, CPU)
    message = str(error.value)
    assert message.startswith("trainer.train_batch_size: the run needs about ")
    assert "but only 0.25 GiB (268,435,456 bytes) are free" in message
    assert "lower trainer.train_batch_size (rollout buffers: " in message
    assert built == []


@pytest.mark.parametrize(
    "overrides, field, part",
    [
        (["trainer.num_envs=2000000", "trainer.train_batch_size=2000000"], "trainer.num_envs", ""),
        (
            ["policy.agent.model.fc_dims=[8000, 8000]"],
            "policy.agent.model.fc_dims",
            "networks",
        ),
        (["evaluation.num_episodes=2000000"], "evaluation.num_episodes", "evaluation envs"),
    ],
)
def test_each_part_is_counted_and_named(free_memory, overrides, field, part):
    """Envs, networks with Adam's state, evaluation envs: each alone exceeds 512 MiB here."""
    free_memory(512 * MiB)
    with pytest.raises(ConfigError, match=f"lower .*{field}.* [(]{part}"):
        TrainingRun(_config("cartpole", *overrides), CPU)


def test_the_largest_part_leads_the_message(free_memory):
    free_memory(64 * MiB)
    config = _config("cartpole", "policy.agent.model.fc_dims=[8000, 8000]")
    with pytest.raises(ConfigError, match=r"^policy[.]agent[.]model[.]fc_dims: the run needs"):
        memory_budget.check_run_memory(config, CPU)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_fits_a_laptop(free_memory, name):
    """8 GiB left: every preset (Tag's A2C full-batch update included) passes."""
    free_memory(8 * GiB)
    memory_budget.check_run_memory(_config(name), CPU)


def test_processes_of_a_cpu_run_share_the_machine(free_memory):
    config = _config("cartpole", "trainer.num_envs=8", "trainer.train_batch_size=80000")
    game = make_game("cartpole", 1, CPU, {})
    parts = memory_budget.estimate(config, game, {"agent": [0]})
    free_memory(sum(part.size for part in parts) + MiB)
    memory_budget.check_run_memory(config, CPU, world_size=1)
    with pytest.raises(ConfigError, match=r"\(2 processes on this machine\)"):
        memory_budget.check_run_memory(config, CPU, world_size=2)


def test_the_gpu_s_free_memory_is_read(monkeypatch):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (123, 456))
    assert devices.available_memory(torch.device("cuda", 0)) == 123


def _tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


@pytest.mark.parametrize(
    "name, num_envs, steps, width",
    [
        ("cartpole", 4, 3, 16),
        ("pendulum", 3, 5, 1),
        ("acrobot", 5, 2, 40),
        ("tag-selfplay", 8, 2, 4),
    ],
)
def test_the_estimate_covers_what_the_run_allocates(name, num_envs, steps, width):
    """At least the bytes of the rollout buffers and the trained networks with Adam's state that
    a real run holds after its first update."""
    config = _config(
        name,
        f"trainer.num_envs={num_envs}",
        f"trainer.train_batch_size={num_envs * steps}",
        *(f"policy.{tag}.model.fc_dims=[{width}]" for tag in preset(name)["policy"]),
        "trainer.compile=false",
    )
    run = TrainingRun(config, CPU)
    run.compile_steps(lambda loss: loss.backward())
    run.collector.reset(0)
    ppo.learn(run.groups, run.collector.collect(), 1, 2)
    buffers = [vars(buffer).values() for buffer in run.collector.buffers.values()]
    rollout = sum(_tensor_bytes(values) for values in buffers)
    networks = 0
    for group in run.groups:
        parameters = list(group.module.parameters())
        networks += _tensor_bytes(parameters) + _tensor_bytes(p.grad for p in parameters)
        if group.optimizer is not None:
            for state in group.optimizer.state.values():
                networks += _tensor_bytes(v for k, v in state.items() if k != "step")
    game = make_game(config.name, 1, CPU, config.env)
    agent_map = game.default_agent_map(list(config.policy))
    parts = {part.name: part.size for part in memory_budget.estimate(config, game, agent_map)}
    assert parts["rollout buffers"] >= rollout
    assert parts["networks"] >= networks
    assert parts["env buffers"] >= _tensor_bytes(run.game.env.buffers_state().values())


def test_the_command_refuses_with_one_line_and_writes_nothing(tmp_path):
    """``gpu-envs train`` in its own process, with 256 MiB left: exit status 1, the message on
    one line, no traceback, no run folder."""
    script = (
        "import sys\n"
        "from gpu_envs.engine import devices\n"
        "devices.available_cpu_memory = lambda: 256 * 2**20\n"
        "from gpu_envs import cli\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "train",
            "cartpole",
            "trainer.num_envs=8",
            "trainer.train_batch_size=800000",
            f"saving.basedir={tmp_path / 'runs'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NUMBA_NUM_THREADS": "1"},
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("gpu-envs train: error: trainer.train_batch_size: the run needs")
    assert not (tmp_path / "runs").exists()

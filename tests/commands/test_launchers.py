"""``gpu-envs train`` started by a launcher joins it: ``torchrun --nproc_per_node 2`` trains one
DDP run (one folder, two processes), never two silent copies; a config that contradicts the
launcher's layout is refused naming both."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpu_envs.commands.train import joined_launch
from gpu_envs.runs.config import ConfigError, RunConfig, apply_overrides
from gpu_envs.runs.presets import preset

TINY = [
    "trainer.num_envs=4",
    "trainer.train_batch_size=32",
    "trainer.total_timesteps=128",
    "trainer.compile=false",
    "trainer.progress_bar=false",
    "evaluation.eval_freq=0",
]


def config(*overrides: str) -> RunConfig:
    return RunConfig.from_dict(apply_overrides(preset("cartpole"), [*TINY, *overrides]))


def test_torchrun_trains_one_run_on_its_processes(tmp_path):
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
        "29517", "-m", "gpu_envs.cli", "train", "cartpole", *TINY, f"saving.basedir={tmp_path}",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "x 2 processes" in result.stdout
    assert len(list(tmp_path.glob("cartpole_ppo/*/ckpt/iteration_*.pth.tar"))) == 1


def test_a_config_of_one_process_takes_the_launchers_layout():
    environ = {"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}
    trainer = joined_launch(config(), environ).trainer
    assert (trainer.devices, trainer.num_nodes, trainer.strategy) == (4, 2, "ddp")
    assert joined_launch(config("trainer.devices=4", "trainer.num_nodes=2"), environ) is not None
    assert joined_launch(config(), {}).trainer.devices == 1
    assert joined_launch(config(), {"WORLD_SIZE": "2", "LT_CLI_USED": "1"}).trainer.devices == 1


def test_a_config_that_contradicts_the_launcher_is_refused():
    with pytest.raises(ConfigError, match=r"launcher started 2 processes .* --devices 2"):
        joined_launch(config("trainer.devices=3"), {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"})


def test_cuda_without_a_gpu_is_one_line(monkeypatch):
    from gpu_envs import cli
    from gpu_envs.engine import devices

    monkeypatch.setattr(devices, "cuda_available", lambda: False)
    with pytest.raises(SystemExit, match=r"^gpu-envs train: error: --device cuda .* no usable"):
        cli.main(["train", "cartpole", "--device", "cuda", *TINY])

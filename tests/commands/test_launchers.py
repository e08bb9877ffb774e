"""``gpu-envs train`` started by a launcher joins it: ``torchrun --nproc_per_node 2``, ``fabric
run`` and SLURM's ``srun`` (its variables set here, as ``srun --ntasks-per-node 2`` sets them)
each train one DDP run (one folder, two processes), never two silent copies; a config that
contradicts the launcher's layout is refused naming both."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_envs.commands.train import joined_launch, launcher_layout
from gpu_envs.runs.config import ConfigError, RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from tests.helpers.ports import free_port

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
        str(free_port()), "-m", "gpu_envs.cli", "train", "cartpole", *TINY,
        f"saving.basedir={tmp_path}",
    ]  # fmt: skip
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=600, env=_launcher_free_environment()
    )
    assert result.returncode == 0, result.stderr[-4000:]
    _one_run(tmp_path, result.stdout)


def _one_run(tmp_path, stdout: str) -> None:
    """The launched processes trained one run on 2 processes: one folder, one final checkpoint."""
    assert "x 2 processes" in stdout
    assert len(list(tmp_path.glob("cartpole_ppo/*/ckpt/iteration_*.pth.tar"))) == 1


def _launcher_free_environment() -> dict[str, str]:
    """This environment without the variables of a launcher that may have started the tests."""
    prefixes = ("SLURM_", "LT_", "TORCHELASTIC_")
    names = ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes) and k not in names}


@pytest.mark.slow
def test_srun_tasks_train_one_run(tmp_path):
    """Two tasks of ``srun --ntasks-per-node 2`` (SLURM's variables, no SLURM here): Fabric's
    SLURMEnvironment ranks them, the trainer takes SLURM's layout."""
    base = {
        **_launcher_free_environment(),
        "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "2", "SLURM_NNODES": "1",
        "SLURM_NODEID": "0", "SLURM_JOB_NAME": "cartpole-ppo", "SLURM_JOB_ID": "4242",
        "SLURM_NODELIST": "127.0.0.1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
    }  # fmt: skip
    command = [sys.executable, "-m", "gpu_envs.cli", "train", "cartpole", *TINY]
    tasks = [
        subprocess.Popen(
            [*command, f"saving.basedir={tmp_path}"],
            env={**base, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    outputs = [task.communicate(timeout=400) for task in tasks]
    for task, (_, stderr) in zip(tasks, outputs):
        assert task.returncode == 0, stderr[-4000:]
    _one_run(tmp_path, outputs[0][0])


#: Lightning's ``fabric`` command: beside this Python (a virtual environment), else on the PATH.
FABRIC = next(
    (str(p) for p in (Path(sys.executable).with_name("fabric"),) if p.is_file()),
    shutil.which("fabric"),
)


@pytest.mark.slow
@pytest.mark.skipif(FABRIC is None, reason="needs Lightning's `fabric` command")
def test_fabric_run_trains_one_run_on_its_processes(tmp_path):
    script = subprocess.run(
        [sys.executable, "-m", "gpu_envs.commands.train", "--path"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    command = [
        FABRIC, "run", "--accelerator", "cpu", "--strategy", "ddp", "--devices",
        "2", "--main-port", str(free_port()), script, "cartpole", *TINY,
        f"saving.basedir={tmp_path}",
    ]  # fmt: skip
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=400, env=_launcher_free_environment()
    )
    assert result.returncode == 0, result.stderr[-4000:]
    _one_run(tmp_path, result.stdout)


def test_launcher_layouts():
    assert launcher_layout({}) is None
    assert launcher_layout({"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"})[:3] == (8, 4, 2)
    slurm = {"SLURM_NTASKS": "8", "SLURM_NTASKS_PER_NODE": "4", "SLURM_NNODES": "2"}
    assert launcher_layout(slurm) == (8, 4, 2, "SLURM (srun)")
    assert launcher_layout({**slurm, "SLURM_JOB_NAME": "interactive"}) is None
    assert launcher_layout({"SLURM_NTASKS": "1", "SLURM_NTASKS_PER_NODE": "1"}) is None
    # torchrun inside a SLURM allocation: torchrun's processes (as Fabric ranks them)
    assert launcher_layout({**slurm, "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"})[:3] == (2, 2, 1)
    with pytest.raises(ConfigError, match=r"SLURM \(srun\) started 8 processes .* --devices 4"):
        joined_launch(config("trainer.devices=2"), slurm)
    assert joined_launch(config(), slurm).trainer.devices == 4


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

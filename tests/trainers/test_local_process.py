"""One process on the CPU trains without Fabric (``fabric_loop.LocalProcess``): Lightning and
torch._dynamo are not imported, and the run is the one Fabric's single-device strategy trains."""

import subprocess
import sys

import pytest
import torch

from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset

SMALL = [
    "trainer.num_envs=8",
    "trainer.train_batch_size=64",
    "trainer.total_timesteps=384",
    "trainer.progress_bar=false",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=2",
    "evaluation.num_episodes=4",
    "saving.tag=example",
]

_CHILD = """
import sys
import torch
from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from gpu_envs.trainers.fabric_loop import train

summary = train(RunConfig.from_dict(apply_overrides(preset("cartpole"), sys.argv[1:])))
assert summary["iterations"] == 6, summary
heavy = ("lightning", "lightning.fabric", "torch._dynamo", "torchmetrics")
print("imported:", [name for name in heavy if name in sys.modules])
cached = [
    name for name in ("add_param_group", "state_dict", "load_state_dict", "zero_grad")
    if hasattr(getattr(torch.optim.Optimizer, name).__wrapped__, "__dynamo_disable")
]
print("left cached:", cached)
"""


def _config(tmp_path, *extra):
    return RunConfig.from_dict(
        apply_overrides(preset("cartpole"), [*SMALL, f"saving.basedir={tmp_path}", *extra])
    )


def test_gpu_envs_train_on_one_cpu_imports_no_lightning_and_no_dynamo(tmp_path):
    command = [sys.executable, "-c", _CHILD, *SMALL, f"saving.basedir={tmp_path}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "imported: []" in result.stdout
    assert "left cached: []" in result.stdout  # torch's own caching is back after the run
    log = tmp_path / "cartpole_ppo" / "example" / "log"
    assert (log / "csv" / "version_0" / "metrics.csv").read_text().startswith("charts/")
    assert list((log / "serial").glob("events.out.tfevents.*"))


def test_the_local_process_trains_the_run_fabric_trains(tmp_path):
    from gpu_envs.trainers import fabric_loop

    weights = []
    for driver in ("fabric", "local"):
        config = _config(tmp_path / driver)
        if driver == "fabric":
            fabric_loop._fit(fabric_loop.make_fabric(config), config, None)
        else:
            assert fabric_loop.one_cpu_process(config)
            fabric_loop.train(config)
        ckpt = tmp_path / driver / "cartpole_ppo" / "example" / "ckpt" / "iteration_6.pth.tar"
        weights.append(torch.load(ckpt, weights_only=True))
    fabrics, locals_ = (state["policies"]["agent"] for state in weights)
    for name, tensor in fabrics["model"].items():
        assert torch.equal(tensor, locals_["model"][name]), name
    for number, state in fabrics["optimizer"]["state"].items():
        for key, tensor in state.items():
            assert torch.equal(tensor, locals_["optimizer"]["state"][number][key]), (number, key)


@pytest.mark.parametrize(
    ("overrides", "environ", "local"),
    [
        ((), {}, True),
        (("trainer.accelerator=cpu",), {}, True),
        (("trainer.accelerator=cpu", "trainer.devices=2"), {}, False),
        (("trainer.accelerator=cpu", "trainer.strategy=ddp"), {}, False),
        (("trainer.accelerator=cpu",), {"WORLD_SIZE": "2"}, False),
        (("trainer.accelerator=cpu",), {"LT_CLI_USED": "1"}, False),
        (("trainer.accelerator=cpu",), {"SLURM_NTASKS": "1"}, False),
    ],
)
def test_only_one_process_on_the_cpu_without_a_launcher_runs_locally(
    tmp_path, monkeypatch, overrides, environ, local
):
    from gpu_envs.trainers import fabric_loop

    for name in fabric_loop.LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert fabric_loop.one_cpu_process(_config(tmp_path, *overrides)) is local

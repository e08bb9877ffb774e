"""A crafted or damaged checkpoint that still loads, resumed as a user does (``gpu-envs train
--resume`` in a fresh process): refused by name before anything is restored, never a crash (a
mis-shaped Adam moment corrupted the heap in torch's fused Adam: SIGSEGV), and a resume of the
run's folder falls back to the run's previous good checkpoint (issue 44, item 10)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs import run_control
from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from gpu_envs.trainers.fabric_loop import train

SMALL = [
    "trainer.num_envs=8",
    "trainer.train_batch_size=64",
    "trainer.total_timesteps=192",  # 3 iterations
    "trainer.progress_bar=false",
    "trainer.compile=false",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=0",
    "saving.metrics_log_freq=1000",
    "saving.model_params_save_freq=1",
    "saving.tag=crafted",
]
MOMENT = "policies.agent.optimizer.state.0.exp_avg"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """The folder of a 3-iteration CartPole run, marked interrupted (it may be resumed)."""
    basedir = tmp_path_factory.mktemp("trained")
    config = RunConfig.from_dict(
        apply_overrides(preset("cartpole"), [*SMALL, f"saving.basedir={basedir}"])
    )
    folder = Path(train(config)["experiment"])
    run_control.write_status(folder, "interrupted")
    return folder


@pytest.fixture
def crafted(trained, tmp_path) -> Path:
    """A copy of the run whose newest checkpoint holds Adam moments of another shape."""
    folder = tmp_path / "run"
    shutil.copytree(trained, folder)
    newest = ckpt.iteration_path(folder / "ckpt", 3)
    state = torch.load(newest, weights_only=True)
    state["policies"]["agent"]["optimizer"]["state"][0]["exp_avg"] = torch.zeros(3)
    torch.save(state, newest)
    return folder


def _resume(target: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_envs.cli",
            "train",
            "--resume",
            str(target),
            "trainer.total_timesteps=384",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_a_named_checkpoint_with_mis_shaped_adam_moments_is_refused_naming_the_field(crafted):
    newest = ckpt.iteration_path(crafted / "ckpt", 3)
    before = sorted(p.name for p in (crafted / "ckpt").iterdir())
    done = _resume(newest)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output  # (a segmentation fault: -11)
    assert f"checkpoint {newest}: the field '{MOMENT}' is a (3,) torch.float32 tensor" in output
    previous = ckpt.iteration_path(crafted / "ckpt", 2)
    assert f"The run's previous good checkpoint is {previous}" in output
    assert "Traceback" not in output
    assert sorted(p.name for p in (crafted / "ckpt").iterdir()) == before  # nothing written


@pytest.mark.slow
def test_a_resumed_run_folder_falls_back_to_its_previous_good_checkpoint(crafted):
    newest = ckpt.iteration_path(crafted / "ckpt", 3)
    done = _resume(crafted)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"--resume: skipping {newest}: checkpoint {newest}: the field '{MOMENT}'" in output
    previous = ckpt.iteration_path(crafted / "ckpt", 2)
    assert f"Resuming from {previous} at iteration 2" in output
    assert ckpt.load_checkpoint(newest)["iteration"] == 3  # written again by the resumed run
    assert ckpt.load_checkpoint(ckpt.iteration_path(crafted / "ckpt", 6))["iteration"] == 6


@pytest.mark.slow
def test_a_named_checkpoint_that_does_not_read_names_a_readable_one(trained, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(trained, folder)
    newest = ckpt.iteration_path(folder / "ckpt", 3)
    newest.write_bytes(newest.read_bytes()[:100])  # cut short (a copy that did not finish)
    done = _resume(newest)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    previous = ckpt.iteration_path(folder / "ckpt", 2)
    assert f"resume with --resume {previous}" in output
    assert "Traceback" not in output
